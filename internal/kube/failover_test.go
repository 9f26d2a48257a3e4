package kube_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/childproc"
)

// Two `hetsched kube` processes share a coordination.k8s.io Lease: one
// leads and binds; killed with SIGKILL, the other takes over within the
// lease, rebuilds from the cluster, and binds what came meanwhile; no pod
// is bound twice.
func TestLeaderFailoverBetweenTwoReplicas(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "8"}, nil)
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	replica := func(id string) *childproc.Child {
		c, err := childproc.Start(bin, time.Minute, "kube", "--kubeconfig", e.c.Kubeconfig, "--scheduler-name", e.sched,
			"--listen", "127.0.0.1:0", "--lease-namespace", e.ns, "--identity", id,
			"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		return c
	}
	leading := func(c *childproc.Child) bool {
		resp, err := http.Get(c.URL + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "\nhetsched_leader 1\n")
	}
	r1 := replica("r1")
	e.wait("r1 leading", func() (bool, string) { return leading(r1), "not yet" })
	r2 := replica("r2")
	for i := range 3 {
		e.create(e.podSpec(fmt.Sprintf("before%d", i), map[string]string{"nvidia.com/gpu": "1"}))
	}
	before := map[string]string{}
	for i := range 3 {
		p := e.waitBound(fmt.Sprintf("before%d", i))
		before[p.Name] = p.Annotations["hetsched.io/devices"]
	}
	if leading(r2) {
		t.Fatal("r2 leads too")
	}
	r1.Kill()
	for i := range 3 {
		e.create(e.podSpec(fmt.Sprintf("after%d", i), map[string]string{"nvidia.com/gpu": "1"}))
	}
	seen := map[string]string{}
	for _, d := range before {
		seen[d] = "before"
	}
	for i := range 3 {
		p := e.waitBound(fmt.Sprintf("after%d", i))
		d := p.Annotations["hetsched.io/devices"]
		if who, dup := seen[d]; dup {
			t.Errorf("%s got %s, which a pod %s the failover holds", p.Name, d, who)
		}
		seen[d] = "after"
	}
	if !leading(r2) {
		t.Error("r2 binds but does not report leading")
	}
	lease, err := e.cs.CoordinationV1().Leases(e.ns).Get(e.ctx, "hetsched", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "r2" {
		t.Errorf("lease held by %v, want r2", h)
	}
	for name, d := range before {
		if p := e.get(name); p.Annotations["hetsched.io/devices"] != d {
			t.Errorf("%s's devices changed from %q to %q", name, d, p.Annotations["hetsched.io/devices"])
		}
	}
}
