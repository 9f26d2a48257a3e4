package engine

import (
	"context"
	"testing"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestNodePoolsAreDurable: a pool put is there after a restart, a pool
// deleted is not; an invalid one is refused before the loop.
func TestNodePoolsAreDurable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	e, st := open(t, dir)
	pool := api.NodePool{Name: "burst", Max: 2, Template: api.Node{Capacity: resource.List{resource.CPU: 8000}},
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: []string{"true"}}}}
	for _, name := range []string{"burst", "gone"} {
		p := pool
		p.Name = name
		if created, err := e.PutNodePool(ctx, p); err != nil || !created {
			t.Fatal(created, err)
		}
	}
	if err := e.DeleteNodePool(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	bad := pool
	bad.Max = 0
	if _, err := e.PutNodePool(ctx, bad); err == nil {
		t.Error("max 0: accepted")
	}
	e.Close()
	st.Close()
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	got := e.NodePools()
	if len(got) != 1 || got[0].Name != "burst" || got[0].Max != 2 || got[0].Provider.Exec.Command[0] != "true" {
		t.Fatalf("after a restart: %+v, want burst alone", got)
	}
}
