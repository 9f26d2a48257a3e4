package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Workload file formats (WorkloadOptions.Format).
const (
	FormatAuto   = "auto"   // told from the first line (DetectFormat)
	FormatOpenb  = "openb"  // an openb pod list (ReadOpenbPods)
	FormatPhilly = "philly" // a Philly job list (ReadPhilly)
	FormatGavel  = "gavel"  // a Gavel .trace (ReadGavelTrace), with Throughputs
	FormatCSV    = "csv"    // a generic CSV with a column mapping (ReadCSV)
)

// Formats are the workload file formats, FormatAuto first.
var Formats = []string{FormatAuto, FormatOpenb, FormatPhilly, FormatGavel, FormatCSV}

// WorkloadOptions are LoadWorkloadWith's settings beside the spec.
type WorkloadOptions struct {
	// TracesDir holds the shared traces (DefaultTracesDir when empty).
	TracesDir string
	// Cluster matters to synthetic workloads only (LoadWorkload).
	Cluster Cluster
	// Format reads a file: workload; "" is FormatAuto.
	Format string
	// Throughputs is the Gavel throughput table a gavel file's jobs are
	// timed by (default TracesDir's simulation_throughputs_isolated.csv).
	Throughputs string
	// Columns maps a csv file's columns; setting it makes FormatAuto
	// read csv.
	Columns *Columns
}

// LoadWorkloadWith is LoadWorkload with a file: spec besides: file:PATH
// reads PATH (relative to the working directory, not TracesDir) in
// o.Format, told from its first line when auto. The workload is named
// spec; errors name the spec, the path, the line and the column.
func LoadWorkloadWith(spec string, o WorkloadOptions) (Workload, error) {
	kind, path, _ := strings.Cut(spec, ":")
	if kind != "file" {
		if o.Format != "" && o.Format != FormatAuto || o.Columns != nil {
			return Workload{}, fmt.Errorf("workload %q: --format and --columns apply to file:PATH workloads only", truncate(spec))
		}
		return LoadWorkload(spec, o.TracesDir, o.Cluster)
	}
	return namedWorkload(spec)(loadWorkloadFile(path, o))
}

func loadWorkloadFile(path string, o WorkloadOptions) (Workload, error) {
	if path == "" {
		return Workload{}, errors.New("want file:PATH of a workload file")
	}
	format := o.Format
	if format == "" {
		format = FormatAuto
	}
	if !slices.Contains(Formats, format) {
		return Workload{}, fmt.Errorf("format: want %s, got %q", strings.Join(Formats, ", "), truncate(format))
	}
	if format == FormatCSV && o.Columns == nil {
		return Workload{}, errors.New("format csv needs a column mapping (--columns submit=COL,duration=COL,...)")
	}
	if o.Columns != nil && format != FormatCSV && format != FormatAuto {
		return Workload{}, fmt.Errorf("a column mapping is for format csv, not %s", format)
	}
	f, err := os.Open(path)
	if err != nil {
		return Workload{}, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, MaxLineBytes+2)
	if format == FormatAuto {
		if o.Columns != nil {
			format = FormatCSV
		} else {
			first, err := firstLine(br)
			if err != nil {
				return Workload{}, fmt.Errorf("%s: %w", path, err)
			}
			if format = DetectFormat(first); format == "" {
				return Workload{}, fmt.Errorf("%s: cannot tell its format from its first line %q: name it with --format openb|philly|gavel|csv", path, truncate(first))
			}
		}
	}
	var w Workload
	switch format {
	case FormatOpenb:
		w, err = ReadOpenbPods(br)
	case FormatPhilly:
		w, err = ReadPhilly(br)
	case FormatGavel:
		var th Throughputs
		if th, err = loadThroughputs(o); err != nil {
			return Workload{}, err
		}
		w, err = ReadGavelTrace(br, th)
	case FormatCSV:
		w, err = ReadCSV(br, *o.Columns)
	}
	if err != nil {
		return Workload{}, fmt.Errorf("%s (%s): %w", path, format, err)
	}
	return w, nil
}

// loadThroughputs reads o's Gavel throughput table.
func loadThroughputs(o WorkloadOptions) (Throughputs, error) {
	if o.Throughputs == "" {
		th, err := readTrace(o.TracesDir, GavelThroughputsFile, ReadGavelThroughputs)
		if err != nil {
			return nil, fmt.Errorf("a gavel trace needs a throughput table (--throughputs PATH): %w", err)
		}
		return th, nil
	}
	f, err := os.Open(o.Throughputs)
	if err != nil {
		return nil, fmt.Errorf("throughputs: %w", err)
	}
	defer f.Close()
	th, err := ReadGavelThroughputs(f)
	if err != nil {
		return nil, fmt.Errorf("throughputs %s: %w", filepath.Clean(o.Throughputs), err)
	}
	return th, nil
}

// firstLine returns the first non-blank line of br without consuming it.
func firstLine(br *bufio.Reader) (string, error) {
	b, err := br.Peek(MaxLineBytes + 1)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return "", err
	}
	s := strings.TrimPrefix(string(b), "\ufeff")
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) != "" {
			return line, nil
		}
	}
	return "", errors.New("empty file")
}

// DetectFormat tells a workload file's format from its first line, or
// returns "" when that line does not say: openb's header names cpu_milli,
// memory_mib, num_gpu and gpu_milli; Philly's timestamp, duration,
// num_gpus and cluster; a Gavel trace has no header, and its first line
// is its tab-separated fields (gavelColumns). A generic CSV
// needs its column mapping and is never guessed.
func DetectFormat(first string) string {
	if strings.Count(first, "\t") == len(gavelColumns)-1 {
		return FormatGavel
	}
	cols := map[string]bool{}
	for _, c := range strings.Split(first, ",") {
		cols[strings.Trim(strings.TrimSpace(c), `"`)] = true
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if !cols[n] {
				return false
			}
		}
		return true
	}
	switch {
	case has("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
		return FormatOpenb
	case has("timestamp", "duration", "num_gpus", "cluster"):
		return FormatPhilly
	}
	return ""
}
