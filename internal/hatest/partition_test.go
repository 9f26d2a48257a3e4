package hatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netTopology is three network namespaces, each with one veth into a
// bridge in the test's namespace: 10.N.0.1 is the bridge (the test), and
// 10.N.0.2-4 are the servers. Taking a server's veth down cuts it off
// from the others and from the test: a partition.
type netTopology struct {
	t      *testing.T
	id     string
	net    int
	bridge string
	ns     []string
	veths  []string
}

// run runs a command, failing the test with its output.
func (n *netTopology) run(args ...string) {
	n.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		n.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netnsUnavailable says why network namespaces cannot be made here ("" if
// they can).
func netnsUnavailable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command (apt-get install -y iproute2)"
	}
	name := fmt.Sprintf("hsprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add: %v: %s", err, out)
	}
	_ = exec.Command("ip", "netns", "del", name).Run()
	return ""
}

func newTopology(t *testing.T, servers int) *netTopology {
	id := fmt.Sprintf("%x", rand.Uint32()&0xffff)
	n := &netTopology{t: t, id: id, net: 100 + rand.IntN(100), bridge: "hsbr" + id}
	t.Cleanup(n.remove)
	n.run("ip", "link", "add", n.bridge, "type", "bridge")
	n.run("ip", "addr", "add", fmt.Sprintf("10.%d.0.1/24", n.net), "dev", n.bridge)
	n.run("ip", "link", "set", n.bridge, "up")
	for i := range servers {
		ns, veth := fmt.Sprintf("hs%s-%d", id, i), fmt.Sprintf("hsv%s%d", id, i)
		n.ns, n.veths = append(n.ns, ns), append(n.veths, veth)
		n.run("ip", "netns", "add", ns)
		n.run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		n.run("ip", "link", "set", veth, "master", n.bridge, "up")
		n.run("ip", "netns", "exec", ns, "ip", "addr", "add", n.addr(i)+"/24", "dev", "eth0")
		n.run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
		n.run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	}
	return n
}

func (n *netTopology) addr(i int) string { return fmt.Sprintf("10.%d.0.%d", n.net, i+2) }

// cut takes server i's link down (true) or up again (false).
func (n *netTopology) cut(i int, down bool) {
	state := "up"
	if down {
		state = "down"
	}
	n.run("ip", "link", "set", n.veths[i], state)
}

func (n *netTopology) remove() {
	for _, ns := range n.ns {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	for _, v := range n.veths {
		_ = exec.Command("ip", "link", "del", v).Run()
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
}

// TestPartitionedLeader cuts the leader off the network (three servers in
// three network namespaces) while clients write; the majority elects a
// new leader and goes on; when the link returns, the old leader has
// stepped down and every write any server acknowledged is there. Where
// network namespaces cannot be made, the leader is frozen instead
// (SIGSTOP), which the issue allows.
func TestPartitionedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three servers")
	}
	if why := netnsUnavailable(); why != "" {
		t.Logf("no network namespaces (%s): freezing the leader instead", why)
		TestFrozenLeaderIsFenced(t)
		return
	}
	topo := newTopology(t, 3)
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	const token = "partition-test-admin-token-0123456789"
	if err := os.WriteFile(tokens, []byte("tokens:\n- {token: "+token+", role: admin}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bin: bin(t)}
	var peers []string
	root := t.TempDir()
	for i := range 3 {
		name := fmt.Sprintf("s%d", i+1)
		c.names = append(c.names, name)
		c.urls = append(c.urls, "http://"+topo.addr(i)+":7070")
		c.dirs = append(c.dirs, filepath.Join(root, name))
		peers = append(peers, fmt.Sprintf("%s=http://%s:2380", name, topo.addr(i)))
	}
	c.peers = strings.Join(peers, ",")
	c.token = token
	c.wrap = func(i int, args []string) []string {
		return append([]string{"ip", "netns", "exec", topo.ns[i]}, args...)
	}
	c.extra = []string{"--tokens", tokens, "--insecure-plaintext"}
	c.startAll()
	l := c.leader(time.Minute)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := startWriters(ctx, c, 3)
	time.Sleep(time.Second)
	topo.cut(l, true)
	c.setFrozen(l, true) // unreachable: not asked
	cutAt := time.Now()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	id, at, err := probe(pctx, c.client(), "after-cut-")
	cancel()
	if err != nil {
		t.Fatalf("no write acknowledged after the leader was cut off: %v\n%s", err, c.logs())
	}
	w.set(id, "pending")
	t.Logf("%s cut off; a write acknowledged %s later", c.names[l], at.Sub(cutAt).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // the old leader's commits fail meanwhile; it steps down
	topo.cut(l, false)
	c.setFrozen(l, false)
	c.waitReady(l, time.Minute)
	// Its log says so (read as the pipe delivers it: the new term's
	// readiness can come first). It gives its lease up once etcd has not
	// renewed it for three TTLs; it answered nothing past one.
	p := c.proc(l)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.Stderr(), "leadership term ended") {
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off leader did not step down:\n%s", tail(p.Stderr(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	w.wg.Wait()
	if got := c.leader(30 * time.Second); got == l {
		t.Logf("note: %s leads again after the partition healed (a new term)", c.names[l])
	}
	w.check(t, listAll(t, c.client()))
	t.Logf("%d writes acknowledged in all", w.count())
}
