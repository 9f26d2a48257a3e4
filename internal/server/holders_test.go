package server

import (
	"strings"
	"testing"
)

const agentNode = `{"name":%q,"capacity":{"cpu":"4","memory":"8Gi"}}`

func regBody(agent string, nodes ...string) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = strings.Replace(agentNode, "%q", `"`+n+`"`, 1)
	}
	return `{"agent":"` + agent + `","nodes":[` + strings.Join(parts, ",") + `]}`
}

// issue 15 §3: an agent token cannot replace a static node or take a live
// agent's node; a bound token serves only its nodes; an admin releases.
func TestAgentsCannotTakeOverNodes(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"

	// The reproduction: an agent registering gpu-a (static, 2 GPUs).
	code, m := callAs(t, agentTok, "POST", api+"/agents/register", regBody("gpu-a", "gpu-a"))
	if code != 409 || !strings.Contains(errMsg(m), "static inventory") {
		t.Fatalf("agent registering the static gpu-a: %d %v", code, m)
	}
	if code, m = callAs(t, adminTok, "GET", api+"/nodes/gpu-a", ""); code != 200 || len(m["devices"].([]any)) != 2 {
		t.Fatalf("gpu-a after the attempt: %d %v", code, m)
	}
	// A second agent taking agn-1 from a live first one.
	if code, m = callAs(t, agentTok, "POST", api+"/agents/register", regBody("agn-1", "agn-1")); code != 200 {
		t.Fatalf("first agent: %d %v", code, m)
	}
	code, m = callAs(t, agentTok, "POST", api+"/agents/register", regBody("other", "agn-1"))
	if code != 409 || !strings.Contains(errMsg(m), `agent \"agn-1\"`) && !strings.Contains(errMsg(m), `agent "agn-1"`) {
		t.Fatalf("second agent taking agn-1: %d %v", code, m)
	}
	// A token bound to agn-* may not register cpu-x, nor heartbeat it.
	if code, m = callAs(t, boundTok, "POST", api+"/agents/register", regBody("mixed", "agn-2", "cpu-x")); code != 403 || m["error"].(map[string]any)["field"] != "nodes[1].name" {
		t.Fatalf("bound token registering cpu-x: %d %v", code, m)
	}
	if code, m = callAs(t, boundTok, "POST", api+"/agents/register", regBody("agn-2", "agn-2")); code != 200 {
		t.Fatalf("bound token registering agn-2: %d %v", code, m)
	}
	if code, _ = callAs(t, boundTok, "POST", api+"/agents/agn-2/heartbeat", `{"nodes":[{"node":"cpu-a","cpu":0.1}]}`); code != 403 {
		t.Fatalf("bound token heartbeating cpu-a: %d", code)
	}
	// Nor read the assignments (and their env) of an agent serving other
	// nodes: register "cpus" for cpu-y with the unbound token, then try.
	if code, m = callAs(t, agentTok, "POST", api+"/agents/register", regBody("cpus", "cpu-y")); code != 200 {
		t.Fatalf("cpus agent: %d %v", code, m)
	}
	gen := m["generation"].(float64)
	if code, _ = callAs(t, boundTok, "GET", api+"/agents/cpus/assignments?generation="+itoa(int(gen)), ""); code != 403 {
		t.Fatalf("bound token reading cpus' assignments: %d", code)
	}
	if code, _ = callAs(t, boundTok, "POST", api+"/agents/cpus/status", `{"updates":[]}`); code != 403 {
		t.Fatalf("bound token reporting for cpus: %d", code)
	}
	// A stream without a generation is refused.
	if code, m = callAs(t, agentTok, "GET", api+"/agents/cpus/assignments", ""); code != 400 || m["error"].(map[string]any)["field"] != "generation" {
		t.Fatalf("stream without a generation: %d %v", code, m)
	}
	// Only an admin releases; then the agent may take gpu-a.
	if code, _ = callAs(t, agentTok, "POST", api+"/nodes/gpu-a/release", ""); code != 403 {
		t.Fatalf("agent releasing: %d", code)
	}
	if code, m = callAs(t, adminTok, "POST", api+"/nodes/gpu-a/release", ""); code != 200 || m["released"] != "static inventory" {
		t.Fatalf("admin release: %d %v", code, m)
	}
	if code, m = callAs(t, agentTok, "POST", api+"/agents/register", regBody("gpu-a", "gpu-a")); code != 200 {
		t.Fatalf("registering the released gpu-a: %d %v", code, m)
	}
}

func errMsg(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

func TestTokenNodesValidated(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{"{token: " + aTok + ", role: tenant, tenant: a, nodes: [x]}", "tokens[0].nodes"},
		{"{token: " + agentTok + ", role: agent, nodes: ['gpu-[']}", "tokens[0].nodes[0]"},
		{"{token: " + agentTok + ", role: agent, nodes: ['']}", "tokens[0].nodes[0]"},
	} {
		f := t.TempDir() + "/tokens.yaml"
		writeFile(t, f, "tokens:\n  - "+c.yaml+"\n")
		_, err := LoadTokens(f)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want an error on %s", c.yaml, err, c.field)
		}
	}
}

// issue 16 §1: a node view carries the utilization its heartbeats report.
func TestNodeViewUtilization(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	api := s.base + "/api/v1"
	reg := `{"agent":"g1","nodes":[{"name":"g1","capacity":{"cpu":"8","memory":"16Gi"},"devices":[{"type":"nvidia.com/gpu","id":"0","model":"L4"},{"type":"nvidia.com/gpu","id":"1","model":"L4"}]}]}`
	if code, m := call(t, "POST", api+"/agents/register", reg); code != 200 {
		t.Fatalf("register: %d %v", code, m)
	}
	beat := `{"nodes":[{"node":"g1","cpu":0.25,"memoryUsed":4294967296,"devices":{"0":{"utilization":1},"1":{"utilization":0.5}}}]}`
	if code, m := call(t, "POST", api+"/agents/g1/heartbeat", beat); code != 200 {
		t.Fatalf("heartbeat: %d %v", code, m)
	}
	_, m := call(t, "GET", api+"/nodes/g1", "")
	u, _ := m["utilization"].(map[string]any)
	if u["cpu"] != 0.25 || u["memory"] != 0.25 || u["nvidia.com/gpu"] != 0.75 {
		t.Errorf("utilization: %v", m["utilization"])
	}
}
