package etcdstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/etcdmember/membertest"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/store/etcdstore"
)

// Near etcd's quota the store reports its space low, and an engine on it
// refuses new work with 507 (as on a Pebble store below its disk
// reserve) while a cancel still goes through.
func TestQuotaRefusesNewWork(t *testing.T) {
	cli := membertest.StartWithQuota(t, 32<<20)
	ctx := context.Background()
	s := open(t, cli, "/quota/", etcdstore.Options{SpaceEvery: 20 * time.Millisecond, SnapshotMinBytes: 1 << 40})
	lead(t, s, nil)
	big := make([]byte, 256<<10) // random: compression cannot shrink it
	rng := rand.New(rand.NewPCG(3, 4))
	for k := range big {
		big[k] = byte(rng.Uint32())
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; !s.Space().Low; i++ {
		if time.Now().After(deadline) || i > 400 {
			t.Fatalf("the store never reported low space: %+v after %d commits", s.Space(), i)
		}
		if err := s.Commit(ctx, []store.Record{{Kind: "blob", Key: fmt.Sprint(i % 20), Value: big}}); err != nil {
			t.Fatalf("commit %d: %v (space %+v)", i, err, s.Space())
		}
		time.Sleep(5 * time.Millisecond)
	}
	sp := s.Space()
	if sp.Total != 32<<20 || sp.Free >= sp.Reserve {
		t.Fatalf("space %+v", sp)
	}
	e, err := engine.New(engine.Config{Core: core.DefaultConfig()}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := 2
	_, _, err = e.Submit(ctx, "default", []api.Task{{ID: "late", Priority: &p, Resources: resource.List{resource.CPU: 1000}}})
	if errs.CodeOf(err) != errs.InsufficientStorage {
		t.Fatalf("a submission near the quota: %v, want insufficient_storage", err)
	}
	if err := e.Cancel(ctx, "nothing"); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("a cancel near the quota: %v, want it to reach the engine (not found)", err)
	}
}
