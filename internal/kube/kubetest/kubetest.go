// Package kubetest runs a real Kubernetes control plane on loopback for
// tests and benchmarks: etcd, kube-apiserver and (optionally) KWOK, which
// plays every kubelet, all built from Go modules by tools/build-k8s.
//
// Without the binaries a test skips, naming the command that builds them;
// under CI=true it fails instead.
package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hetsched/hetsched/internal/childproc"
)

// Versions of the pieces tools/build-k8s builds (its cache directory is
// named by them).
const (
	KubernetesVersion = "v1.36.3"
	EtcdVersion       = "v3.6.8"
	KWOKVersion       = "v0.8.0"
)

// BuildCommand is what builds the binaries.
const BuildCommand = "tools/build-k8s (from the repository root; about 5 minutes cold)"

// ToolsDir is where the binaries are: $HETSCHED_K8S_TOOLS, else
// tools/build-k8s's cache directory for this Go version.
func ToolsDir() string {
	if d := os.Getenv("HETSCHED_K8S_TOOLS"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "hetsched-tools",
		"k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion+"-kwok-"+KWOKVersion+"-"+runtime.Version())
}

// Require returns the tools directory, or skips t (fails it under
// CI=true) when a binary is missing.
func Require(t testing.TB) string {
	t.Helper()
	dir := ToolsDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			msg := fmt.Sprintf("needs %s in %s: build it with %s", b, dir, BuildCommand)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return dir
}

// WorkloadFeatureGates are the feature gates of Kubernetes' own gang API
// (scheduling.k8s.io/v1alpha2 Workload and PodGroup, alpha in 1.36): the
// API server runs with them (and the API version enabled), and a
// kube-scheduler started with them schedules those gangs itself.
const WorkloadFeatureGates = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true,WorkloadAwarePreemption=true,DRAWorkloadResourceClaims=true"

// Options tune a control plane.
type Options struct {
	// RBAC runs the API server with --authorization-mode=RBAC (default
	// AlwaysAllow), for tests of the manifests' roles.
	RBAC bool
}

// Cluster is a running control plane.
type Cluster struct {
	Dir        string
	URL        string // the API server's https URL
	Token      string // an admin token (group system:masters)
	Kubeconfig string // a kubeconfig file for Token
	CAFile     string
	procs      []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start runs etcd, kube-apiserver and KWOK in a temporary directory for
// the rest of t.
func Start(t testing.TB, opt Options) *Cluster {
	t.Helper()
	tools := Require(t)
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		t.Fatal(err)
	}
	c, err := start(tools, dir, opt)
	if err != nil {
		if c != nil {
			for _, p := range c.procs {
				t.Logf("%s log tail:\n%s", p.name, tail(p.log, 3000))
			}
			c.Stop()
		}
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("control plane logs kept in %s", dir)
		}
	})
	return c
}

// Shared is a test package's one control plane, started on first use (it
// takes seconds to start; tests keep apart by their own namespaces): a
// test that needs it calls Shared, the package's TestMain calls
// StopShared after m.Run. Without the tools it skips as Require does.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Get returns the control plane, started on first use.
func (s *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	s.once.Do(func() { s.c, s.err = StartMain(Options{}) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.c
}

// Stop stops the control plane if it started, and removes its files.
func (s *Shared) Stop() {
	if s.c != nil {
		s.c.Stop()
		os.RemoveAll(s.c.Dir)
	}
}

// StartMain is Start for a TestMain or a benchmark command: it returns an
// error instead of skipping, and the caller stops the cluster.
func StartMain(opt Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "kubetest")
	if err != nil {
		return nil, err
	}
	c, err := start(ToolsDir(), dir, opt)
	if err != nil {
		if c != nil {
			c.Stop()
		}
		return nil, err
	}
	return c, nil
}

func start(tools, dir string, opt Options) (*Cluster, error) {
	c := &Cluster{Dir: dir}
	ports, err := childproc.FreePorts(4)
	if err != nil {
		return c, err
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := c.run(filepath.Join(tools, "etcd"), "etcd",
		"--data-dir", filepath.Join(dir, "etcd"), "--name", "default",
		"--listen-client-urls", etcdClient, "--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer, "--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "default="+etcdPeer, "--unsafe-no-fsync",
		"--log-level", "warn"); err != nil {
		return c, err
	}
	if err := c.credentials(); err != nil {
		return c, err
	}
	authz := "AlwaysAllow"
	if opt.RBAC {
		authz = "Node,RBAC"
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	certDir := filepath.Join(dir, "certs")
	if err := c.run(filepath.Join(tools, "kube-apiserver"), "kube-apiserver",
		"--etcd-servers", etcdClient, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(ports[2]),
		"--cert-dir", certDir, "--tls-cert-file", filepath.Join(certDir, "serving.crt"), "--tls-private-key-file", filepath.Join(certDir, "serving.key"),
		"--service-account-key-file", filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc", "--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", authz, "--service-cluster-ip-range", "10.0.0.0/24",
		"--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
		"--max-requests-inflight", "4000", "--max-mutating-requests-inflight", "2000",
		"--enable-priority-and-fairness=false", "--profiling=false",
		"--feature-gates", WorkloadFeatureGates, "--runtime-config", "scheduling.k8s.io/v1alpha2=true", "-v", "1"); err != nil {
		return c, err
	}
	if err := c.waitReady(90 * time.Second); err != nil {
		return c, err
	}
	if err := c.run(filepath.Join(tools, "kwok"), "kwok",
		"--kubeconfig", c.Kubeconfig, "-c", filepath.Join(tools, "kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.1.0/24", "--node-ip=10.0.1.1", "--node-port", strconv.Itoa(ports[3]),
		"--server-address", "127.0.0.1:"+strconv.Itoa(ports[3])); err != nil {
		return c, err
	}
	return c, nil
}

// credentials writes the service-account key pair, the admin token, a
// serving certificate for 127.0.0.1 and a kubeconfig trusting it.
func (c *Cluster) credentials() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(c.Dir, "sa.key"), "PRIVATE KEY", der); err != nil {
		return err
	}
	if err := writePEM(filepath.Join(c.Dir, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	c.Token = hex.EncodeToString(tok)
	if err := os.WriteFile(filepath.Join(c.Dir, "tokens.csv"), []byte(c.Token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	certDir := filepath.Join(c.Dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	certPEM, keyPEM, err := selfSigned()
	if err != nil {
		return err
	}
	c.CAFile = filepath.Join(certDir, "serving.crt")
	if err := os.WriteFile(c.CAFile, certPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "serving.key"), keyPEM, 0o600); err != nil {
		return err
	}
	return nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// RESTConfig is a client configuration for the admin token, with qps and
// burst as given (client-go's defaults, 5 and 10, throttle any test).
func (c *Cluster) RESTConfig(qps float32, burst int) *rest.Config {
	return &rest.Config{
		Host: c.URL, BearerToken: c.Token, QPS: qps, Burst: burst,
		ContentConfig:   rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"},
		TLSClientConfig: rest.TLSClientConfig{CAFile: c.CAFile},
	}
}

// JSONConfig is RESTConfig speaking JSON, for custom resources (they have
// no protobuf encoding) and discovery.
func (c *Cluster) JSONConfig(qps float32, burst int) *rest.Config {
	rc := c.RESTConfig(qps, burst)
	rc.ContentType, rc.AcceptContentTypes = "", ""
	return rc
}

// Client is an admin clientset.
func (c *Cluster) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.RESTConfig(1000, 2000))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// waitReady waits for /readyz, then writes the kubeconfig.
func (c *Cluster) waitReady(limit time.Duration) error {
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequest(http.MethodGet, c.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		for _, p := range c.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited while the API server started", p.name)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server was not ready within %v (last: %v)", limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	return os.WriteFile(c.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, c.URL, c.CAFile, c.Token)), 0o600)
}

// run starts a process whose output goes to DIR/NAME.log.
func (c *Cluster) run(bin, name string, args ...string) error {
	log := filepath.Join(c.Dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	c.procs = append(c.procs, p)
	return nil
}

// Stop stops the processes, the last started first (the API server
// before etcd: stopped the other way round it keeps retrying etcd), each
// by its own pid: SIGTERM, then SIGKILL after 10 s.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		stop(c.procs[i].cmd, c.procs[i].done)
	}
	c.procs = nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// WaitFor polls cond every 50 ms until it is true, returns an error, or
// limit passes (then the last message cond gave is in the error).
func WaitFor(ctx context.Context, limit time.Duration, cond func() (bool, string, error)) error {
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok, msg, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		last = msg
		if time.Now().After(deadline) {
			return errors.New("timed out after " + limit.String() + ": " + last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// selfSigned makes a serving certificate for 127.0.0.1 and localhost,
// valid for a day, that is its own CA.
func selfSigned() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "kubetest-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// KubeScheduler is a running kube-scheduler (the one tools/build-k8s
// builds), the oracle of the differential tests.
type KubeScheduler struct {
	Profile string // the schedulerName its one profile places
	Log     string // its output
	cmd     *exec.Cmd
	done    chan struct{}
}

// WaitNodesReady waits up to limit until want nodes the label selector
// selects are Ready.
func WaitNodesReady(ctx context.Context, cs kubernetes.Interface, selector string, want int, limit time.Duration) error {
	return WaitFor(ctx, limit, func() (bool, string, error) {
		l, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		ready := 0
		for _, n := range l.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == want, fmt.Sprintf("%d of %d nodes Ready", ready, want), nil
	})
}

// KubeSchedulerConfig writes a kube-scheduler configuration for c into
// c.Dir as <name>.yaml and returns its path: one profile named profile
// (the default plugins), leader election off, client limits qps and burst.
func (c *Cluster) KubeSchedulerConfig(name, profile string, qps float32, burst int) (string, error) {
	path := filepath.Join(c.Dir, name+".yaml")
	return path, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: %g
  burst: %d
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
`, c.Kubeconfig, qps, burst, profile)), 0o600)
}

// StartKubeScheduler runs kube-scheduler against c for the rest of t: one
// profile named profile (the default plugins), leader election off, its
// server on 127.0.0.1 with a port of its choosing, its client limits
// raised to qps and burst (50 and 100 by default would throttle a test),
// args after its own (--feature-gates, say).
// Without the binary t skips (fails under CI=true), as Require does.
func StartKubeScheduler(t testing.TB, c *Cluster, profile string, qps float32, burst int, args ...string) *KubeScheduler {
	t.Helper()
	bin := filepath.Join(Require(t), "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("needs kube-scheduler in %s: build it with %s", filepath.Dir(bin), BuildCommand)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cfg, err := c.KubeSchedulerConfig("kube-scheduler-"+profile, profile, qps, burst)
	if err != nil {
		t.Fatal(err)
	}
	ks := &KubeScheduler{Profile: profile, Log: filepath.Join(c.Dir, "kube-scheduler-"+profile+".log"), done: make(chan struct{})}
	f, err := os.Create(ks.Log)
	if err != nil {
		t.Fatal(err)
	}
	ks.cmd = exec.Command(bin, append([]string{"--config", cfg, "--bind-address", "127.0.0.1", "--secure-port", "0", "-v", "1"}, args...)...)
	ks.cmd.Stdout, ks.cmd.Stderr = f, f
	ks.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ks.cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("kube-scheduler: %v", err)
	}
	go func() { ks.cmd.Wait(); f.Close(); close(ks.done) }()
	t.Cleanup(func() {
		ks.Stop()
		if t.Failed() {
			t.Logf("kube-scheduler log tail (%s):\n%s", ks.Log, tail(ks.Log, 3000))
		}
	})
	return ks
}

// Exited reports whether the process has ended.
func (ks *KubeScheduler) Exited() bool {
	select {
	case <-ks.done:
		return true
	default:
		return false
	}
}

// Stop stops it by its pid: SIGTERM, then SIGKILL after 10 s.
func (ks *KubeScheduler) Stop() { stop(ks.cmd, ks.done) }

// stop ends the process cmd runs (done closes when it was reaped):
// SIGTERM, then SIGKILL after 10 s.
func stop(cmd *exec.Cmd, done <-chan struct{}) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
