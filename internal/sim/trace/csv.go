package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Columns maps a generic CSV job list's columns to a job's fields
// (ReadCSV). Each field names a header column; Submit and either
// Duration or both Iterations and Throughput are required, the rest may
// be empty (absent from the file).
type Columns struct {
	ID         string `json:"id,omitempty"`         // a unique job id; default "csv-L", L the line
	Submit     string `json:"submit"`               // the submission time (SubmitUnit)
	Duration   string `json:"duration,omitempty"`   // the run time (DurationUnit, or a Go duration like 1h30m)
	GPUs       string `json:"gpus,omitempty"`       // GPUs asked for; a fraction (0.5) asks for a share of one
	GPUModel   string `json:"gpuModel,omitempty"`   // the GPU models the job may run on, '|'-separated
	CPU        string `json:"cpu,omitempty"`        // cores (2, 0.5) or a quantity (500m)
	Memory     string `json:"memory,omitempty"`     // MemoryUnit, or a quantity (16Gi)
	Priority   string `json:"priority,omitempty"`   // the tier, 0 (urgent) .. 3 (low)
	Queue      string `json:"queue,omitempty"`      // the queue's name
	Iterations string `json:"iterations,omitempty"` // work in iterations (with Throughput)
	Throughput string `json:"throughput,omitempty"` // iterations a second (with Iterations)
	// NodeSelector is a node selector, key=value pairs separated by ';'
	// (role=cpu;zone=a): roles such as CPU node and GPU node replayed.
	NodeSelector string `json:"nodeSelector,omitempty"`

	// SubmitUnit reads Submit: s (the default), ms, us, min, h (numbers
	// from any origin), or time (timestamps, RFC 3339 or
	// "YYYY-MM-DD hh:mm:ss" as UTC). Arrivals count from the earliest.
	SubmitUnit string `json:"submitUnit,omitempty"`
	// DurationUnit reads Duration numbers: s (the default), ms, us, min, h.
	DurationUnit string `json:"durationUnit,omitempty"`
	// MemoryUnit reads Memory numbers: B, KiB, MiB (the default), GiB.
	MemoryUnit string `json:"memoryUnit,omitempty"`
	// Separator is "," (the default) or "\t" (or "tab").
	Separator string `json:"separator,omitempty"`
}

// columnKeys are Columns' keys in ParseColumns' K=V form, in order.
var columnKeys = []string{"id", "submit", "duration", "gpus", "gpuModel", "cpu", "memory", "priority", "queue",
	"iterations", "throughput", "nodeSelector", "submitUnit", "durationUnit", "memoryUnit", "separator"}

// columnNames is how many of columnKeys name columns (the rest are units
// and the separator).
const columnNames = 12

// field returns the address of key's field.
func (c *Columns) field(key string) *string {
	return map[string]*string{"id": &c.ID, "submit": &c.Submit, "duration": &c.Duration, "gpus": &c.GPUs,
		"gpuModel": &c.GPUModel, "cpu": &c.CPU, "memory": &c.Memory, "priority": &c.Priority, "queue": &c.Queue,
		"iterations": &c.Iterations, "throughput": &c.Throughput, "nodeSelector": &c.NodeSelector, "submitUnit": &c.SubmitUnit,
		"durationUnit": &c.DurationUnit, "memoryUnit": &c.MemoryUnit, "separator": &c.Separator}[key]
}

// maxColumnsFileBytes bounds a column mapping file.
const maxColumnsFileBytes = 64 << 10

// ParseColumns reads a column mapping: K=V pairs separated by commas
// (submit=ts,duration=dur,gpus=n_gpu), or the path of a YAML or JSON file
// of the same keys (a value ending in .yaml, .yml or .json). The result
// is validated.
func ParseColumns(spec string) (Columns, error) {
	var c Columns
	spec = strings.TrimSpace(spec)
	if ext := strings.ToLower(spec[max(0, strings.LastIndexByte(spec, '.')):]); ext == ".yaml" || ext == ".yml" || ext == ".json" {
		f, err := os.Open(spec)
		if err != nil {
			return c, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxColumnsFileBytes+1))
		if err != nil {
			return c, fmt.Errorf("%s: %w", spec, err)
		}
		if len(b) > maxColumnsFileBytes {
			return c, fmt.Errorf("%s: larger than %d bytes", spec, maxColumnsFileBytes)
		}
		if err := yaml.UnmarshalStrict(b, &c); err != nil {
			return c, fmt.Errorf("%s: %v", spec, err)
		}
		if err := c.Validate(); err != nil {
			return c, fmt.Errorf("%s: %w", spec, err)
		}
		return c, nil
	}
	parts := strings.Split(spec, ",")
	if len(parts) > len(columnKeys) {
		return c, fmt.Errorf("at most %d settings", len(columnKeys))
	}
	seen := map[string]bool{}
	for _, p := range parts {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return c, fmt.Errorf("want K=V settings separated by commas (or a .yaml file), got %q", truncate(p))
		}
		f := c.field(k)
		if f == nil {
			return c, fmt.Errorf("unknown key %q: want %s", truncate(k), strings.Join(columnKeys, ", "))
		}
		if seen[k] {
			return c, fmt.Errorf("%s: set twice", k)
		}
		seen[k] = true
		*f = v
	}
	return c, c.Validate()
}

var (
	timeUnits   = map[string]float64{"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "min": 60, "h": 3600}
	memoryUnits = map[string]int64{"B": 1, "KiB": 1 << 10, "": 1 << 20, "MiB": 1 << 20, "GiB": 1 << 30}
)

// Validate checks that the mapping names what a job needs and that its
// units are known; errors name the key.
func (c Columns) Validate() error {
	if c.Submit == "" {
		return errors.New("submit: required (the column of the submission times)")
	}
	if c.Duration == "" && (c.Iterations == "" || c.Throughput == "") {
		return errors.New("duration: required, or both iterations and throughput")
	}
	if _, ok := timeUnits[c.SubmitUnit]; !ok && c.SubmitUnit != "time" {
		return fmt.Errorf("submitUnit: want s, ms, us, min, h or time, got %q", truncate(c.SubmitUnit))
	}
	if _, ok := timeUnits[c.DurationUnit]; !ok {
		return fmt.Errorf("durationUnit: want s, ms, us, min or h, got %q", truncate(c.DurationUnit))
	}
	if _, ok := memoryUnits[c.MemoryUnit]; !ok {
		return fmt.Errorf("memoryUnit: want B, KiB, MiB or GiB, got %q", truncate(c.MemoryUnit))
	}
	if _, err := c.sep(); err != nil {
		return err
	}
	used := map[string]string{}
	for _, k := range columnKeys[:columnNames] {
		col := *c.field(k)
		if col == "" {
			continue
		}
		if other, dup := used[col]; dup {
			return fmt.Errorf("%s: column %q is already %s", k, truncate(col), other)
		}
		used[col] = k
	}
	return nil
}

func (c Columns) sep() (byte, error) {
	switch c.Separator {
	case "", ",":
		return ',', nil
	case "\t", "tab", `\t`:
		return '\t', nil
	}
	return 0, fmt.Errorf("separator: want , or tab, got %q", truncate(c.Separator))
}

// Host resources a CSV job gets when the mapping names no cpu or memory
// column: Philly's per GPU, and a CPU job one core and 4 GiB.
const (
	csvCPUJobCPU    = 1000    // millicores
	csvCPUJobMemory = 4 << 30 // bytes
)

// ReadCSV reads a generic job list: a header line, then one job per row,
// its fields where cols says (Columns). Jobs are returned sorted by
// submission (ties keep file order), Arrival from the earliest. A job
// asks for its GPUs (a fraction asks for that share of one GPU; more than
// one must be whole), its cpu and memory (PhillyCPUPerGPU and
// PhillyMemoryPerGPU a GPU when the file has neither column, or
// csvCPUJobCPU and csvCPUJobMemory for a CPU job), at its priority
// (default 2, medium) in its queue; GPU models become a gpu.model
// selector. An empty cell of an optional column keeps its default.
// Duration is the duration column, or iterations / throughput.
// Task.Duration is left unset. The workload is named "csv". Errors are
// *ParseError naming the line and column; no row is skipped.
func ReadCSV(r io.Reader, cols Columns) (Workload, error) {
	if err := cols.Validate(); err != nil {
		return Workload{}, err
	}
	sep, _ := cols.sep()
	rr := newRowReader(r, sep)
	var required []string
	for _, k := range columnKeys[:columnNames] {
		if col := *cols.field(k); col != "" {
			required = append(required, col)
		}
	}
	if err := rr.readHeader(required...); err != nil {
		return Workload{}, err
	}
	type row struct {
		at  float64 // seconds, from the file's origin
		job Arrival
	}
	var rows []row
	seen := map[string]bool{}
	err := rr.eachRow(func() error {
		at, err := csvSubmit(rr, cols)
		if err != nil {
			return err
		}
		j, err := csvJob(rr, cols, seen)
		if err != nil {
			return err
		}
		rows = append(rows, row{at, j})
		return nil
	})
	if err != nil {
		return Workload{}, err
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	w := Workload{Name: "csv", Arrivals: make([]Arrival, len(rows))}
	for i, rw := range rows {
		w.Arrivals[i] = rw.job
		w.Arrivals[i].At = seconds(rw.at - rows[0].at)
	}
	return w, nil
}

// csvSubmit reads the current row's submission time in seconds.
func csvSubmit(rr *rowReader, cols Columns) (float64, error) {
	s := rr.get(cols.Submit)
	if cols.SubmitUnit == "time" {
		for _, layout := range []string{time.RFC3339Nano, phillyTime} {
			if t, err := time.Parse(layout, s); err == nil {
				if t.Year() < 1970 || t.Year() > 2200 {
					return 0, rr.errf(cols.Submit, "%q is out of range (years 1970..2200)", truncate(s))
				}
				return float64(t.UnixNano()) / 1e9, nil
			}
		}
		return 0, rr.errf(cols.Submit, "want an RFC 3339 or YYYY-MM-DD hh:mm:ss time, got %q", truncate(s))
	}
	unit := timeUnits[cols.SubmitUnit]
	v, err := parseFloat(s, -maxSeconds/unit, maxSeconds/unit)
	if err != nil {
		return 0, rr.wrap(cols.Submit, err)
	}
	return v * unit, nil
}

// csvJob reads the current row's job, all but its arrival.
func csvJob(rr *rowReader, cols Columns, seen map[string]bool) (Arrival, error) {
	j := Arrival{ID: fmt.Sprintf("csv-%d", rr.line)}
	if cols.ID != "" {
		id, err := rr.uniqueID(cols.ID, "job", seen)
		if err != nil {
			return Arrival{}, err
		}
		j.ID = id
	}
	dur, err := csvDuration(rr, cols)
	if err != nil {
		return Arrival{}, err
	}
	j.Duration = dur
	gpuMilli := int64(0)
	if cols.GPUs != "" && rr.get(cols.GPUs) != "" {
		g, err := parseFloat(rr.get(cols.GPUs), 0, api.MaxDeviceCount)
		if err != nil {
			return Arrival{}, rr.wrap(cols.GPUs, err)
		}
		gpuMilli = int64(math.Round(g * 1000))
		if g > 1 && g != math.Trunc(g) {
			return Arrival{}, rr.errf(cols.GPUs, "more than one GPU must be whole, got %v", g)
		}
		if g > 0 && gpuMilli == 0 {
			return Arrival{}, rr.errf(cols.GPUs, "%v is below a thousandth of a GPU", g)
		}
	}
	gpus := max(1, (gpuMilli+999)/1000)
	cpu, mem := int64(csvCPUJobCPU), int64(csvCPUJobMemory)
	if gpuMilli > 0 {
		cpu, mem = gpus*PhillyCPUPerGPU, gpus*PhillyMemoryPerGPU
	}
	if cols.CPU != "" && rr.get(cols.CPU) != "" {
		if cpu, err = csvQuantity(rr.get(cols.CPU), resource.CPU, 1000); err != nil {
			return Arrival{}, rr.wrap(cols.CPU, err)
		}
	}
	if cols.Memory != "" && rr.get(cols.Memory) != "" {
		if mem, err = csvQuantity(rr.get(cols.Memory), resource.Memory, memoryUnits[cols.MemoryUnit]); err != nil {
			return Arrival{}, rr.wrap(cols.Memory, err)
		}
	}
	j.Task = api.Task{Resources: resource.List{resource.CPU: cpu, resource.Memory: mem}, Priority: ptr(api.PriorityMedium)}
	if gpuMilli > 0 {
		j.Task.Resources[GPU] = gpuMilli
	}
	if cols.GPUModel != "" && gpuMilli > 0 {
		if spec := rr.get(cols.GPUModel); spec != "" {
			for _, m := range strings.Split(spec, "|") {
				if err := api.ValidateLabelValue(m); err != nil || m == "" {
					return Arrival{}, rr.errf(cols.GPUModel, "%q is not a '|'-separated list of GPU models", truncate(spec))
				}
			}
			j.Task.NodeSelector = map[string]string{ModelLabel: spec}
		}
	}
	if cols.Priority != "" && rr.get(cols.Priority) != "" {
		p, err := parseInt(rr.get(cols.Priority), 0, 3)
		if err != nil {
			return Arrival{}, rr.wrap(cols.Priority, err)
		}
		j.Task.Priority = ptr(int(p))
	}
	if cols.Queue != "" {
		j.Task.Queue = rr.get(cols.Queue)
	}
	if cols.NodeSelector != "" && rr.get(cols.NodeSelector) != "" {
		spec := rr.get(cols.NodeSelector)
		for _, pair := range strings.Split(spec, ";") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || api.ValidateLabelKey(k) != nil || api.ValidateLabelValue(v) != nil {
				return Arrival{}, rr.errf(cols.NodeSelector, "%q is not key=value pairs separated by ';' (a node label each)", truncate(spec))
			}
			if _, dup := j.Task.NodeSelector[k]; dup {
				return Arrival{}, rr.errf(cols.NodeSelector, "%s: given twice (the gpuModel column sets %s)", k, ModelLabel)
			}
			if j.Task.NodeSelector == nil {
				j.Task.NodeSelector = map[string]string{}
			}
			j.Task.NodeSelector[k] = v
		}
	}
	if err := j.Task.Validate(); err != nil {
		return Arrival{}, rr.wrap("", err)
	}
	return j, nil
}

// csvDuration reads the current row's run time.
func csvDuration(rr *rowReader, cols Columns) (time.Duration, error) {
	if cols.Duration != "" {
		s := rr.get(cols.Duration)
		if d, err := time.ParseDuration(s); err == nil && strings.ContainsAny(s, "hmsµun") {
			if d <= 0 || d > seconds(maxSeconds) {
				return 0, rr.errf(cols.Duration, "%v is out of range (0, %v]", d, seconds(maxSeconds))
			}
			return d, nil
		}
		unit := timeUnits[cols.DurationUnit]
		v, err := parseFloat(s, 0, maxSeconds/unit)
		if err != nil {
			return 0, rr.wrap(cols.Duration, err)
		}
		if v == 0 {
			return 0, rr.wrap(cols.Duration, errNotPositive)
		}
		return seconds(v * unit), nil
	}
	it, err := parseFloat(rr.get(cols.Iterations), 0, 1e15)
	if err != nil {
		return 0, rr.wrap(cols.Iterations, err)
	}
	th, err := parseFloat(rr.get(cols.Throughput), 0, 1e12)
	if err != nil {
		return 0, rr.wrap(cols.Throughput, err)
	}
	if it == 0 || th == 0 {
		return 0, rr.errf(cols.Throughput, "iterations and throughput must be positive, got %v and %v", it, th)
	}
	if it/th > maxSeconds {
		return 0, rr.errf(cols.Throughput, "iterations / throughput is %v s, over %v", it/th, maxSeconds)
	}
	return seconds(it / th), nil
}

// csvQuantity reads a plain number (times unit) or a quantity as the API
// writes it ("500m", "16Gi") in the resource's canonical unit.
func csvQuantity(s string, name resource.Name, unit int64) (int64, error) {
	if v, err := parseFloat(s, 0, float64(resource.MaxValue)/float64(unit)); err == nil {
		return int64(math.Round(v * float64(unit))), nil
	}
	return resource.ParseQuantity(s, name.Scale())
}
