package deploytest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

var leases = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// lockedBuffer is the child's output, written by exec's copying goroutine
// and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runs starts the real `hetsched kube` with the rendering's Deployment
// args, as the rendering's ServiceAccount (a kubeconfig that impersonates
// it, where the pod would use its token), with --listen moved to a free
// loopback port: it serves /healthz over HTTPS, leads through the Lease
// its Role allows, and accepts the rendering's Queues (their status). A
// Deployment whose args, Role and Lease disagree would crash or never
// lead. Only for a rendering with HTTPS metrics, leader election and no
// TLS Secret (the Secret's files are not here).
func (e *expect) runs(c *kubetest.Cluster, dir string) {
	t := e.a.t
	t.Helper()
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	var args []string
	for _, a := range deploymentArgs(t, dir)[1:] {
		if strings.HasPrefix(a, "--listen=") {
			a = "--listen=" + listen
		}
		args = append(args, a)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	sa := fmt.Sprintf("system:serviceaccount:%s:%s", e.r.namespace, e.fullname)
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: sa
  user: {token: %q, as: %q}
contexts:
- name: test
  context: {cluster: test, user: sa}
current-context: test
`, c.URL, c.CAFile, c.Token, sa)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.a.ctx)
	var out lockedBuffer
	cmd := exec.CommandContext(ctx, hetschedBinary(t), append(append([]string{"kube"}, args...), "--kubeconfig", kc)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("hetsched kube %s:\n%s", strings.Join(args, " "), out.String())
		}
	}()
	leaseNS, lease := str(e.vals, "leaderElection.leaseNamespace"), str(e.vals, "leaderElection.leaseName")
	if leaseNS == "" {
		leaseNS = e.r.namespace
	}
	if lease == "" {
		lease = e.fullname
	}
	qs, _ := e.val("queues").([]any)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// The self-signed certificate made at start; only /healthz is read.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// It leads at once (the Lease is free) and reads the Queues within a
	// second; 30 s is for a loaded machine.
	err = kubetest.WaitFor(ctx, 30*time.Second, func() (bool, string, error) {
		select {
		case err := <-exited:
			exited <- err // for the deferred receive
			return false, "", fmt.Errorf("hetsched kube exited: %v", err)
		default:
		}
		resp, err := hc.Get("https://" + listen + "/healthz")
		if err != nil {
			return false, "/healthz: " + err.Error(), nil
		}
		resp.Body.Close()
		l := e.a.get(leases, leaseNS, lease)
		if resp.StatusCode != http.StatusOK || l == nil {
			return false, fmt.Sprintf("/healthz %d, lease %s/%s: %v", resp.StatusCode, leaseNS, lease, l != nil), nil
		}
		for _, q := range qs {
			name := fmt.Sprint(q.(map[string]any)["name"])
			u := e.a.get(queueObjects, "", name)
			if u == nil || !accepted(u) {
				return false, fmt.Sprintf("Queue %s not accepted yet", name), nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatalf("%s: the Deployment's args, run: %v", e.r.name, err)
	}
}

// accepted reports whether an object's Accepted condition is True.
func accepted(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Accepted" && m["status"] == "True" {
			return true
		}
	}
	return false
}
