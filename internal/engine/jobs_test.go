package engine

import (
	"testing"

	"github.com/hetsched/hetsched/internal/api"
)

// A job's gang reaches the core with its domains and disruption:
// requiredTopology as given, sameModel (default true) as MixedModels
// false, sameModel false as MixedModels true, disruption member as
// EvictMembers.
func TestCoreJobGangDomains(t *testing.T) {
	for _, c := range []struct {
		same       *bool
		disruption string
		wantMixed  bool
	}{{nil, "", false}, {new(true), api.DisruptGang, false}, {new(false), api.DisruptMember, true}} {
		j := &api.Job{ID: "j", Tasks: []api.Task{{ID: "a"}, {ID: "b"}},
			Gang: &api.Gang{MinMember: 2, RequiredTopology: "rack", SameModel: c.same, Disruption: c.disruption}}
		g := coreJob(j).Gang
		if g == nil || g.RequiredTopology != "rack" || g.MixedModels != c.wantMixed || len(g.Members) != 2 ||
			g.EvictMembers != (c.disruption == api.DisruptMember) {
			t.Errorf("sameModel %v, disruption %q: core gang %+v, want requiredTopology rack, mixed %v", c.same, c.disruption, g, c.wantMixed)
		}
	}
}
