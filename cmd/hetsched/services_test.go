package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/up"
)

// replicaStates reads GET /services/NAME/replicas.
func replicaStates(t *testing.T, base, name string) []struct {
	ID, State, Node string
	Ready           bool
	Restarts        int
} {
	t.Helper()
	var body struct {
		Replicas []struct {
			ID, State, Node string
			Ready           bool
			Restarts        int
		} `json:"replicas"`
	}
	c := cli.NewClient(base, "", 10*time.Second)
	if _, err := c.Do(context.Background(), "GET", "/api/v1/services/"+name+"/replicas", nil, &body); err != nil {
		t.Fatal(err)
	}
	return body.Replicas
}

// endpoints reads GET /services/NAME/endpoints' replicas.
func endpoints(t *testing.T, base, name string) []string {
	t.Helper()
	var body struct {
		Endpoints []struct{ Replica, Address string } `json:"endpoints"`
	}
	c := cli.NewClient(base, "", 10*time.Second)
	if _, err := c.Do(context.Background(), "GET", "/api/v1/services/"+name+"/endpoints", nil, &body); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range body.Endpoints {
		if e.Address != "127.0.0.1" {
			t.Errorf("endpoint %s at %q, want its agent's host 127.0.0.1", e.Replica, e.Address)
		}
		out = append(out, e.Replica)
	}
	return out
}

// TestServiceEndToEnd (issue 44 acceptance, real processes under hetsched
// up): a service applied from a file runs its replicas; readiness gates
// the endpoints; a replica whose liveness probe fails is restarted in
// place (restarts counted, the same replica); a replica that is killed is
// replaced; scale and rollout restart work; delete stops everything.
func TestServiceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpInProcess(t)
	out := t.TempDir()
	// Each run notes its work dir (where the test makes it sick), becomes
	// ready a moment after it starts, and is alive while no "sick" file is
	// in its work dir.
	script := `rm -f ready sick; echo "$PWD" > "$OUT/$HETSCHED_TASK_ID"; sleep 1; touch ready; exec sleep 600`
	manifest := fmt.Sprintf(`services:
  - name: web
    replicas: 2
    template:
      resources: {cpu: 100m}
      command: [sh, -c, %q]
      env: {OUT: %q}
      readiness: {exec: {command: [test, -f, ready]}, period: 200ms}
      liveness: {exec: {command: [sh, -c, "! test -f sick"]}, period: 200ms, failureThreshold: 2}
`, script, out)
	file := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := run(t, "apply", "-f", file, "--server", base); err != nil || !strings.Contains(o, "service/web created") {
		t.Fatalf("apply: %v\n%s", err, o)
	}
	if o, err := run(t, "apply", "-f", file, "--server", base); err != nil || !strings.Contains(o, "service/web unchanged") {
		t.Fatalf("apply again: %v\n%s", err, o)
	}
	until(t, func() string {
		if eps := endpoints(t, base, "web"); len(eps) != 2 {
			return fmt.Sprintf("endpoints %v, want the 2 replicas once ready", eps)
		}
		return ""
	})
	o, err := run(t, "get", "services", "--server", base)
	if err != nil || !strings.Contains(o, "web") || !strings.Contains(o, "2/2") {
		t.Fatalf("get services: %v\n%s", err, o)
	}

	// Liveness: make web-1 sick; it is restarted in place, out of the
	// endpoints meanwhile, then back.
	dir, err := os.ReadFile(filepath.Join(out, "web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(strings.TrimSpace(string(dir)), "sick"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	until(t, func() string {
		for _, r := range replicaStates(t, base, "web") {
			if r.ID == "web-1" && r.Restarts >= 1 && r.Ready {
				return ""
			}
		}
		return fmt.Sprintf("web-1 not restarted and ready again: %+v", replicaStates(t, base, "web"))
	})
	if o, err := run(t, "describe", "service", "web", "--server", base); err != nil || !strings.Contains(o, "liveness probe failed") {
		t.Errorf("describe service: %v, want the liveness failure shown\n%s", err, o)
	}

	// Killed: cancel web-2; a new replica replaces it.
	if o, err := run(t, "cancel", "task", "web-2", "--server", base); err != nil {
		t.Fatalf("cancel: %v\n%s", err, o)
	}
	until(t, func() string {
		eps := endpoints(t, base, "web")
		if len(eps) == 2 && !strings.Contains(strings.Join(eps, ","), "web-2") {
			return ""
		}
		return fmt.Sprintf("endpoints %v, want 2 without web-2", eps)
	})

	// Scale by hand, then a rollout restart replaces every replica.
	if o, err := run(t, "scale", "service", "web", "--replicas", "3", "--server", base); err != nil || !strings.Contains(o, "scaled to 3") {
		t.Fatalf("scale: %v\n%s", err, o)
	}
	until(t, func() string {
		if eps := endpoints(t, base, "web"); len(eps) != 3 {
			return fmt.Sprintf("endpoints %v, want 3", eps)
		}
		return ""
	})
	before := endpoints(t, base, "web")
	if o, err := run(t, "rollout", "restart", "service", "web", "--server", base); err != nil {
		t.Fatalf("rollout restart: %v\n%s", err, o)
	}
	until(t, func() string {
		eps := endpoints(t, base, "web")
		for _, e := range eps {
			for _, b := range before {
				if e == b {
					return fmt.Sprintf("endpoints %v still hold %s of before the restart", eps, e)
				}
			}
		}
		if len(eps) != 3 {
			return fmt.Sprintf("endpoints %v, want 3 new ones", eps)
		}
		return ""
	})

	if o, err := run(t, "delete", "service", "web", "--server", base); err != nil {
		t.Fatalf("delete: %v\n%s", err, o)
	}
	until(t, func() string {
		o, _ := run(t, "get", "tasks", "--state", "running", "-o", "name", "--server", base)
		if strings.Contains(o, "web-") {
			return "replicas still running after delete:\n" + o
		}
		return ""
	})
}

// TestServiceAutoscalesOnCPU (issue 44 acceptance): replicas that burn CPU
// make the service scale from min towards max on its CPU target; once
// they stop, it scales back to min after the scale-down window.
func TestServiceAutoscalesOnCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpInProcess(t)
	dir := t.TempDir()
	burn := filepath.Join(dir, "burn")
	if err := os.WriteFile(burn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// While the file is there, each replica spins (about one core); then
	// it sleeps.
	svc := map[string]any{"name": "hot", "replicas": 2,
		"template": map[string]any{"resources": map[string]any{"cpu": "500m"},
			"command": []string{"sh", "-c", `while [ -e "$BURN" ]; do :; done; exec sleep 600`},
			"env":     map[string]string{"BURN": burn}},
		"autoscale": map[string]any{"min": 2, "max": 3, "metrics": []map[string]any{{"resource": "cpu", "target": "50%"}},
			"behavior": map[string]any{"scaleDown": map[string]any{"stabilizationWindow": "5s"}}}}
	body, _ := json.Marshal(svc)
	c := cli.NewClient(base, "", 10*time.Second)
	if status, err := c.Do(context.Background(), "POST", "/api/v1/services", body, nil); err != nil || status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, err)
	}
	status := func() (desired, current int, reason string) {
		var v struct {
			Status struct {
				Desired, Replicas int
				LastScale         *struct{ Reason string }
			}
		}
		if _, err := c.Do(context.Background(), "GET", "/api/v1/services/hot", nil, &v); err != nil {
			t.Fatal(err)
		}
		if v.Status.LastScale != nil {
			reason = v.Status.LastScale.Reason
		}
		return v.Status.Desired, v.Status.Replicas, reason
	}
	until(t, func() string {
		if d, cur, why := status(); d != 3 || cur != 3 || !strings.Contains(why, "ScaleUp") {
			return fmt.Sprintf("desired %d, current %d (%s): want scaled up to max 3", d, cur, why)
		}
		return ""
	})
	if err := os.Remove(burn); err != nil {
		t.Fatal(err)
	}
	until(t, func() string {
		if d, cur, why := status(); d != 2 || cur != 2 || !strings.Contains(why, "ScaleDown") {
			return fmt.Sprintf("desired %d, current %d (%s): want back to min 2 after the window", d, cur, why)
		}
		return ""
	})
	o, err := run(t, "describe", "service", "hot", "--server", base)
	if err != nil || !strings.Contains(o, "scaled") || !strings.Contains(o, "2 to 3") || !strings.Contains(o, "3 to 2") {
		t.Errorf("describe service: %v, want both decisions listed\n%s", err, o)
	}
	if _, err := c.Do(context.Background(), "POST", "/api/v1/services/hot/scale", []byte(`{"replicas":3}`), nil); err == nil || !strings.Contains(err.Error(), "autoscales") {
		t.Errorf("scaling an autoscaled service by hand: %v, want refused naming why", err)
	}
}

// poolNodes are the nodes of hetsched up's node pool, with their states.
func poolNodes(t *testing.T, base string) map[string]string {
	t.Helper()
	var body struct {
		Nodes []struct {
			Name, State string
			Labels      map[string]string
		} `json:"nodes"`
	}
	c := cli.NewClient(base, "", 10*time.Second)
	if _, err := c.Do(context.Background(), "GET", "/api/v1/nodes", nil, &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range body.Nodes {
		if n.Labels["hetsched.io/pool"] != "" {
			out[n.Name] = n.State
		}
	}
	return out
}

// TestNodePoolGrowsAndShrinks (issue 44 acceptance, hetsched up's pool of
// in-process agents): GPU tasks only the pool's nodes can run make it
// grow by the nodes they need; they run there; once idle, its nodes are
// drained, then removed.
func TestNodePoolGrowsAndShrinks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpWith(t, func(o *up.Options) { o.PoolScaleOut, o.PoolScaleIn = time.Second, 3*time.Second })
	if n := poolNodes(t, base); len(n) != 0 {
		t.Fatalf("pool nodes before any work: %v", n)
	}
	c := cli.NewClient(base, "", 10*time.Second)
	for _, id := range []string{"l4-a", "l4-b"} {
		body := fmt.Sprintf(`{"id":%q,"resources":{"cpu":"1","nvidia.com/gpu":4},"nodeSelector":{"gpu.model":"L4"},"command":["sleep","2"]}`, id)
		if _, err := c.Do(context.Background(), "POST", "/api/v1/tasks", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	until(t, func() string {
		if n := poolNodes(t, base); len(n) != 2 {
			return fmt.Sprintf("pool nodes %v, want 2 (two 4-GPU tasks, 4 GPUs a node)", n)
		}
		return ""
	})
	nodes := map[string]bool{}
	for _, id := range []string{"l4-a", "l4-b"} {
		until(t, func() string {
			var v struct{ State, Node string }
			if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/"+id, nil, &v); err != nil {
				return err.Error()
			}
			if v.State != "succeeded" {
				return fmt.Sprintf("%s: %s", id, v.State)
			}
			nodes[v.Node] = true
			return ""
		})
	}
	if len(nodes) != 2 {
		t.Errorf("the tasks ran on %v, want the pool's two nodes", nodes)
	}
	sawDraining := false
	until(t, func() string {
		n := poolNodes(t, base)
		for _, st := range n {
			sawDraining = sawDraining || st == "draining"
		}
		if len(n) != 0 {
			return fmt.Sprintf("pool nodes %v, want none once idle", n)
		}
		return ""
	})
	if !sawDraining {
		t.Error("no pool node was seen draining before it went (a pass is 2 s, the looks 50 ms apart)")
	}
}
