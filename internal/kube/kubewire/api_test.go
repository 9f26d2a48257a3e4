package kubewire_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// One API server serves the package's tests against it; each keeps to a
// namespace of its own.
var (
	shared kubetest.Shared
	runs   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// env is one test's namespace on the shared API server.
type env struct {
	t   *testing.T
	c   *kubetest.Cluster
	cs  kubernetes.Interface
	ctx context.Context
	ns  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	name = fmt.Sprintf("%s-%d", strings.TrimRight(name[:min(len(name), 40)], "-"), runs.Add(1))
	e := &env{t: t, c: c, cs: c.Client(t), ctx: ctx, ns: name}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

// create makes a pod of one container requesting a CPU, on no node.
func (e *env) create(name string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{SchedulerName: "nobody", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("1")}}}}},
	}
	got, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// bound is the node pod name is bound to, and its annotation key.
func (e *env) bound(name, key string) (node, value string) {
	e.t.Helper()
	p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Spec.NodeName, p.Annotations[key]
}
