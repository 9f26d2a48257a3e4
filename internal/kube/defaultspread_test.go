package kube_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/kube"
)

// The cluster's default topology spread (kube-scheduler's
// PodTopologySpread, defaultingType System): the pods of a ReplicaSet,
// and those a Service selects, spread over the nodes by hostname
// although they ask for no spread; with it off (--default-spread=false)
// they are placed as any pods, which on these nodes puts more than two of
// the ReplicaSet's on one node.
func TestDefaultSpreadOfControllerAndServicePods(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("default-spread=%v", on), func(t *testing.T) {
			e := newEnv(t)
			e.node("a", map[string]string{"cpu": "16"}, nil)
			e.node("b", map[string]string{"cpu": "4"}, nil)
			e.node("c", map[string]string{"cpu": "4"}, nil)
			zero := int32(0)
			rs, err := e.cs.AppsV1().ReplicaSets(e.ns).Create(e.ctx, &appsv1.ReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: e.ns},
				Spec: appsv1.ReplicaSetSpec{Replicas: &zero,
					Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"rs"}}}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs"}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.cs.CoreV1().Services(e.ns).Create(e.ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
				Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Started once they exist: its informers list them before the
			// pods come.
			e.startWith(func(c *kube.Config) { c.NoDefaultSpread = !on })
			yes := true
			var rsPods, webPods []string
			for i := range 6 {
				p := e.podSpec(fmt.Sprintf("rs-%d", i), map[string]string{"cpu": "500m"})
				p.Labels["app"] = "rs"
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &yes}}
				e.create(p)
				rsPods = append(rsPods, p.Name)
			}
			for i := range 3 {
				p := e.podSpec(fmt.Sprintf("web-%d", i), map[string]string{"cpu": "500m"})
				p.Labels["app"] = "web"
				e.create(p)
				webPods = append(webPods, p.Name)
			}
			perNode := func(names []string) map[string]int {
				m := map[string]int{}
				for _, n := range names {
					m[e.waitBound(n).Spec.NodeName]++
				}
				return m
			}
			rsOn, webOn := perNode(rsPods), perNode(webPods)
			spread := len(rsOn) == 3 && len(webOn) == 3
			for _, n := range []string{"a", "b", "c"} {
				spread = spread && rsOn[e.prefix+n] == 2 && webOn[e.prefix+n] == 1
			}
			if spread != on {
				t.Errorf("with the default spread %v: the ReplicaSet's pods per node %v, the Service's %v", on, rsOn, webOn)
			}
		})
	}
}
