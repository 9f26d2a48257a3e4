package engine

import (
	"testing"

	"github.com/hetsched/hetsched/internal/api"
)

// A job's gang reaches the core with its domains: requiredTopology as
// given, sameModel (default true) as MixedModels false, sameModel false as
// MixedModels true.
func TestCoreJobGangDomains(t *testing.T) {
	for _, c := range []struct {
		same      *bool
		wantMixed bool
	}{{nil, false}, {new(true), false}, {new(false), true}} {
		j := &api.Job{ID: "j", Tasks: []api.Task{{ID: "a"}, {ID: "b"}},
			Gang: &api.Gang{MinMember: 2, RequiredTopology: "rack", SameModel: c.same}}
		g := coreJob(j).Gang
		if g == nil || g.RequiredTopology != "rack" || g.MixedModels != c.wantMixed || len(g.Members) != 2 {
			t.Errorf("sameModel %v: core gang %+v, want requiredTopology rack, mixed %v", c.same, g, c.wantMixed)
		}
	}
}
