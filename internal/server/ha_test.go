package server

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// TestReplicationFlagsChecked: each contradictory or incomplete
// replication flag is refused before anything starts, naming the flag.
func TestReplicationFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		opt   Options
		field string
	}{
		{Options{Store: "bolt", DataDir: dir}, "store"},
		{Options{Store: StorePebble, HA: true, DataDir: dir}, "store"},
		{Options{Store: StoreEtcd, DataDir: dir}, "etcd-endpoints"},
		{Options{HA: true, EtcdEndpoints: []string{"http://127.0.0.1:2379"}, DataDir: dir}, "etcd-endpoints"},
		{Options{HA: true}, "data-dir"},
		{Options{HA: true, DataDir: dir, Peers: "s1=http://127.0.0.1:2380"}, "name"},
		{Options{DataDir: dir, Peers: "s1=http://127.0.0.1:2380"}, "peers"},
		{Options{DataDir: dir, EtcdEndpoints: []string{"http://127.0.0.1:2379"}}, "etcd-endpoints"},
		{Options{HA: true, DataDir: dir, ElectionTTL: time.Second}, "election-ttl"},
		{Options{HA: true, DataDir: dir, ElectionTTL: 2500 * time.Millisecond}, "election-ttl"},
		{Options{HA: true, DataDir: dir, Advertise: "ftp://x"}, "advertise"},
		{Options{HA: true, DataDir: dir, Listen: "0.0.0.0:7070", TokensFile: "", InsecurePlaintext: false}, "advertise"},
		{Options{DataDir: dir, RetainFinishedMax: -1}, "retain-finished-max"},
	} {
		if c.opt.Listen == "" {
			c.opt.Listen = "127.0.0.1:0"
		}
		c.opt.MemoryLimit = "off"
		err := Run(context.Background(), io.Discard, c.opt)
		if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != c.field {
			t.Errorf("Run(%+v): %v, want invalid_argument on %s", c.opt, err, c.field)
		}
	}
}
