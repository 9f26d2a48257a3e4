package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

func mustColumns(t *testing.T, spec string) Columns {
	t.Helper()
	c, err := ParseColumns(spec)
	if err != nil {
		t.Fatalf("ParseColumns(%q): %v", spec, err)
	}
	return c
}

// TestReadCSV: a generic job list, its columns mapped: jobs sorted by
// submission with arrivals from the earliest, GPUs whole or a share,
// host resources as given or Philly's per GPU, models as a selector,
// durations in the unit named or as Go durations or from iterations and
// throughput, priorities and queues as written.
func TestReadCSV(t *testing.T) {
	const file = "job,ts,dur,n_gpu,model,cores,mem,tier,vc\n" +
		"b,130,1h,2,V100|A100,,,1,team-a\n" +
		"a,100,60,0.5,,2,1024,,\n" +
		"c,100,90,0,,500m,2Gi,3,team-b\n"
	w, err := ReadCSV(strings.NewReader(file), mustColumns(t, "id=job,submit=ts,duration=dur,gpus=n_gpu,gpuModel=model,cpu=cores,memory=mem,priority=tier,queue=vc"))
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		ID       string
		Arrival  time.Duration
		Duration time.Duration
		Res      resource.List
		Sel      map[string]string
		Prio     int
		Queue    string
	}
	var gs []got
	for _, j := range w.Arrivals {
		gs = append(gs, got{j.ID, j.At, j.Duration, j.Task.Resources, j.Task.NodeSelector, *j.Task.Priority, j.Task.Queue})
	}
	want := []got{
		{"a", 0, time.Minute, resource.List{resource.CPU: 2000, resource.Memory: 1 << 30, GPU: 500}, nil, 2, ""},
		{"c", 0, 90 * time.Second, resource.List{resource.CPU: 500, resource.Memory: 2 << 30}, nil, 3, "team-b"},
		{"b", 30 * time.Second, time.Hour, resource.List{resource.CPU: 2 * PhillyCPUPerGPU, resource.Memory: 2 * PhillyMemoryPerGPU, GPU: 2000},
			map[string]string{ModelLabel: "V100|A100"}, 1, "team-a"},
	}
	if d := cmp.Diff(want, gs); d != "" {
		t.Errorf("jobs (-want +got):\n%s", d)
	}
	if w.Name != "csv" {
		t.Errorf("name %q", w.Name)
	}

	// A node selector column: a CPU job kept to CPU nodes, a GPU job to a
	// role beside its model; a bad one names its line and column.
	w, err = ReadCSV(strings.NewReader("t,d,g,m,sel\n0,60,0,,role=cpu\n1,60,1,A100,role=gpu;zone=a\n2,60,0,,\n"),
		mustColumns(t, "submit=t,duration=d,gpus=g,gpuModel=m,nodeSelector=sel"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]map[string]string{{"role": "cpu"}, {ModelLabel: "A100", "role": "gpu", "zone": "a"}, nil},
		[]map[string]string{w.Arrivals[0].Task.NodeSelector, w.Arrivals[1].Task.NodeSelector, w.Arrivals[2].Task.NodeSelector}); d != "" {
		t.Errorf("node selectors (-want +got):\n%s", d)
	}
	for _, bad := range []string{"role", "role=a b", ModelLabel + "=x"} {
		_, err := ReadCSV(strings.NewReader("t,d,g,m,sel\n0,60,1,A100,"+bad+"\n"), mustColumns(t, "submit=t,duration=d,gpus=g,gpuModel=m,nodeSelector=sel"))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != "sel" {
			t.Errorf("node selector %q: %v, want an error naming column sel", bad, err)
		}
	}

	// Timestamps, tabs, minutes, iterations over throughput, default ids.
	const tsv = "when\tsteps\trate\n2020-01-01 00:10:00\t600\t2\n2020-01-01T00:00:00Z\t100\t0.5\n"
	w, err = ReadCSV(strings.NewReader(tsv), mustColumns(t, "submit=when,submitUnit=time,iterations=steps,throughput=rate,separator=tab"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Arrivals) != 2 || w.Arrivals[0].ID != "csv-3" || w.Arrivals[0].Duration != 200*time.Second || w.Arrivals[1].At != 10*time.Minute || w.Arrivals[1].Duration != 300*time.Second {
		t.Errorf("tsv jobs: %+v", w.Arrivals)
	}
	if r := w.Arrivals[0].Task.Resources; r[resource.CPU] != csvCPUJobCPU || r[resource.Memory] != csvCPUJobMemory {
		t.Errorf("a CPU job's defaults: %v", r)
	}
	w, err = ReadCSV(strings.NewReader("t,d\n0,2\n"), mustColumns(t, "submit=t,duration=d,durationUnit=min"))
	if err != nil || w.Arrivals[0].Duration != 2*time.Minute {
		t.Errorf("minutes: %+v %v", w.Arrivals, err)
	}
}

// TestReadCSVErrors: each bad row is an error naming its line and column.
func TestReadCSVErrors(t *testing.T) {
	cols := "id=job,submit=ts,duration=dur,gpus=g,gpuModel=m,priority=p,queue=q"
	for _, tc := range []struct{ rows, line, field string }{
		{"a,x,1,0,,,", "2", "ts"},
		{"a,1,0,0,,,", "2", "dur"},
		{"a,1,-5,0,,,", "2", "dur"},
		{"a,1,1,1.5,,,", "2", "g"},
		{"a,1,1,0.0001,,,", "2", "g"},
		{"a,1,1,1,A||B,,", "2", "m"},
		{"a,1,1,1,,4,", "2", "p"},
		{"a,1,1,1,,,\nb,2,2,0,,,\na,3,3,0,,,", "4", "job"},
		{"a,1,1,1,,,Bad Queue!", "2", ""},
		{"a,1,1", "2", ""},
	} {
		_, err := ReadCSV(strings.NewReader("job,ts,dur,g,m,p,q\n"+tc.rows+"\n"), mustColumns(t, cols))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != tc.field || !strings.HasPrefix(err.Error(), "line "+tc.line+":") {
			t.Errorf("rows %q: error %v, want line %s field %q", tc.rows, err, tc.line, tc.field)
		}
	}
	if _, err := ReadCSV(strings.NewReader("ts,dur\n1,1\n"), mustColumns(t, "submit=ts,duration=dur,gpus=gpu")); err == nil || !strings.Contains(err.Error(), `header lacks column "gpu"`) {
		t.Errorf("a mapped column missing from the header: %v", err)
	}
}

// TestParseColumns: K=V pairs or a YAML file; errors name the key.
func TestParseColumns(t *testing.T) {
	c := mustColumns(t, "submit=ts, duration=dur ,gpus=n")
	if d := cmp.Diff(Columns{Submit: "ts", Duration: "dur", GPUs: "n"}, c); d != "" {
		t.Errorf("K=V (-want +got):\n%s", d)
	}
	path := filepath.Join(t.TempDir(), "cols.yaml")
	if err := os.WriteFile(path, []byte("submit: ts\niterations: it\nthroughput: th\nsubmitUnit: ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := mustColumns(t, path); c != (Columns{Submit: "ts", Iterations: "it", Throughput: "th", SubmitUnit: "ms"}) {
		t.Errorf("yaml: %+v", c)
	}
	bad := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(bad, []byte("submit: ts\nduration: d\nwhat: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"duration=d":                            "submit: required",
		"submit=t":                              "duration: required",
		"submit=t,iterations=i":                 "duration: required",
		"submit=t,duration=d,nope=x":            `unknown key "nope"`,
		"submit=t,duration=d,submit=u":          "submit: set twice",
		"submit=t,duration=t":                   `duration: column "t" is already submit`,
		"submit=t,duration=d,memoryUnit=TB":     "memoryUnit: want",
		"submit=t,duration=d,submitUnit=d":      "submitUnit: want",
		"submit=t,duration=d,separator=;":       "separator: want",
		"submit":                                "want K=V",
		bad:                                     "unknown field",
		filepath.Join(t.TempDir(), "none.yaml"): "no such file",
	} {
		if _, err := ParseColumns(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseColumns(%q): %v, want %q", spec, err, want)
		}
	}
}

// TestDetectFormat: openb and Philly by their headers, Gavel by its
// fields; anything else is not guessed.
func TestDetectFormat(t *testing.T) {
	for line, want := range map[string]string{
		strings.SplitN(openbPods, "\n", 2)[0]:     FormatOpenb,
		strings.SplitN(phillyExcerpt, "\n", 2)[0]: FormatPhilly,
		strings.SplitN(gavelTrace, "\n", 2)[0]:    FormatGavel,
		"name,cpu_milli,memory_mib,num_gpu":       "",
		"timestamp,duration,gpus":                 "",
		"a\tb\tc":                                 "",
		"submit,duration,gpus":                    "",
	} {
		if got := DetectFormat(line); got != want {
			t.Errorf("DetectFormat(%.40q) = %q, want %q", line, got, want)
		}
	}
}

// TestLoadWorkloadFile: file:PATH reads a file anywhere, each format told
// from its first line, a Gavel trace with a throughput table from
// anywhere, a CSV with its mapping; the errors say what to pass.
func TestLoadWorkloadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	openb := write("pods-variant.csv", "\ufeff"+openbPods)
	philly := write("philly-other.csv", phillyExcerpt)
	gavel := write("mine.trace", gavelTrace)
	th := write("throughputs.csv", gavelThroughputs)
	csv := write("jobs.csv", "ts,dur\n5,10\n0,20\n")
	noTraces := filepath.Join(dir, "no-traces-here")
	wantOpenb, _ := ReadOpenbPods(strings.NewReader(openbPods))
	wantPhilly, _ := ReadPhilly(strings.NewReader(phillyExcerpt))
	ths, _ := ReadGavelThroughputs(strings.NewReader(gavelThroughputs))
	wantGavel, _ := ReadGavelTrace(strings.NewReader(gavelTrace), ths)
	cols := mustColumns(t, "submit=ts,duration=dur")
	for _, tc := range []struct {
		name string
		spec string
		o    WorkloadOptions
		want int
	}{
		{"openb, detected", "file:" + openb, WorkloadOptions{TracesDir: noTraces}, len(wantOpenb.Arrivals)},
		{"philly, detected", "file:" + philly, WorkloadOptions{TracesDir: noTraces}, len(wantPhilly.Arrivals)},
		{"philly, named", "file:" + philly, WorkloadOptions{Format: FormatPhilly, TracesDir: noTraces}, len(wantPhilly.Arrivals)},
		{"gavel, detected", "file:" + gavel, WorkloadOptions{Throughputs: th, TracesDir: noTraces}, len(wantGavel.Arrivals)},
		{"csv, by its mapping", "file:" + csv, WorkloadOptions{Columns: &cols, TracesDir: noTraces}, 2},
		{"csv, named", "file:" + csv, WorkloadOptions{Format: FormatCSV, Columns: &cols, TracesDir: noTraces}, 2},
	} {
		w, err := LoadWorkloadWith(tc.spec, tc.o)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(w.Arrivals) != tc.want || w.Name != tc.spec {
			t.Errorf("%s: %q with %d jobs, want %d", tc.name, w.Name, len(w.Arrivals), tc.want)
		}
		checkJobs(t, w)
	}
	for _, tc := range []struct {
		name, spec string
		o          WorkloadOptions
		want       string
	}{
		{"csv unnamed", "file:" + csv, WorkloadOptions{}, "cannot tell its format from its first line \"ts,dur\": name it with --format"},
		{"csv without mapping", "file:" + csv, WorkloadOptions{Format: FormatCSV}, "needs a column mapping"},
		{"mapping for openb", "file:" + openb, WorkloadOptions{Format: FormatOpenb, Columns: &cols}, "for format csv, not openb"},
		{"gavel without table", "file:" + gavel, WorkloadOptions{TracesDir: noTraces}, "needs a throughput table (--throughputs PATH)"},
		{"wrong format", "file:" + philly, WorkloadOptions{Format: FormatOpenb}, "(openb): line 1: header lacks column"},
		{"bad format", "file:" + philly, WorkloadOptions{Format: "parquet"}, "format: want auto, openb"},
		{"no path", "file:", WorkloadOptions{}, "want file:PATH"},
		{"missing", "file:" + filepath.Join(dir, "nope.csv"), WorkloadOptions{}, "no such file"},
		{"format off file", "philly", WorkloadOptions{Format: FormatPhilly}, "apply to file:PATH workloads only"},
		{"empty", "file:" + write("empty.csv", "ts,dur\n"), WorkloadOptions{Columns: &cols}, "no jobs"},
	} {
		if _, err := LoadWorkloadWith(tc.spec, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzReadCSV feeds arbitrary bytes to the generic CSV reader: it must
// not panic, and what it accepts must be valid tasks.
func FuzzReadCSV(f *testing.F) {
	f.Add([]byte("job,ts,dur,g,m,c,mem,p,q\na,1,1h,0.5,A|B,2,1Gi,1,x\nb,0,30,2,,,,,\n"))
	f.Add([]byte("job,ts,dur,g,m,c,mem,p,q\n\"a\",1e3,1e-3,8,,500m,512,3,\n"))
	cols := Columns{ID: "job", Submit: "ts", Duration: "dur", GPUs: "g", GPUModel: "m", CPU: "c", Memory: "mem", Priority: "p", Queue: "q"}
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadCSV(bytes.NewReader(data), cols)
		if err == nil {
			checkJobs(t, w)
			for _, j := range w.Arrivals {
				if j.Duration <= 0 || *j.Task.Priority < api.PriorityUrgent || *j.Task.Priority > api.PriorityLow {
					t.Fatalf("job %s: duration %v, priority %d", j.ID, j.Duration, *j.Task.Priority)
				}
			}
		}
	})
}
