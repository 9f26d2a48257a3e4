// Package membertest starts a real embedded etcd member for tests.
package membertest

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hetsched/hetsched/internal/etcdmember"
)

// Start runs a single-member etcd in a temporary directory for the rest of
// t and returns a client of it (closed before the member stops).
func Start(t testing.TB) *clientv3.Client { return StartWithQuota(t, 0) }

// StartWithQuota is Start with the member's database limited to quota
// bytes (0: etcdmember.DefaultQuota).
func StartWithQuota(t testing.TB, quota int64) *clientv3.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "etcd") // short: the unix sockets live here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := etcdmember.Start(ctx, etcdmember.Config{Name: "test", Dir: dir, QuotaBytes: quota})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := Client(m.Endpoint())
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cli.Close()
		m.Close()
	})
	return cli
}

// Client is a client of endpoints with the timeouts hetsched uses.
func Client(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 5 * time.Second})
}
