package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedv1a2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/api"
)

// TestPodGroupGang: each field of Kubernetes' PodGroup becomes what
// workloads.go's table says, and what hetsched does not honour is
// refused with an error naming the field.
func TestPodGroupGang(t *testing.T) {
	classes := func(name string) (int32, bool) {
		if name == "training" {
			return 1_000_000, true
		}
		return 0, false
	}
	gang := func(n int32) schedv1a2.PodGroupSchedulingPolicy {
		return schedv1a2.PodGroupSchedulingPolicy{Gang: &schedv1a2.GangSchedulingPolicy{MinCount: n}}
	}
	basic := schedv1a2.PodGroupSchedulingPolicy{Basic: &schedv1a2.BasicSchedulingPolicy{}}
	topo := func(keys ...string) *schedv1a2.PodGroupSchedulingConstraints {
		c := &schedv1a2.PodGroupSchedulingConstraints{}
		for _, k := range keys {
			c.Topology = append(c.Topology, schedv1a2.TopologyConstraint{Key: k})
		}
		return c
	}
	mode := func(m schedv1a2.DisruptionMode) *schedv1a2.DisruptionMode { return &m }
	base := gangSpec{name: "k8s:ml/train", group: "ml/train", upstream: true, min: 1, disruption: api.DisruptMember}
	with := func(f func(*gangSpec)) gangSpec { g := base; f(&g); return g }
	for _, tc := range []struct {
		name string
		spec schedv1a2.PodGroupSpec
		want gangSpec
		err  string // a part of the error; "" for none
	}{
		{name: "gang", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(4)}, want: with(func(g *gangSpec) { g.min = 4 })},
		{name: "basic", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: basic}, want: base},
		{name: "neither", spec: schedv1a2.PodGroupSpec{}, err: "spec.schedulingPolicy: names neither basic nor gang"},
		{name: "both", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: schedv1a2.PodGroupSchedulingPolicy{Basic: basic.Basic, Gang: gang(2).Gang}}, err: "names both"},
		{name: "minCount 0", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(0)}, err: "spec.schedulingPolicy.gang.minCount"},
		{name: "minCount capped", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(api.MaxShards + 5)}, want: with(func(g *gangSpec) { g.min = api.MaxShards })},
		{name: "topology", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), SchedulingConstraints: topo("topology.kubernetes.io/rack")},
			want: with(func(g *gangSpec) { g.min, g.required = 2, "topology.kubernetes.io/rack" })},
		{name: "two topologies", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), SchedulingConstraints: topo("rack", "zone")}, err: "spec.schedulingConstraints.topology: 2 constraints"},
		{name: "bad key", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), SchedulingConstraints: topo("a b")}, err: "spec.schedulingConstraints.topology[0].key"},
		{name: "basic topology", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: basic, SchedulingConstraints: topo("rack")}, err: "only under the gang policy"},
		{name: "disrupt group", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), DisruptionMode: mode(schedv1a2.DisruptionModePodGroup)},
			want: with(func(g *gangSpec) { g.min, g.disruption = 2, api.DisruptGang })},
		{name: "disrupt pod", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), DisruptionMode: mode(schedv1a2.DisruptionModePod)},
			want: with(func(g *gangSpec) { g.min = 2 })},
		{name: "disrupt basic group", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: basic, DisruptionMode: mode(schedv1a2.DisruptionModePodGroup)}, err: "spec.disruptionMode"},
		{name: "disrupt unknown", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), DisruptionMode: mode("Node")}, err: `spec.disruptionMode: "Node"`},
		{name: "priority", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), Priority: ptr(int32(7)), PriorityClassName: "training"},
			want: with(func(g *gangSpec) { g.min, g.priority = 2, ptr(int32(7)) })},
		{name: "class", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), PriorityClassName: "training"},
			want: with(func(g *gangSpec) { g.min, g.priority = 2, ptr(int32(1_000_000)) })},
		{name: "unknown class", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), PriorityClassName: "nope"}, err: `spec.priorityClassName: no PriorityClass "nope"`},
		{name: "claims", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), ResourceClaims: []schedv1a2.PodGroupResourceClaim{{Name: "gpus", ResourceClaimName: ptr("shared")}, {Name: "nics", ResourceClaimTemplateName: ptr("nic")}}},
			want: with(func(g *gangSpec) { g.min = 2 })},
		{name: "claim of both", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), ResourceClaims: []schedv1a2.PodGroupResourceClaim{{Name: "gpus", ResourceClaimName: ptr("shared"), ResourceClaimTemplateName: ptr("t")}}},
			err: "spec.resourceClaims[0]: names gpus: exactly one of"},
		{name: "claim of neither", spec: schedv1a2.PodGroupSpec{SchedulingPolicy: gang(2), ResourceClaims: []schedv1a2.PodGroupResourceClaim{{Name: "gpus"}}},
			err: "spec.resourceClaims[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := &schedv1a2.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train"}, Spec: tc.spec}
			got, err := podGroupGang(pg, classes)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "PodGroup ml/train") {
					t.Fatalf("error %v, want one naming PodGroup ml/train and saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(gangSpec{})); d != "" {
				t.Errorf("gang (-want +got):\n%s", d)
			}
		})
	}
}

// TestGangSpecApplies: the job's gang and each member's priority follow
// the spec; without a group priority a member keeps its own.
func TestGangSpecApplies(t *testing.T) {
	g := gangSpec{min: 3, required: "rack", disruption: api.DisruptGang, priority: ptr(int32(2_000_000))}
	if d := cmp.Diff(&api.Gang{MinMember: 3, RequiredTopology: "rack", Disruption: api.DisruptGang}, g.gang()); d != "" {
		t.Errorf("gang (-want +got):\n%s", d)
	}
	var task api.Task
	g.applyPriority(&task, DefaultPriorityTiers)
	if task.Priority == nil || *task.Priority != api.PriorityHigh || task.PriorityValue != 2_000_000 {
		t.Errorf("a member of a group of priority 2,000,000: tier %v value %d, want high (%d) and 2000000", task.Priority, task.PriorityValue, api.PriorityHigh)
	}
	tier := api.PriorityLow
	own := api.Task{Priority: &tier, PriorityValue: -5}
	(&gangSpec{min: 3}).applyPriority(&own, DefaultPriorityTiers)
	if *own.Priority != api.PriorityLow || own.PriorityValue != -5 {
		t.Errorf("a member of a group without priority changed: tier %d value %d", *own.Priority, own.PriorityValue)
	}
}
