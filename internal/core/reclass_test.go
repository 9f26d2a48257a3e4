package core

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// TestReclassDeterministic: re-classing (reclass.go) collects the stale
// classes from a map; the tasks it moves must queue again in one order,
// whatever the map's, or two cores given the same inputs place apart.
//
// Was a bug (fixed): the tasks moved in the map's order, and with them the
// tier's batch window restarted or not: t2 (level 2, batched) was placed
// at t3's submission in some runs and not in others (found by
// TestPropertyDeterminism, about one run in two).
func TestReclassDeterministic(t *testing.T) {
	specs := []string{
		`{"id":"t0","resources":{"cpu":"750m","memory":"3584Mi","nvidia.com/gpu":"1"},"nodeSelector":{"nvidia.com/gpu.model":"A"}}`,
		`{"id":"t1","priority":3,"resources":{"cpu":"6250m","memory":"1Gi","nvidia.com/gpu":"1"}}`,
		`{"id":"t2","resources":{"cpu":"6750m","nvidia.com/gpu":"250m"},"metadata":{"app":"a"}}`,
		`{"id":"t3","priority":3,"alternatives":[{"resources":{"cpu":"1"}}],"nodeSelector":{"zone":"z2"},` +
			`"antiAffinity":[{"selector":{"app":"a"},"topologyKey":"hetsched.io/node","required":true}]}`,
	}
	at := []time.Duration{0, 3 * time.Millisecond, 3 * time.Millisecond, 8 * time.Millisecond}
	run := func() string {
		c, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		node := &api.Node{}
		if err := json.Unmarshal([]byte(`{"name":"n0","labels":{"zone":"z1"},"capacity":{"cpu":"15","memory":"20Gi"},"devices":[`+
			`{"type":"nvidia.com/gpu","id":"g0","model":"B"},{"type":"nvidia.com/gpu","id":"g1","model":"B"}]}`), node); err != nil {
			t.Fatal(err)
		}
		if err := c.UpsertNode(epoch, node); err != nil {
			t.Fatal(err)
		}
		var trace string
		for i, s := range specs {
			var spec api.Task
			if err := json.Unmarshal([]byte(s), &spec); err != nil {
				t.Fatal(err)
			}
			if err := c.Submit(epoch.Add(at[i]), &spec); err != nil {
				t.Fatal(err)
			}
			trace += formatOutput(c.TakeOutput())
		}
		return trace
	}
	first := run()
	for i := 0; i < 50; i++ {
		if again := run(); again != first {
			t.Fatalf("the same inputs gave\n%s\nand\n%s", first, again)
		}
	}
}
