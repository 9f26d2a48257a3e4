package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

const oneGPUNode = "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n"

func specFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubmitWaitForms: --wait placed:DUR, --wait=placed:DUR and
// --wait=placed submit through /schedule; a word after --wait that is
// not a wait is an argument, which submit refuses.
func TestSubmitWaitForms(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	for i, args := range [][]string{
		{"--wait", "placed:5s"},
		{"--wait=placed:5s"},
		{"--wait=placed"},
	} {
		id := []string{"spaced", "equals", "bare"}[i]
		file := specFile(t, id+".yaml", "id: "+id+"\nresources: {cpu: \"1\"}\n")
		full := append([]string{"submit", "-f", file, "--server", base}, args...)
		out, err := run(t, full...)
		if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "scheduled") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	file := specFile(t, "first.yaml", "id: first\nresources: {cpu: \"1\"}\n")
	if _, err := run(t, "submit", "-f", file, "--wait", "soon", "--server", base); err == nil || !strings.Contains(err.Error(), `unknown command "soon"`) {
		t.Errorf("--wait soon: %v", err)
	}
	if _, err := run(t, "submit", "-f", file, "--wait=soon", "--server", base); err == nil {
		t.Error("--wait=soon accepted")
	}
}

// TestSubmitWaitFailsUnplaced: submit --wait exits non-zero when a task is
// not placed in time (here: it can never fit) or ends without success,
// with its state and reason; the answer is still printed.
func TestSubmitWaitFailsUnplaced(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	big := specFile(t, "big.yaml", "id: big\nresources: {cpu: \"1\", nvidia.com/gpu: 4}\n")
	out, err := run(t, "submit", "-f", big, "--wait", "placed:300ms", "--server", base)
	if err == nil || !strings.Contains(err.Error(), "task big not placed within 300ms (pending") {
		t.Errorf("a task that cannot fit: %v", err)
	} else if !strings.Contains(err.Error(), ": ") || strings.HasSuffix(err.Error(), "(pending)") {
		t.Errorf("no reason in %q", err)
	}
	if !strings.Contains(out, "big") || !strings.Contains(out, "pending") {
		t.Errorf("the answer is not printed:\n%s", out)
	}
	// A batch: one placed, one skipped (its dependency failed).
	pre := specFile(t, "pre.yaml", "id: pre\nresources: {cpu: \"1\"}\n")
	if _, err := run(t, "submit", "-f", pre, "--wait", "placed", "--server", base); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "complete", "pre", "--exit-code", "3", "--server", base); err != nil {
		t.Fatal(err)
	}
	both := specFile(t, "both.yaml", "- id: ok\n  resources: {cpu: \"1\"}\n- id: after\n  depends: [pre]\n  resources: {cpu: \"1\"}\n")
	_, err = run(t, "submit", "-f", both, "--wait=placed", "--server", base)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 tasks not placed: task after skipped: dependency pre failed") {
		t.Errorf("a skipped task: %v", err)
	}
	// Without --wait nothing is waited for, and nothing fails.
	if _, err := run(t, "submit", "-f", specFile(t, "big2.yaml", "id: big2\nresources: {nvidia.com/gpu: 4}\n"), "--server", base); err != nil {
		t.Errorf("submit without --wait: %v", err)
	}
}

// TestVersion: `hetsched version` and `hetsched --version` print the
// build; -o json has the Go version; the server exports
// hetsched_build_info.
func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "hetsched ") || !strings.Contains(out, "go:      "+runtime.Version()+"\n") || !strings.Contains(out, "commit:  ") {
		t.Errorf("version: %v\n%s", err, out)
	}
	flag, err := run(t, "--version")
	if err != nil || flag != out {
		t.Errorf("--version: %v\n%s\nwant\n%s", err, flag, out)
	}
	out, err = run(t, "version", "-o", "json")
	var b struct{ Version, GoVersion string }
	if err != nil || json.Unmarshal([]byte(out), &b) != nil || b.GoVersion != runtime.Version() || b.Version == "" {
		t.Errorf("version -o json: %v\n%s", err, out)
	}
	base := servertest.Start(t, oneGPUNode)
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := regexp.MustCompile(`(?m)^hetsched_build_info\{commit="[^"]*",goversion="` + regexp.QuoteMeta(runtime.Version()) + `",version="[^"]+"\} 1$`)
	if !want.Match(body) {
		t.Errorf("no hetsched_build_info in /metrics:\n%s", grepLines(string(body), "build_info"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRun: hetsched run submits one command task from flags; the stored
// spec has them, --model selects the device model, and --wait reports a
// task that cannot be placed.
func TestRun(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	out, err := run(t, "run", "--id", "r1", "--name", "train", "--gpu", "0.5", "--model", "L4", "--cpu", "2", "--memory", "4Gi",
		"--priority", "1", "--env", "EPOCHS=3", "--env", "X=a=b", "--timeout", "10m", "--wait", "placed:5s", "--server", base,
		"--", "python3", "train.py", "--lr", "0.1")
	if err != nil || !strings.Contains(out, "r1") || !strings.Contains(out, "scheduled") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	resp, err := http.Get(base + "/api/v1/tasks/r1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Name         string            `json:"name"`
		Priority     int               `json:"priority"`
		Resources    map[string]string `json:"resources"`
		NodeSelector map[string]string `json:"nodeSelector"`
		Command      []string          `json:"command"`
		Env          map[string]string `json:"env"`
		Timeout      string            `json:"timeout"`
		Node         string            `json:"node"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "train" || got.Priority != 1 || got.Node != "gpu-a" ||
		got.Resources["cpu"] != "2" || got.Resources["memory"] != "4Gi" || got.Resources["nvidia.com/gpu"] != "0.5" ||
		got.NodeSelector["nvidia.com/gpu.model"] != "L4" ||
		strings.Join(got.Command, " ") != "python3 train.py --lr 0.1" ||
		got.Env["EPOCHS"] != "3" || got.Env["X"] != "a=b" || got.Timeout != "10m0s" {
		t.Errorf("stored task: %+v", got)
	}
	// Detached: the task as submitted; a model no node has: not
	// placed, with why.
	if out, err := run(t, "run", "-d", "--id", "r2", "--server", base, "--", "true"); err != nil || !strings.Contains(out, "r2") {
		t.Errorf("run -d: %v %q", err, out)
	}
	_, err = run(t, "run", "--id", "r3", "--gpu", "1", "--model", "A100", "--wait=placed:300ms", "--server", base, "--", "true")
	if err == nil || !strings.Contains(err.Error(), "no node has nvidia.com/gpu model A100; models here: L4") {
		t.Errorf("run on a model no node has: %v", err)
	}
	_, err = run(t, "run", "--id", "r4", "--gpu", "2", "--wait=placed:300ms", "--server", base, "--", "true")
	if err == nil || !strings.Contains(err.Error(), "task r4 not placed within 300ms (pending") {
		t.Errorf("run of a task that cannot fit: %v", err)
	}
	for _, args := range [][]string{
		{"run", "--server", base},
		{"run", "--model", "L4", "--server", base, "--", "true"},
		{"run", "--env", "NOEQUALS", "--server", base, "--", "true"},
		{"run", "extra", "--server", base, "--", "true"},
		{"run", "-d", "--wait", "--server", base, "--", "true"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestRunModelFamily (issue 45 §1.2): --model matches a model as the
// nodes name it in any case, or its family (H100 for H100-80GB; A100 for
// either A100); A10 is not A100's family; a model no node has is refused
// at submission, naming those there are.
func TestRunModelFamily(t *testing.T) {
	gpu := func(name, model string) string {
		return "  - name: " + name + "\n    capacity: {cpu: \"8\"}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: " + model + "}\n"
	}
	h := gpu("h", "H100-80GB") + "      - {type: nvidia.com/gpu, id: \"1\", model: H100-80GB}\n"
	base := servertest.Start(t, "nodes:\n"+h+gpu("a40", "A100-40GB")+gpu("a80", "A100-80GB"))
	c := cli.NewClient(base, "", 10*time.Second)
	for _, tc := range []struct{ id, model, node string }{
		{"h1", "H100", "h"}, {"h2", "h100-80gb", "h"}, {"a1", "A100", ""},
	} {
		if out, err := run(t, "run", "--id", tc.id, "--gpu", "1", "--model", tc.model, "--wait=placed:5s", "--server", base, "--", "true"); err != nil {
			t.Errorf("--model %s: %v\n%s", tc.model, err, out)
			continue
		}
		var v struct {
			Node         string
			NodeSelector map[string]string
			NodeAffinity []string
		}
		if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/"+tc.id, nil, &v); err != nil {
			t.Fatal(err)
		}
		if tc.node != "" && v.Node != tc.node {
			t.Errorf("--model %s: placed on %s, want %s", tc.model, v.Node, tc.node)
		}
		if tc.node == "" && (!strings.HasPrefix(v.Node, "a") || len(v.NodeAffinity) != 1 || !strings.Contains(v.NodeAffinity[0], "in (A100-40GB,A100-80GB)")) {
			t.Errorf("--model %s: %+v, want either A100 node by a node affinity", tc.model, v)
		}
	}
	_, err := run(t, "run", "--gpu", "1", "--model", "A10", "--server", base, "--", "true")
	if err == nil || !strings.Contains(err.Error(), "models here: A100-40GB, A100-80GB, H100-80GB") {
		t.Errorf("--model A10: %v", err)
	}
}

// TestRunConstraints: run's placement constraint flags: the stored spec
// has the labels, host ports, affinity, anti-affinity, spread and
// preemption policy the flags asked for, and a task whose spread reads a
// key no node has waits, saying so; bad flags are refused.
func TestRunConstraints(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	args := []string{"run", "--id", "w1", "--label", "app=web", "--anti-affinity", "hetsched.io/node", "--host-port", "8080",
		"--host-port", "53/udp", "--spread", "zone:2", "--affinity", "app=web@hetsched.io/node", "--no-preempt", "--wait", "placed:300ms",
		"--server", base, "--", "./serve"}
	if out, err := run(t, args...); err == nil {
		t.Fatalf("w1 placed though no node has the zone its spread reads: %s", out)
	}
	resp, err := http.Get(base + "/api/v1/tasks/w1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Metadata         map[string]string `json:"metadata"`
		HostPorts        []map[string]any  `json:"hostPorts"`
		AntiAffinity     []map[string]any  `json:"antiAffinity"`
		Affinity         []map[string]any  `json:"affinity"`
		Spread           []map[string]any  `json:"spread"`
		PreemptionPolicy string            `json:"preemptionPolicy"`
		Reason           string            `json:"reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata["app"] != "web" || len(got.HostPorts) != 2 || got.HostPorts[1]["protocol"] != "UDP" ||
		len(got.AntiAffinity) != 1 || got.AntiAffinity[0]["topologyKey"] != "hetsched.io/node" || got.AntiAffinity[0]["required"] != true ||
		len(got.Affinity) != 1 || got.Affinity[0]["match"] != "app=web" ||
		len(got.Spread) != 1 || got.Spread[0]["maxSkew"] != float64(2) || got.PreemptionPolicy != "never" {
		t.Errorf("stored task: %+v", got)
	}
	if !strings.Contains(got.Reason, "node lacks topology key zone") {
		t.Errorf("reason %q, want the missing zone", got.Reason)
	}
	for _, bad := range [][]string{
		{"run", "--anti-affinity", "zone", "--server", base, "--", "true"},
		{"run", "--host-port", "http", "--server", base, "--", "true"},
		{"run", "--label", "nokey", "--server", base, "--", "true"},
		{"run", "--label", "a=b", "--spread", "zone:x", "--server", base, "--", "true"},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestGetOutputs: -o name prints kind/NAME per line; -o wide adds
// columns; the -o help lists every format.
func TestGetOutputs(t *testing.T) {
	t.Setenv("USER", "ann") // without a token, the CLI names $USER as the user
	base := servertest.Start(t, oneGPUNode)
	file := specFile(t, "two.yaml", "- {id: a, name: prep, resources: {cpu: \"1\"}}\n- {id: b, resources: {cpu: \"1\", nvidia.com/gpu: 1}}\n")
	if _, err := run(t, "submit", "-f", file, "--wait=placed", "--server", base); err != nil {
		t.Fatal(err)
	}
	job := specFile(t, "job.yaml", "id: etl\ngang: {minMember: 1}\ntasks:\n  - {id: x, resources: {cpu: \"1\"}}\n")
	if out, err := run(t, "submit", "-f", job, "-o", "name", "--server", base); err != nil || out != "job/etl\n" {
		t.Errorf("submit a job -o name: %v %q", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "tasks", "-o", "name"}, "task/etl.x\ntask/b\ntask/a\n"},
		{[]string{"get", "nodes", "-o", "name"}, "node/gpu-a\n"},
		{[]string{"get", "jobs", "-o", "name"}, "job/etl\n"},
		{[]string{"get", "tasks", "--user", "ann", "-o", "name"}, "task/etl.x\ntask/b\ntask/a\n"},
		{[]string{"get", "tasks", "--user", "bob", "-o", "name"}, ""},
	} {
		if out, err := run(t, append(c.args, "--server", base)...); err != nil || out != c.want {
			t.Errorf("%v: %v %q, want %q", c.args, err, out, c.want)
		}
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"get", "tasks", "-o", "wide"}, []string{`(?m)^ID +NAME +QUEUE +USER +PRIORITY +STATE +NODE +DEVICES +ATTEMPT +AGE +REASON$`,
			`(?m)^b +- +default +ann +2 +scheduled +gpu-a +gpu:0 \(L4\) +0 +\d+s +$`, `(?m)^a +prep +default +ann +2 +scheduled +gpu-a +- +0 +\d+s`}},
		{[]string{"get", "nodes", "-o", "wide"}, []string{`(?m)^NAME +STATE +CAPACITY +ALLOCATED +TASKS +DEVICES +UTILIZATION +LABELS$`, `(?m)^gpu-a +ready +.* 3 +1×nvidia.com/gpu L4 +- +-$`}},
		{[]string{"get", "jobs", "-o", "wide"}, []string{`(?m)^ID +NAME +QUEUE +PRIORITY +STATE +TASKS +GANG +FAILURE POLICY +AGE$`, `(?m)^etl +- +default +2 +\S+ +1 \(1 \w+\) +minMember 1 +failFast `}},
		{[]string{"describe", "--help"}, []string{`table, wide \(more columns\), name \(kind/NAME per line\), json or yaml`}},
	} {
		out, err := run(t, append(c.args, "--server", base)...)
		for _, w := range c.wants {
			if err != nil || !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%v: %v: no %s in\n%s", c.args, err, w, out)
			}
		}
	}
	if _, err := run(t, "get", "tasks", "-o", "xml", "--server", base); err == nil || !strings.Contains(err.Error(), "table, wide, name, json or yaml") {
		t.Errorf("-o xml: %v", err)
	}
}

// TestGetSelectorChecked: --selector is checked before anything is sent,
// and refused for kinds without labels.
func TestGetSelectorChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "tasks", "-l", "team in a"}, `--selector "team in a"`},
		{[]string{"get", "nodes", "--selector", "rack=r 1"}, "--selector"},
		{[]string{"get", "tasks", "-l", "a=b,"}, "empty requirement"},
		{[]string{"get", "jobs", "-l", "a=b"}, "--selector: jobs have no labels"},
		{[]string{"get", "queues", "-l", "a"}, "--selector: queues have no labels"},
		{[]string{"get", "pods"}, `get: unknown kind "pods" (tasks, jobs, nodes, queues, servers, services or cluster)`},
	} {
		_, err := run(t, append(c.args, "--server", "http://127.0.0.1:1", "--timeout", "1s")...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "cannot reach") {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// TestGetSelectorOnTheServer: -l passes the selector to the server, which
// filters tasks on their metadata and nodes on their labels, derived ones
// too. (Needs the server's ?selector= of issue 16 §2.)
func TestGetSelectorOnTheServer(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: gpu-a\n    labels: {rack: r1}\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n  - name: cpu-a\n    labels: {rack: r2}\n    capacity: {cpu: \"8\", memory: 16Gi}\n")
	file := specFile(t, "tasks.yaml", "- {id: v1, metadata: {team: vision}, resources: {cpu: \"1\"}}\n- {id: n1, metadata: {team: nlp, tier: low}, resources: {cpu: \"1\"}}\n- {id: u1, resources: {cpu: \"1\"}}\n")
	if _, err := run(t, "submit", "-f", file, "--server", base); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "tasks", "-l", "team=vision"}, "task/v1\n"},
		{[]string{"get", "tasks", "-l", "team!=vision"}, "task/u1\ntask/n1\n"},
		{[]string{"get", "tasks", "-l", "team,!tier"}, "task/v1\n"},
		{[]string{"get", "tasks", "-l", "!team"}, "task/u1\n"},
		{[]string{"get", "nodes", "-l", "nvidia.com/gpu.model=L4"}, "node/gpu-a\n"},
		{[]string{"get", "nodes", "-l", "rack=r2"}, "node/cpu-a\n"},
		{[]string{"get", "nodes", "-l", "rack,!nvidia.com/gpu.model"}, "node/cpu-a\n"},
	} {
		if out, err := run(t, append(c.args, "-o", "name", "--server", base)...); err != nil || out != c.want {
			t.Errorf("%v: %v %q, want %q (the server's ?selector= is needed)", c.args, err, out, c.want)
		}
	}
}

// TestLogsFlags: --attempt and --previous are checked before anything is
// sent.
func TestLogsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "x", "--attempt", "-2"}, "--attempt: must be 0 (the first run) or more, got -2"},
		{[]string{"logs", "x", "--attempt", "0", "-p"}, "--attempt and --previous: give one of them"},
		{[]string{"logs", "x", "--attempt", "2", "-p"}, "--attempt and --previous: give one of them"},
	} {
		_, err := run(t, append(c.args, "--server", "http://127.0.0.1:1", "--timeout", "1s")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// TestGetServersOnOneServer: a server on the embedded store lists itself
// as the leader (the replicated case is in internal/hatest).
func TestGetServersOnOneServer(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	out, err := run(t, "get", "servers", "--server", base)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(base, "http://")
	if want := "NAME"; !strings.HasPrefix(out, want) || !strings.Contains(out, host+"  leader  "+base) {
		t.Fatalf("get servers:\n%s", out)
	}
	if out, err := run(t, "get", "servers", "-w", "--server", base); err == nil || !strings.Contains(err.Error(), "neither --watch") {
		t.Fatalf("get servers -w: %v %s", err, out)
	}
}

// TestKubeBindViaChecked: --bind-via takes client-go or poster and
// refuses anything else, naming the flag, before it reads a kubeconfig;
// the removed --client-h2 is an unknown flag, not ignored.
func TestKubeBindViaChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kube", "--bind-via", "h2"}, `--bind-via: "h2" is not one of client-go, poster`},
		{[]string{"kube", "--client-h2"}, "unknown flag: --client-h2"},
	} {
		_, err := run(t, append(c.args, "--kubeconfig", filepath.Join(t.TempDir(), "none"))...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

// TestServerStarveFlagsChecked: --starve-factor and --starve-limit reach
// the core's configuration, which refuses bad values naming them.
func TestServerStarveFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--starve-factor", "-1"}, "starveFactor: must be 0 (no bound) to 1000"},
		{[]string{"server", "--starve-limit", "-5m"}, "starveLimit: must not be negative"},
	} {
		_, err := run(t, append(c.args, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}
