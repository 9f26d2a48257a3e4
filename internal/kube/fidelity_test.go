package kube_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fidelity to kube-scheduler (issue 40): each test here places pods as
// kube-scheduler's default plugins would, or keeps them waiting as it
// would.

// priorityClass creates a PriorityClass of the test with value, and
// returns its name.
func (e *env) priorityClass(name string, value int32, policy *corev1.PreemptionPolicy) string {
	e.t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}, Value: value, PreemptionPolicy: policy}
	if _, err := e.cs.SchedulingV1().PriorityClasses().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return pc.Name
}

// A pod evicts pods of a smaller priority, of its tier too (kube-scheduler
// orders preemption by the priority value); a pod whose preemptionPolicy
// is Never evicts nothing, however high its priority, and waits.
func TestPreemptionFollowsPriorityValuesAndPolicy(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "1"}, nil)
	e.start()
	never := corev1.PreemptNever
	low := e.priorityClass("low", 100, nil)
	higher := e.priorityClass("higher", 200, nil)
	shy := e.priorityClass("shy", 1000, &never)
	pod := func(name, class string) {
		p := e.podSpec(name, map[string]string{"nvidia.com/gpu": "1"})
		p.Spec.PriorityClassName = class
		e.create(p)
	}
	pod("victim", low)
	e.waitBound("victim")
	// Priority 1000 but Never: it waits, and the victim stays.
	pod("shy", shy)
	e.waitReason("shy", "insufficient nvidia.com/gpu")
	if p := e.get("victim"); p.DeletionTimestamp != nil {
		t.Fatal("a pod whose preemptionPolicy is Never evicted the victim")
	}
	// 200 over 100, both in the medium tier: the victim is evicted.
	pod("preemptor", higher)
	e.wait("the victim evicted", func() (bool, string) {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "victim", metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil, fmt.Sprint(err)
	})
	e.waitBound("preemptor")
	if p := e.get("shy"); p.Spec.NodeName != "" {
		t.Errorf("shy bound to %s", p.Spec.NodeName)
	}
}

// Host ports (kube-scheduler's NodePorts): three pods asking for host port
// 8080 on two nodes: one per node, the third waits saying why.
func TestHostPortsAreHeldOncePerNode(t *testing.T) {
	e := newEnv(t)
	e.node("a", nil, nil)
	e.node("b", nil, nil)
	e.start()
	for _, n := range []string{"p1", "p2", "p3"} {
		p := e.podSpec(n, map[string]string{"cpu": "1"})
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
		e.create(p)
	}
	e.wait("two of three bound", func() (bool, string) {
		bound := map[string]string{}
		for _, n := range []string{"p1", "p2", "p3"} {
			if p := e.get(n); p.Spec.NodeName != "" {
				if other, dup := bound[p.Spec.NodeName]; dup {
					t.Fatalf("%s and %s share host port 8080 on %s", other, n, p.Spec.NodeName)
				}
				bound[p.Spec.NodeName] = n
			}
		}
		return len(bound) == 2, fmt.Sprint(bound)
	})
	for _, n := range []string{"p1", "p2", "p3"} {
		if p := e.get(n); p.Spec.NodeName == "" {
			e.waitReason(n, "host port 8080/TCP taken")
		} else {
			e.waitEvent(n, "Scheduled", "Successfully assigned "+e.ns+"/"+n+" to "+p.Spec.NodeName)
		}
	}
}

// Required anti-affinity by hostname: four replicas on three nodes, one per
// node, the fourth waits; required affinity to a label no pod has waits.
func TestPodAntiAffinityAndAffinity(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.node(n, nil, nil)
	}
	e.start()
	anti := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: corev1.LabelHostname}}}}
	names := []string{"w1", "w2", "w3", "w4"}
	for _, n := range names {
		p := e.podSpec(n, map[string]string{"cpu": "1"})
		p.Labels["app"] = "web"
		p.Spec.Affinity = anti
		e.create(p)
	}
	var waiting string
	e.wait("three replicas bound, one per node", func() (bool, string) {
		bound := map[string]string{}
		waiting = ""
		for _, n := range names {
			p := e.get(n)
			if p.Spec.NodeName == "" {
				waiting = n
				continue
			}
			if other, dup := bound[p.Spec.NodeName]; dup {
				t.Fatalf("%s and %s share node %s against their anti-affinity", other, n, p.Spec.NodeName)
			}
			bound[p.Spec.NodeName] = n
		}
		return len(bound) == 3, fmt.Sprint(bound)
	})
	e.waitReason(waiting, "anti-affinity")

	lonely := e.podSpec("lonely", map[string]string{"cpu": "1"})
	lonely.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nobody"}}, TopologyKey: corev1.LabelHostname}}}}
	e.create(lonely)
	e.waitReason("lonely", "no affinity with app=nobody")
	// A pod of that label arrives: the waiting one joins it on its node.
	friend := e.podSpec("friend", map[string]string{"cpu": "1"})
	friend.Labels["app"] = "nobody"
	e.create(friend)
	at := e.waitBound("friend").Spec.NodeName
	if got := e.waitBound("lonely").Spec.NodeName; got != at {
		t.Errorf("lonely on %s, its affinity's pod on %s", got, at)
	}
}

// Topology spread (DoNotSchedule, maxSkew 1 over zones): no zone runs more
// than one pod above another, and a node without the zone label takes
// none, as kube-scheduler keeps them.
func TestTopologySpreadKeepsSkew(t *testing.T) {
	e := newEnv(t)
	e.node("a1", map[string]string{"cpu": "4"}, map[string]string{"zone": "a"})
	e.node("a2", map[string]string{"cpu": "4"}, map[string]string{"zone": "a"})
	e.node("b1", map[string]string{"cpu": "4"}, map[string]string{"zone": "b"})
	e.node("x", map[string]string{"cpu": "16"}, nil)
	e.start()
	var names []string
	for i := range 11 {
		n := fmt.Sprintf("s%d", i)
		names = append(names, n)
		p := e.podSpec(n, map[string]string{"cpu": "1"})
		p.Labels["app"] = "spread"
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
		e.create(p)
	}
	// b holds 4: a may hold 5; a tenth would make 6 to 4 (or land on x).
	var perZone map[string]int
	e.wait("nine bound", func() (bool, string) {
		perZone = map[string]int{}
		bound := 0
		for _, n := range names {
			p := e.get(n)
			switch p.Spec.NodeName {
			case "":
			case e.prefix + "x":
				t.Fatalf("%s bound to x, which has no zone", n)
			case e.prefix + "b1":
				perZone["b"]++
				bound++
			default:
				perZone["a"]++
				bound++
			}
		}
		return bound == 9, fmt.Sprint(perZone)
	})
	if d := perZone["a"] - perZone["b"]; d > 1 || d < -1 {
		t.Errorf("zones %v: skew %d", perZone, d)
	}
	for _, n := range names {
		if p := e.get(n); p.Spec.NodeName == "" {
			e.waitReason(n, "past maxSkew 1")
		}
	}
}

// A running pod is counted by its full request: another scheduler's pod
// with huge pages, resized in place (its status's resources above its
// spec's), holds all it asks, so a pod that would over-commit the node
// waits.
func TestRunningPodsCountedByTheirFullRequest(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"cpu": "4", "hugepages-2Mi": "64Mi"}, nil)
	e.start()
	other := e.podSpec("other", map[string]string{"cpu": "1", "memory": "64Mi", "hugepages-2Mi": "32Mi"})
	other.Spec.SchedulerName = "someone-else"
	other.Spec.NodeName = e.prefix + "a"
	other.Spec.Containers[0].Resources.Limits["memory"] = k8sresource.MustParse("64Mi")
	e.create(other)
	// cpu 1 of 4 held: a pod of 2 fits; one asking for huge pages past
	// what is left waits.
	e.create(e.podSpec("fits", map[string]string{"cpu": "2"}))
	e.waitBound("fits")
	e.create(e.podSpec("pages", map[string]string{"cpu": "100m", "memory": "64Mi", "hugepages-2Mi": "64Mi"}))
	e.waitReason("pages", "kubernetes.io/hugepages-2Mi")
	// Resized to 2 cpus (the kubelet's status says it allocated and
	// runs them): 2 + 2 of 4 are held, a pod of 1 waits.
	e.wait("other running", func() (bool, string) {
		p := e.get("other")
		return len(p.Status.ContainerStatuses) > 0, string(p.Status.Phase)
	})
	p := e.get("other")
	two := corev1.ResourceList{"cpu": k8sresource.MustParse("2")}
	p.Status.ContainerStatuses[0].AllocatedResources = two
	p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: two}
	if _, err := e.cs.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(e.podSpec("over", map[string]string{"cpu": "1"}))
	e.waitReason("over", "insufficient cpu")
	if p := e.get("over"); p.Spec.NodeName != "" {
		t.Fatalf("over bound to %s past the resized pod's request", p.Spec.NodeName)
	}
}
