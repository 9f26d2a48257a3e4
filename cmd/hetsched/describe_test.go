package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// TestDescribeKinds: describe job, node and queue read as pages; -o yaml
// and -o name are the object and its name; an unknown kind lists the
// kinds; an unknown name is the server's 404.
func TestDescribeKinds(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: gpu-a\n    labels: {rack: r1}\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4, memory: 24Gi}\n      - {type: nvidia.com/gpu, id: \"1\", model: L4, memory: 24Gi}\n")
	req, _ := http.NewRequest("PUT", base+"/api/v1/queues/team-a", strings.NewReader(`{"name":"team-a","guaranteed":{"nvidia.com/gpu":1},"max":{"nvidia.com/gpu":2},"weight":2}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT queue: %v %v", err, resp)
	}
	job := specFile(t, "job.yaml", "id: etl\nname: nightly\nqueue: team-a\nretries: {limit: 2, backoff: 5s}\ntasks:\n  - {id: extract, resources: {cpu: \"2\", memory: 4Gi, nvidia.com/gpu: 1}}\n  - {id: load, depends: [extract], resources: {cpu: \"1\"}}\n")
	if out, err := run(t, "submit", "-f", job, "--server", base); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitState(t, base, "etl.extract", "scheduled")
	big := specFile(t, "big.yaml", "id: big\nqueue: team-a\nresources: {nvidia.com/gpu: 2}\n")
	if out, err := run(t, "submit", "-f", big, "--server", base); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"describe", "job", "etl"}, []string{`(?m)^ID: +etl$`, `(?m)^Name: +nightly$`, `(?m)^Queue: +team-a$`, `(?m)^Retries: +limit 2, backoff 5s$`,
			`(?m)^Tasks: +2 \(1 blocked, 1 scheduled\)$`, `(?m)^Task List:\n  ID +NAME +PRIORITY +STATE +NODE +DEVICES +ATTEMPT +AGE +REASON\n`, `(?m)^  etl.extract +\S+ +2 +scheduled +gpu-a +gpu:\d `, `(?m)^  etl.load +\S+ +2 +blocked `}},
		{[]string{"describe", "node", "gpu-a"}, []string{`(?m)^Name: +gpu-a$`, `(?m)^State: +ready$`, `(?m)^Held By: +the static inventory$`, `(?m)^Labels: +rack=r1$`,
			`(?m)^Derived Labels: +hetsched.io/node=gpu-a\n +nvidia.com/gpu.model=L4$`,
			`(?m)^Resources:\n  RESOURCE +CAPACITY +ALLOCATED +UTILIZATION\n  cpu +8 +2 \(25%\) +-\n  memory +16Gi +4Gi \(25%\) +-\n  nvidia.com/gpu +2 +1 \(50%\) +-\n`,
			`(?m)^Devices:\n  TYPE +MODEL +ID +MEMORY +TOPOLOGY +HEALTH +TASK\n`, `(?m)^  nvidia.com/gpu +L4 +\d +24Gi +- +healthy +etl.extract$`, `(?m)^  nvidia.com/gpu +L4 +\d +24Gi +- +healthy +-$`,
			`(?m)^Tasks \(1\):\n  ID .*\n  etl.extract +\S+ +2 +scheduled `}},
		{[]string{"describe", "queue", "team-a"}, []string{`(?m)^Name: +team-a$`, `(?m)^Parent: +root$`, `(?m)^Weight: +2$`,
			`(?m)^Resources:\n  RESOURCE +GUARANTEED +MAX +USAGE +FAIR SHARE\n`, `(?m)^  nvidia.com/gpu +1 +2 +1 `, `(?m)^Pending: +2 \(\w+=1,\w+=1\)$`}},
		{[]string{"describe", "queue", "team-a", "-o", "yaml"}, []string{`(?m)^name: team-a$`, `(?m)^weight: 2$`}},
		{[]string{"describe", "node", "gpu-a", "-o", "name"}, []string{`^node/gpu-a\n$`}},
		{[]string{"describe", "task", "big"}, []string{`(?m)^State: +pending$`, `(?m)^Reason: +\S+`, `(?m)^Attempts: +<none>$`, `(?m)^Events:\n  AGE +EVENT\n  \d+s +submitted\n$`}},
	} {
		out, err := run(t, append(c.args, "--server", base)...)
		for _, w := range c.wants {
			if err != nil || !regexp.MustCompile(w).MatchString(out) {
				t.Errorf("%v: %v: no %s in\n%s", c.args, err, w, out)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "pod", "x"}, `describe: unknown kind "pod" (task, job, node, queue or service)`},
		{[]string{"describe", "node", "nosuch"}, `no node "nosuch" (404 not_found)`},
		{[]string{"describe", "job", "nosuch"}, `no job "nosuch" (404 not_found)`},
		{[]string{"describe", "queue", "nosuch"}, `no queue "nosuch"`},
	} {
		if _, err := run(t, append(c.args, "--server", base)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// waitState waits until task id is in state.
func waitState(t *testing.T, base, id, state string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run(t, "get", "tasks", "-o", "json", "--server", base)
		var v struct{ Tasks []struct{ ID, State string } }
		if err != nil || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("get tasks: %v\n%s", err, out)
		}
		for _, x := range v.Tasks {
			if x.ID == id && x.State == state {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s within 30s:\n%s", id, state, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
