package engine

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// countingStore counts durable commits.
type countingStore struct {
	store.Store
	commits atomic.Int64
}

func (c *countingStore) Commit(ctx context.Context, recs []store.Record) error {
	c.commits.Add(1)
	return c.Store.Commit(ctx, recs)
}

// TestUpsertNodesGroupsCommits: a node inventory goes in a few commits,
// not one per node, and the first invalid node is reported by index while
// the others are still applied.
func TestUpsertNodesGroupsCommits(t *testing.T) {
	disk, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	st := &countingStore{Store: disk}
	e, err := New(Config{Core: core.DefaultConfig()}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 2000
	nodes := make([]api.Node, n)
	for i := range nodes {
		nodes[i] = api.Node{Name: "n" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30}}
	}
	nodes[7].Name = "" // invalid
	before := st.commits.Load()
	i, err := e.UpsertNodes(context.Background(), nodes)
	if i != 7 || err == nil {
		t.Fatalf("UpsertNodes = %d, %v; want the invalid node 7 reported", i, err)
	}
	if c := st.commits.Load() - before; c > n/20 {
		t.Fatalf("%d commits for %d nodes: the upserts were not grouped", c, n)
	}
	if got := e.Nodes(); len(got) != n-1 {
		t.Fatalf("%d nodes applied, want %d", len(got), n-1)
	}
}
