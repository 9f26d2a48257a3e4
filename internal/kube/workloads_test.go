package kube_test

// Kubernetes' own gangs (scheduling.k8s.io/v1alpha2 PodGroup) side by
// side with kube-scheduler v1.36 running with the same feature gates,
// which schedules those gangs itself (workloads.go).

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1a2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// k8sGroup is a PodGroup of a scenario.
type k8sGroup struct {
	name       string
	minCount   int32 // 0: the basic policy
	topology   string
	disruption schedv1a2.DisruptionMode
	class      string   // the scenario's PriorityClass of the group
	claims     []string // the group's claims: name=ResourceClaim
}

func (g k8sGroup) object(d *diffEnv, ns string) *schedv1a2.PodGroup {
	pg := &schedv1a2.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: ns}}
	if g.class != "" {
		pg.Spec.PriorityClassName = d.ns + "-" + g.class // as makePod names a pod's
	}
	if g.minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &schedv1a2.GangSchedulingPolicy{MinCount: g.minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &schedv1a2.BasicSchedulingPolicy{}
	}
	if g.topology != "" {
		pg.Spec.SchedulingConstraints = &schedv1a2.PodGroupSchedulingConstraints{Topology: []schedv1a2.TopologyConstraint{{Key: g.topology}}}
	}
	if g.disruption != "" {
		m := g.disruption
		pg.Spec.DisruptionMode = &m
	}
	for _, c := range g.claims {
		name, claim, _ := strings.Cut(c, "=")
		pg.Spec.ResourceClaims = append(pg.Spec.ResourceClaims, schedv1a2.PodGroupResourceClaim{Name: name, ResourceClaimName: &claim})
	}
	return pg
}

// inGroup makes the pod a member of the PodGroup name.
func inGroup(name string) podOpt {
	return func(p *corev1.Pod) { p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name} }
}

func rackNode(name, rack string) diffNode {
	return diffNode{name: name, alloc: map[string]string{"nvidia.com/gpu": "8"}, labels: map[string]string{diffKindLabel: name, "rack": rack}}
}

// Four racks' worth of gangs on six 8-GPU nodes in racks a, b and c
// (phase by phase, so that what is free is the same in both copies):
//
//	0  fillers take 4 GPUs of a1 and of b1
//	1  rack-fits (2 × 8 GPUs, one rack) fits rack c only; short (minCount
//	   3, two pods) never forms
//	2  rack-held (2 × 8 GPUs, one rack) waits: a2 and b2 have 8 free, in
//	   two racks
//	3  spread (2 × 8 GPUs, no constraint) takes a2 and b2
//	4  basic (three pods of 3 GPUs, the basic policy) places two
func k8sGroupsScenario() (*scenario, []k8sGroup) {
	groups := []k8sGroup{
		{name: "rack-fits", minCount: 2, topology: "rack", disruption: schedv1a2.DisruptionModePodGroup},
		{name: "short", minCount: 3},
		{name: "rack-held", minCount: 2, topology: "rack"},
		{name: "spread", minCount: 2},
		{name: "basic"},
	}
	sc := &scenario{name: "k8s-podgroups", silent: map[string]bool{"short": true}, nodes: []diffNode{rackNode("a1", "a"), rackNode("a2", "a"), rackNode("b1", "b"), rackNode("b2", "b"), rackNode("c1", "c"), rackNode("c2", "c")},
		setup: makeGroups(groups)}
	sc.pods = append(sc.pods, single(0, "filler-a1", gpus("4"), onKind("a1")), single(0, "filler-b1", gpus("4"), onKind("b1")))
	sc.pods = append(sc.pods, replicas("rack-fits", 2, 1, gpus("8"), inGroup("rack-fits"))...)
	sc.pods = append(sc.pods, replicas("short", 2, 1, gpus("1"), inGroup("short"))...)
	sc.pods = append(sc.pods, replicas("rack-held", 2, 2, gpus("8"), inGroup("rack-held"))...)
	sc.pods = append(sc.pods, replicas("spread", 2, 3, gpus("8"), inGroup("spread"))...)
	sc.pods = append(sc.pods, replicas("basic", 3, 4, gpus("3"), inGroup("basic"))...)
	return sc, groups
}

func gpus(n string) podOpt { return request("nvidia.com/gpu", n) }

// makeGroups is a scenario's setup creating groups in a copy.
func makeGroups(groups []k8sGroup) func(d *diffEnv, cp *diffCopy) error {
	return func(d *diffEnv, cp *diffCopy) error {
		for _, g := range groups {
			if _, err := d.cs.SchedulingV1alpha2().PodGroups(cp.ns).Create(d.ctx, g.object(d, cp.ns), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
}

// The group's priority preempts: four low pods (class low) fill two
// 8-GPU nodes; a gang of two 4-GPU pods whose PodGroup has class high
// (its pods name no class: priority 0, below low's) evicts two of them
// in either copy (kube-scheduler evicted three: a known divergence); a
// gang of class low (two 6-GPU pods) evicts nothing, and fits in no room
// the urgent gang's evictions leave (with 4-GPU pods it did, in one
// kube-scheduler run of several, before the urgent gang was bound: its
// PodGroupScheduled then depended on that race).
func k8sPreemptScenario() (*scenario, []k8sGroup) {
	groups := []k8sGroup{
		{name: "urgent", minCount: 2, class: "high", disruption: schedv1a2.DisruptionModePodGroup},
		{name: "peer", minCount: 2, class: "low"},
	}
	sc := &scenario{name: "k8s-podgroup-preemption", nodes: []diffNode{rackNode("p1", "a"), rackNode("p2", "a")},
		classes: map[string]priorityDef{"low": {value: 100}, "high": {value: 1000}}, setup: makeGroups(groups),
		known: map[string]string{"low": "kube-scheduler 1.36's alpha workload-aware preemption evicted three low pods where two free the room (seen 2026-12-06); hetsched's victim set is minimal (issue 43 §1)"}}
	class := func(c string) podOpt { return func(p *corev1.Pod) { p.Spec.PriorityClassName = c } }
	sc.pods = append(sc.pods, replicas("low", 4, 0, gpus("4"), class("low"))...)
	sc.pods = append(sc.pods, replicas("peer", 2, 1, gpus("6"), inGroup("peer"))...)
	sc.pods = append(sc.pods, replicas("urgent", 2, 2, gpus("4"), inGroup("urgent"))...)
	return sc, groups
}

// A member that comes after its gang started joins the gang's domain,
// as kube-scheduler's TopologyPlacementGenerator keeps it: a filler
// leaves y1 3 GPUs, so the gang (two 3-GPU pods, one rack) goes to x1;
// its third pod (2 GPUs) fits x1 or the less allocated y1, and must go
// to x1.
func k8sLateMemberScenario() (*scenario, []k8sGroup) {
	groups := []k8sGroup{{name: "grow", minCount: 2, topology: "rack"}}
	sc := &scenario{name: "k8s-podgroup-late-member", nodes: []diffNode{rackNode("x1", "x"), rackNode("y1", "y")}, setup: makeGroups(groups)}
	sc.pods = append(sc.pods, single(0, "filler-y1", gpus("5"), onKind("y1")))
	sc.pods = append(sc.pods, replicas("grow", 2, 1, gpus("3"), inGroup("grow"))...)
	sc.pods = append(sc.pods, diffPod{pod: dpod("grow-late", gpus("2"), inGroup("grow")), group: "grow", phase: 2})
	return sc, groups
}

// TestK8sPodGroupSideBySide: the same PodGroups bound or held by hetsched
// and by kube-scheduler with the gang feature gates, on one API server;
// every gang with a topology constraint in one rack; the PodGroupScheduled
// conditions alike.
func TestK8sPodGroupSideBySide(t *testing.T) {
	c := cluster(t)
	ks := kubetest.StartKubeScheduler(t, c, fmt.Sprintf("kube-gangs-%d", runs.Add(1)), 1000, 2000, "--feature-gates", kubetest.WorkloadFeatureGates)
	for _, mk := range []func() (*scenario, []k8sGroup){k8sGroupsScenario, k8sPreemptScenario, k8sLateMemberScenario, k8sGroupClaimScenario} {
		sc, groups := mk()
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel() // each its own namespaces, nodes and hetsched; one kube-scheduler for all
			sideBySide(t, ks, sc, groups)
		})
	}
}

// sideBySide runs sc with both schedulers and checks the groups' domains
// and conditions.
func sideBySide(t *testing.T, ks *kubetest.KubeScheduler, sc *scenario, groups []k8sGroup) {
	d := newDiffEnv(t, ks, sc, 4*time.Minute)
	states := d.run()
	for i, cp := range d.copies {
		racks := map[string]map[string]bool{}
		for _, dp := range sc.pods {
			st := states[i][dp.pod.Namespace+"/"+dp.pod.Name] // logical keys and node names
			if st.node == "" || dp.pod.Spec.SchedulingGroup == nil {
				continue
			}
			n, err := d.cs.CoreV1().Nodes().Get(d.ctx, cp.nodeName(st.node), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			g := *dp.pod.Spec.SchedulingGroup.PodGroupName
			if racks[g] == nil {
				racks[g] = map[string]bool{}
			}
			racks[g][n.Labels["rack"]] = true
			t.Logf("%s: %s of PodGroup %s on %s (rack %s)", cp.who, dp.pod.Name, g, st.node, n.Labels["rack"])
		}
		for _, g := range groups {
			if g.topology != "" && len(racks[g.name]) > 1 {
				t.Errorf("%s placed PodGroup %s over racks %v; its pods share one", cp.who, g.name, racks[g.name])
			}
		}
	}
	for _, g := range groups {
		var conds [2]string
		for i, cp := range d.copies {
			pg, err := d.cs.SchedulingV1alpha2().PodGroups(cp.ns).Get(d.ctx, g.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			conds[i] = "none"
			if c := apimeta.FindStatusCondition(pg.Status.Conditions, schedv1a2.PodGroupScheduled); c != nil {
				conds[i] = string(c.Status) + "/" + c.Reason
				t.Logf("%s: PodGroup %s: %s %s: %s", cp.who, g.name, c.Status, c.Reason, c.Message)
			}
		}
		if conds[0] != conds[1] {
			t.Errorf("PodGroup %s: PodGroupScheduled is %s under kube-scheduler, %s under hetsched", g.name, conds[0], conds[1])
		}
	}
}

// A PodGroup's claim is the group's: a gang of three pods naming the
// group's claim (one GPU) on two nodes of two GPUs goes to one node, the
// claim allocated once there, reserved for the PodGroup and not for its
// pods; a pod of the group whose claim of that name names another claim
// has a claim of its own. Once allocated, a later member is pinned to
// the claim's node.
func TestK8sPodGroupClaim(t *testing.T) {
	d := newDRAEnv(t)
	d.node("a", map[string]string{}, nil)
	d.node("b", map[string]string{}, nil)
	d.slice("a", d.gpuDriver, "gpu", 2, "H100", "80Gi")
	d.slice("b", d.gpuDriver, "gpu", 2, "H100", "80Gi")
	d.start()
	d.claim("shared", exactly("gpu", d.gpuClass, 1))
	d.claim("own", exactly("gpu", d.gpuClass, 1))
	shared := "shared"
	pg := &schedv1a2.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: d.ns}, Spec: schedv1a2.PodGroupSpec{
		SchedulingPolicy: schedv1a2.PodGroupSchedulingPolicy{Gang: &schedv1a2.GangSchedulingPolicy{MinCount: 3}},
		ResourceClaims:   []schedv1a2.PodGroupResourceClaim{{Name: "gpu", ResourceClaimName: &shared}},
	}}
	pg, err := d.cs.SchedulingV1alpha2().PodGroups(d.ns).Create(d.ctx, pg, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member := func(name, claim string) {
		p := d.podSpec(name, map[string]string{"cpu": "100m"})
		group := "train"
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		d.create(p)
	}
	member("m0", "shared")
	member("m1", "shared")
	member("m2", "shared")
	var node string
	for _, m := range []string{"m0", "m1", "m2"} {
		p := d.waitBound(m)
		if node == "" {
			node = p.Spec.NodeName
		}
		if p.Spec.NodeName != node {
			t.Errorf("%s on %s, another member on %s: a node-local group claim keeps the gang on one node", m, p.Spec.NodeName, node)
		}
	}
	c := d.getClaim("shared")
	if a := c.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Pool != node {
		t.Fatalf("the group's claim: allocation %+v, want one device on %s", a, node)
	}
	want := []resourcev1.ResourceClaimConsumerReference{{APIGroup: schedv1a2.GroupName, Resource: "podgroups", Name: "train", UID: pg.UID}}
	if !reflect.DeepEqual(c.Status.ReservedFor, want) {
		t.Errorf("the group's claim reserved for %+v, want the PodGroup alone: %+v", c.Status.ReservedFor, want)
	}
	// A later member is pinned to the claim's node; one whose claim "gpu"
	// names another claim is not the group's claim: its own, for itself.
	member("m3", "shared")
	if p := d.waitBound("m3"); p.Spec.NodeName != node {
		t.Errorf("m3 on %s, want the group claim's node %s", p.Spec.NodeName, node)
	}
	member("m4", "own")
	d.allocated("m4", "own", "gpu", d.gpuDriver, 1)
	if c := d.getClaim("shared"); !reflect.DeepEqual(c.Status.ReservedFor, want) {
		t.Errorf("after the later members the group's claim is reserved for %+v, want %+v", c.Status.ReservedFor, want)
	}
}

// A PodGroup's claim side by side: the gang of three pods sharing the
// group's one-GPU claim goes, under hetsched, to the claim's node; both
// schedulers allocate the claim once and reserve it for the PodGroup
// alone. kube-scheduler 1.36.3 put members on the other node too (a
// known divergence, which fails the test for hetsched's copy).
func k8sGroupClaimScenario() (*scenario, []k8sGroup) {
	groups := []k8sGroup{{name: "train", minCount: 3, claims: []string{"gpu=shared"}}}
	sc := &scenario{name: "k8s-podgroup-claim", nodes: []diffNode{kindNode("a"), kindNode("b")},
		// Seen 2026-12-06 with kube-scheduler v1.36.3 (alpha
		// DRAWorkloadResourceClaims): it allocated the group's claim on
		// one node and bound members to the other.
		known: map[string]string{"claim-node": "kube-scheduler 1.36.3 binds members of a PodGroup to nodes its group claim's node-local allocation does not reach"}}
	sc.setup = func(d *diffEnv, cp *diffCopy) error {
		driver, class := "gpu."+d.ns+".example.com", d.ns+"-gpu"
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}}}
		if _, err := d.cs.ResourceV1().DeviceClasses().Create(d.ctx, dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		for _, n := range []string{"a", "b"} {
			node := cp.nodeName(n)
			sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"}, Spec: resourcev1.ResourceSliceSpec{
				Driver: driver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}}}
			if _, err := d.cs.ResourceV1().ResourceSlices().Create(d.ctx, sl, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: cp.ns}, Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactly("gpu", class, 1)}}}}
		if _, err := d.cs.ResourceV1().ResourceClaims(cp.ns).Create(d.ctx, c, metav1.CreateOptions{}); err != nil {
			return err
		}
		return makeGroups(groups)(d, cp)
	}
	claim := func(p *corev1.Pod) {
		shared := "shared"
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &shared}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	sc.pods = replicas("train", 3, 0, inGroup("train"), claim)
	sc.after = map[int]func(d *diffEnv, cp *diffCopy) error{0: func(d *diffEnv, cp *diffCopy) error {
		c, err := d.cs.ResourceV1().ResourceClaims(cp.ns).Get(d.ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pg, err := d.cs.SchedulingV1alpha2().PodGroups(cp.ns).Get(d.ctx, "train", metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := []resourcev1.ResourceClaimConsumerReference{{APIGroup: schedv1a2.GroupName, Resource: "podgroups", Name: "train", UID: pg.UID}}
		if a := c.Status.Allocation; a == nil || len(a.Devices.Results) != 1 {
			d.t.Errorf("%s: the group's claim allocated %+v, want one device", cp.who, a)
		} else {
			for i := range 3 {
				p, err := d.cs.CoreV1().Pods(cp.ns).Get(d.ctx, fmt.Sprintf("train-%d", i), metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.Spec.NodeName == a.Devices.Results[0].Pool { // a slice's pool is its node here
					continue
				}
				msg := fmt.Sprintf("%s bound %s to %s, where its claim's device (on %s) is not", cp.who, p.Name, p.Spec.NodeName, a.Devices.Results[0].Pool)
				if cp.id == "h" {
					d.t.Error(msg)
				} else {
					d.divergence("claim-node", msg)
				}
			}
		}
		if !reflect.DeepEqual(c.Status.ReservedFor, want) {
			d.t.Errorf("%s: the group's claim reserved for %+v, want the PodGroup alone", cp.who, c.Status.ReservedFor)
		}
		return nil
	}}
	return sc, groups
}
