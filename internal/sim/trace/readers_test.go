package trace

import (
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

// writeFixture writes content to name under a fresh temporary directory
// (creating parent directories) and returns the directory.
func writeFixture(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// openFixture writes content to a file in t.TempDir() and opens it.
func openFixture(t *testing.T, content string) *os.File {
	t.Helper()
	dir := t.TempDir()
	writeFixture(t, dir, "f", content)
	f, err := os.Open(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// wantParseError checks that err is a *ParseError of line and field whose
// message contains sub.
func wantParseError(t *testing.T, err error, line int, field, sub string) {
	t.Helper()
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v: want a *ParseError of line %d", err, line)
	}
	if pe.Line != line || pe.Field != field || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %q (line %d, field %q): want line %d, field %q, containing %q", err, pe.Line, pe.Field, line, field, sub)
	}
}

func gpus(model string, n int) []api.Device {
	d := make([]api.Device, n)
	for i := range d {
		d[i] = api.Device{Type: "nvidia.com/gpu", ID: string(rune('0' + i)), Model: model}
	}
	return d
}

// openbNodes is shaped like openb_node_list_all_node.csv (values made up).
const openbNodes = "sn,cpu_milli,memory_mib,gpu,model\n" +
	"node-a,32000,262144,0,\n" +
	"node-b,64000,262144,2,P100\r\n" +
	"\n" +
	"node-c,96000,393216,8,G2\n"

func TestReadOpenbNodes(t *testing.T) {
	got, err := ReadOpenbNodes(openFixture(t, "\uFEFF"+openbNodes))
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{Name: "openb", Nodes: []api.Node{
		{Name: "node-a", Capacity: resource.List{"cpu": 32000, "memory": 256 << 30}},
		{Name: "node-b", Capacity: resource.List{"cpu": 64000, "memory": 256 << 30},
			Labels: map[string]string{"gpu.model": "P100"}, Devices: gpus("P100", 2)},
		{Name: "node-c", Capacity: resource.List{"cpu": 96000, "memory": 384 << 30},
			Labels: map[string]string{"gpu.model": "G2"}, Devices: gpus("G2", 8)},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadOpenbNodes (-want +got):\n%s", d)
	}
	// Columns may come in any order; extra ones are ignored.
	got, err = ReadOpenbNodes(strings.NewReader("model,gpu,extra,sn,memory_mib,cpu_milli\nT4,1,x,n1,1024,8000\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = Cluster{Name: "openb", Nodes: []api.Node{{Name: "n1", Capacity: resource.List{"cpu": 8000, "memory": 1 << 30},
		Labels: map[string]string{"gpu.model": "T4"}, Devices: gpus("T4", 1)}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("reordered columns (-want +got):\n%s", d)
	}
}

func TestReadOpenbNodesErrors(t *testing.T) {
	h := "sn,cpu_milli,memory_mib,gpu,model\n"
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{h + "n1,1000,1,1,T4\nn2,x,1,1,T4\n", 3, "cpu_milli", "not an integer"},
		{h + "n1,1000,-1,1,T4\n", 2, "memory_mib", "out of range"},
		{h + "n1,1000,1,257,T4\n", 2, "gpu", "out of range"},
		{h + "n1,1000,1,1,bad model\n", 2, "model", "label value"},
		{h + "n1,1000,1,1,T4\nn1,1000,1,1,T4\n", 3, "sn", "duplicate"},
		{h + "-bad,1000,1,1,T4\n", 2, "sn", "letters, digits"},
		{h + "n1,1000,1,1\n", 2, "", "has 4 fields, want 5"},
		{h + "n1,1000,1,1,\"T4\n", 2, "", "unterminated"},
		{"sn,cpu_milli,memory_mib,gpu\n", 1, "", `lacks column "model"`},
		{"sn,sn,cpu_milli,memory_mib,gpu,model\n", 1, "sn", "named twice"},
		{h + "n1,1000,1," + strings.Repeat("1", MaxLineBytes) + ",T4\n", 2, "", "longer than"},
		{h + "n1,1000,1,1,\xff\n", 2, "", "UTF-8"},
	} {
		_, err := ReadOpenbNodes(strings.NewReader(tc.in))
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
	if _, err := ReadOpenbNodes(strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "header") {
		t.Fatalf("empty input: got %v, want an error about the header", err)
	}
}

// openbPods is shaped like openb_pod_list_default.csv (values made up).
const openbPods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
	"pod-0,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
	"pod-1,6000,12288,1,460,,BE,Running,427061,12902960,427061\n" +
	"pod-2,88000,327680,8,1000,V100M16|V100M32,Guaranteed,Running,500000,,\n" +
	"pod-3,4000,4096,0,0,T4,Burstable,Failed,600000,600000,\n" +
	"pod-4,1000,1024,2,500,,,Pending,,,\n"

func TestReadOpenbPods(t *testing.T) {
	got, err := ReadOpenbPods(openFixture(t, openbPods))
	if err != nil {
		t.Fatal(err)
	}
	want := Workload{Name: "openb", Arrivals: []Arrival{
		{ID: "pod-0", Duration: 12537496 * time.Second, Task: api.Task{Priority: ptr(2),
			Resources: resource.List{"cpu": 12000, "memory": 16 << 30, "nvidia.com/gpu": 1000}}},
		{ID: "pod-1", At: 427061 * time.Second, Duration: (12902960 - 427061) * time.Second, Task: api.Task{Priority: ptr(3),
			Resources: resource.List{"cpu": 6000, "memory": 12 << 30, "nvidia.com/gpu": 460}}},
		{ID: "pod-2", At: 500000 * time.Second, Task: api.Task{Priority: ptr(2),
			Resources:    resource.List{"cpu": 88000, "memory": 320 << 30, "nvidia.com/gpu": 8000},
			NodeSelector: map[string]string{"gpu.model": "V100M16|V100M32"}}},
		// A CPU pod's gpu_spec is ignored; deletion = creation gives no duration.
		{ID: "pod-3", At: 600000 * time.Second, Task: api.Task{Priority: ptr(2),
			Resources: resource.List{"cpu": 4000, "memory": 4 << 30}}},
		// Several GPUs are whole GPUs whatever gpu_milli says.
		{ID: "pod-4", Task: api.Task{Priority: ptr(2),
			Resources: resource.List{"cpu": 1000, "memory": 1 << 30, "nvidia.com/gpu": 2000}}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadOpenbPods (-want +got):\n%s", d)
	}
	// multigpu20 has the first five columns only.
	got, err = ReadOpenbPods(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-0,6000,12288,1,460\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = Workload{Name: "openb", Arrivals: []Arrival{{ID: "pod-0", Task: api.Task{Priority: ptr(2),
		Resources: resource.List{"cpu": 6000, "memory": 12 << 30, "nvidia.com/gpu": 460}}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("five columns (-want +got):\n%s", d)
	}
}

func TestReadOpenbPodsErrors(t *testing.T) {
	h := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time\n"
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{h + "p,1000,1,1,0,,LS,0,1\n", 2, "gpu_milli", "1..1000"},
		{h + "p,1000,1,1,1001,,LS,0,1\n", 2, "gpu_milli", "1..1000"},
		{h + "p,1000,1,1025,1000,,LS,0,1\n", 2, "num_gpu", "out of range"},
		{h + "p,1000,1,1,100,A||B,LS,0,1\n", 2, "gpu_spec", "models"},
		{h + "p,1000,1,1,100,,XX,0,1\n", 2, "qos", "want LS, BE"},
		{h + "p,1000,1,1,100,,LS,-5,1\n", 2, "creation_time", "out of range"},
		{h + "p,1000,1,1,100,,LS,0,NaN\n", 2, "deletion_time", "not a number"},
		{h + "p,1.5,1,1,100,,LS,0,1\n", 2, "cpu_milli", "not an integer"},
		{h + "p,1,1,1,100,,LS,0,1\np,1,1,1,100,,LS,0,1\n", 3, "name", "duplicate"},
		{h + "p,1,1,1,100,,LS,0,1,extra\n", 2, "", "has 10 fields, want 9"},
	} {
		_, err := ReadOpenbPods(strings.NewReader(tc.in))
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
}

func TestReadPAIMachines(t *testing.T) {
	// Shaped like pai_machine_spec.csv (machine ids made up); the header
	// line is optional.
	in := "machine,gpu_type,cap_cpu,cap_mem,cap_gpu\n" +
		"m-cpu,CPU,96,512,0\n" +
		"m-p100,P100,64,512,2\n" +
		"m-v100,V100M32,96,384,8\n" +
		"m-half,MISC,0.5,1.5,0\n"
	got, err := ReadPAIMachines(openFixture(t, in))
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{Name: "pai", Nodes: []api.Node{
		{Name: "m-cpu", Capacity: resource.List{"cpu": 96000, "memory": 512 << 30}},
		{Name: "m-p100", Capacity: resource.List{"cpu": 64000, "memory": 512 << 30},
			Labels: map[string]string{"gpu.model": "P100"}, Devices: gpus("P100", 2)},
		{Name: "m-v100", Capacity: resource.List{"cpu": 96000, "memory": 384 << 30},
			Labels: map[string]string{"gpu.model": "V100M32"}, Devices: gpus("V100M32", 8)},
		{Name: "m-half", Capacity: resource.List{"cpu": 500, "memory": 3 << 29}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadPAIMachines (-want +got):\n%s", d)
	}
	got2, err := ReadPAIMachines(strings.NewReader(strings.SplitN(in, "\n", 2)[1]))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got2); d != "" {
		t.Fatalf("without the header (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{"m,CPU,96,512,2\n", 1, "cap_gpu", "no GPUs"},
		{"m,,96,512,2\n", 1, "gpu_type", "want a GPU model"},
		{"m,T4,x,512,2\n", 1, "cap_cpu", "not a number"},
		{"m,T4,96,-1,2\n", 1, "cap_mem", "out of range"},
		{"m,T4,96,512,2.5\n", 1, "cap_gpu", "not an integer"},
		{"m,T4,96,512\n", 1, "", "has 4 fields, want 5"},
		{"m,T4,96,512,2\nm,T4,96,512,2\n", 2, "machine", "duplicate"},
	} {
		_, err := ReadPAIMachines(strings.NewReader(tc.in))
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
}

// phillyExcerpt is rows of philly.csv from github.com/siasosp23/artifacts
// (sia-simulator/traces/philly.csv), derived from
// github.com/msr-fiddle/philly-traces (CC BY 4.0; "Analysis of
// Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads",
// USENIX ATC'19), with one 8-GPU row made up.
const phillyExcerpt = "timestamp,duration,num_gpus,gpu_time,cluster\n" +
	"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
	"2017-10-09 06:13:03,2951.0,1,2951.0,6214e9\n" +
	"2017-10-09 07:01:55,120.5,8,964.0,b436b2\n" +
	"\n"

func TestReadPhilly(t *testing.T) {
	got, err := ReadPhilly(openFixture(t, phillyExcerpt))
	if err != nil {
		t.Fatal(err)
	}
	task := func(queue string, n int64) api.Task {
		return api.Task{Queue: queue, Priority: ptr(2), Resources: resource.List{
			"cpu": n * 4000, "memory": n * 16 << 30, "nvidia.com/gpu": n * 1000}}
	}
	// Sorted by timestamp; the tie keeps file order.
	want := Workload{Name: "philly", Arrivals: []Arrival{
		{ID: "philly-3", Task: task("vc-6214e9", 1), Duration: 2951 * time.Second},
		{ID: "philly-2", At: 48*time.Minute + 52*time.Second, Task: task("vc-11cb48", 1), Duration: 66 * time.Second},
		{ID: "philly-4", At: 48*time.Minute + 52*time.Second, Task: task("vc-b436b2", 8), Duration: 120500 * time.Millisecond},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadPhilly (-want +got):\n%s", d)
	}
	// A 0-GPU job is a CPU job with one GPU's share of cpu and memory.
	got, err = ReadPhilly(strings.NewReader("timestamp,duration,num_gpus,cluster\n2017-10-09 07:01:55,5,0,abc\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = Workload{Name: "philly", Arrivals: []Arrival{{ID: "philly-2", Duration: 5 * time.Second,
		Task: api.Task{Queue: "vc-abc", Priority: ptr(2), Resources: resource.List{"cpu": 4000, "memory": 16 << 30}}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("CPU job (-want +got):\n%s", d)
	}
	h := "timestamp,duration,num_gpus,gpu_time,cluster\n"
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{h + "2017-10-09T07:01:55,66.0,1,66.0,11cb48\n", 2, "timestamp", "YYYY-MM-DD"},
		{h + "2017-10-09 07:01:55,0,1,66.0,11cb48\n", 2, "duration", "positive"},
		{h + "2017-10-09 07:01:55,-1,1,66.0,11cb48\n", 2, "duration", "out of range"},
		{h + "2017-10-09 07:01:55,1,-1,66.0,11cb48\n", 2, "num_gpus", "out of range"},
		{h + "2017-10-09 07:01:55,1,1,66.0,\n", 2, "cluster", "virtual cluster"},
		{h + "2017-10-09 07:01:55,1,1,66.0,a b\n", 2, "cluster", "virtual cluster"},
		{"timestamp,duration,gpus,cluster\n", 1, "", `lacks column "num_gpus"`},
	} {
		_, err := ReadPhilly(strings.NewReader(tc.in))
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
}

// gavelThroughputs and gavelTrace are excerpts of
// github.com/stanford-futuredata/gavel scheduler/ (MIT licence, commit
// c4fa400): simulation_throughputs_isolated.csv and
// traces/max_min_fairness.trace (arrival times changed).
const gavelThroughputs = "worker_type,job_type,scale_factor,isolated_throughput_steps_per_s\n" +
	"k80,A3C,1,3.4387678290723933\n" +
	"p100,A3C,1,10.0\n" +
	"v100,A3C,1,12.5\n" +
	"k80_unconsolidated,A3C,1,1.0\n" +
	"k80,ResNet-50 (batch size 128),2,0.0\n" +
	"p100,ResNet-50 (batch size 128),2,2.0\n" +
	"v100,ResNet-50 (batch size 128),2,4.0\n"

const gavelTrace = "A3C\tcd %s/a3c && python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True\trl\t--max-steps\t0\t1000\t1\t1\t-1.000000\t536\n" +
	"ResNet-50 (batch size 128)\tpython3 main.py -j 4 -a resnet50 -b 128 %s/imagenet/\timagenet\t--num_minibatches\t1\t2000\t2\t1\t-1.000000\t0\n"

func TestReadGavel(t *testing.T) {
	th, err := ReadGavelThroughputs(openFixture(t, gavelThroughputs))
	if err != nil {
		t.Fatal(err)
	}
	wantTh := Throughputs{
		{"k80", "A3C", 1}: 3.4387678290723933, {"p100", "A3C", 1}: 10, {"v100", "A3C", 1}: 12.5,
		{"k80_unconsolidated", "A3C", 1}:         1,
		{"k80", "ResNet-50 (batch size 128)", 2}: 0, {"p100", "ResNet-50 (batch size 128)", 2}: 2,
		{"v100", "ResNet-50 (batch size 128)", 2}: 4,
	}
	if d := cmp.Diff(wantTh, th); d != "" {
		t.Fatalf("ReadGavelThroughputs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"A3C", "ResNet-50 (batch size 128)"}, th.JobTypes()); d != "" {
		t.Fatalf("JobTypes (-want +got):\n%s", d)
	}
	got, err := ReadGavelTrace(openFixture(t, gavelTrace), th)
	if err != nil {
		t.Fatal(err)
	}
	k80 := seconds(1000 / 3.4387678290723933) // 290.8 s, rounded to the nanosecond
	want := Workload{Name: "gavel", Arrivals: []Arrival{
		// Sorted by arrival: the second line arrives first.
		{ID: "gavel-1", Duration: 1000 * time.Second,
			Task: api.Task{Name: "ResNet-50 (batch size 128)", Priority: ptr(2),
				Resources:    resource.List{"nvidia.com/gpu": 2000, "cpu": 2000, "memory": 8 << 30},
				NodeSelector: map[string]string{"gpu.model": "v100|p100"},
				Metadata:     map[string]string{"class": "ResNet-50 (batch size 128)"}},
			ByModel: map[string]time.Duration{"v100": 500 * time.Second, "p100": 1000 * time.Second}},
		{ID: "gavel-0", At: 536 * time.Second, Duration: k80,
			Task: api.Task{Name: "A3C", Priority: ptr(2),
				Resources: resource.List{"nvidia.com/gpu": 1000, "cpu": 1000, "memory": 4 << 30},
				Metadata:  map[string]string{"class": "A3C"}},
			ByModel: map[string]time.Duration{"v100": 80 * time.Second, "p100": 100 * time.Second, "k80": k80}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ReadGavelTrace (-want +got):\n%s", d)
	}

	h := "worker_type,job_type,scale_factor,isolated_throughput_steps_per_s\n"
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{h + "k80,A3C,0,1\n", 2, "scale_factor", "out of range"},
		{h + "k80,A3C,1,-1\n", 2, "isolated_throughput_steps_per_s", "out of range"},
		{h + "k80,A3C,1,Inf\n", 2, "isolated_throughput_steps_per_s", "not a number"},
		{h + ",A3C,1,1\n", 2, "worker_type", "characters"},
		{h + "k80,A3C,1,1\nk80,A3C,1,2\n", 3, "", "measured twice"},
	} {
		_, err := ReadGavelThroughputs(strings.NewReader(tc.in))
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
	line := func(jobType, steps, scale, arrival string) string {
		return jobType + "\tcmd\tdir\t--n\t1\t" + steps + "\t" + scale + "\t1\t-1.000000\t" + arrival + "\n"
	}
	for _, tc := range []struct {
		in          string
		line        int
		field, want string
	}{
		{line("A3C", "10", "1", "0") + line("BERT", "10", "1", "0"), 2, "job_type", "no positive throughput"},
		{line("A3C", "10", "4", "0"), 1, "job_type", "no positive throughput"},
		{line("A3C", "0", "1", "0"), 1, "total_steps", "out of range"},
		{line("A3C", "10", "x", "0"), 1, "scale_factor", "not an integer"},
		{line("A3C", "10", "1", "-1"), 1, "arrival_time", "out of range"},
		{line("A3C", "1000000000000", "1", "0"), 1, "total_steps", "longer than"},
		{"A3C\tcmd\n", 1, "", "has 2 fields, want 10"},
	} {
		_, err := ReadGavelTrace(strings.NewReader(tc.in), th)
		wantParseError(t, err, tc.line, tc.field, tc.want)
	}
}

func TestGavelCluster(t *testing.T) {
	c := GavelCluster(10, 0, 3)
	node := func(name, model string, n int) api.Node {
		return api.Node{Name: name, Capacity: resource.List{"cpu": 32000, "memory": 256 << 30},
			Labels: map[string]string{"gpu.model": model}, Devices: gpus(model, n)}
	}
	want := Cluster{Name: "gavel:10,0,3", Nodes: []api.Node{node("v100-0", "v100", 8), node("v100-1", "v100", 2), node("k80-0", "k80", 3)}}
	if d := cmp.Diff(want, c); d != "" {
		t.Fatalf("GavelCluster (-want +got):\n%s", d)
	}
	c = GavelCluster(8, 16, 24)
	count := map[string]int{}
	for _, n := range c.Nodes {
		if err := n.Validate(); err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
		count[n.Labels["gpu.model"]] += len(n.Devices)
	}
	if len(c.Nodes) != 6 || count["v100"] != 8 || count["p100"] != 16 || count["k80"] != 24 {
		t.Fatalf("GavelCluster(8,16,24): %d nodes, GPUs %v; want 6 nodes, 8/16/24", len(c.Nodes), count)
	}
	if c := GavelCluster(-1, 0, 0); len(c.Nodes) != 0 || c.Name != "gavel:0,0,0" {
		t.Fatalf("GavelCluster(-1,0,0) = %+v", c)
	}
}

func TestSplitFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		sep  byte
		want []string
		err  string
	}{
		{"a,b,,c", ',', []string{"a", "b", "", "c"}, ""},
		{`"a,b","say ""hi""",c`, ',', []string{"a,b", `say "hi"`, "c"}, ""},
		{`a,""`, ',', []string{"a", ""}, ""},
		{`"a"b,c`, ',', nil, "text after"},
		{`"a`, ',', nil, "unterminated"},
		{"\"a\"\tb", '\t', []string{`"a"`, "b"}, ""},
		{strings.Repeat(",", MaxFields), ',', nil, "more than"},
	} {
		got, err := splitFields(tc.in, tc.sep, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitFields(%q): error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("splitFields(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("splitFields(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

func TestMaxRows(t *testing.T) {
	rr := newRowReader(strings.NewReader("a\nb\nc\n"), ',')
	rr.rows = MaxRows - 1
	if ok, err := rr.nextRow(); !ok || err != nil {
		t.Fatalf("row %d: %v, %v", MaxRows, ok, err)
	}
	_, err := rr.nextRow()
	wantParseError(t, err, 2, "", "more than")
}
