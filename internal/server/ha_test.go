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
		// HA peers: cleartext off loopback is refused unless asked for;
		// TLS needs the member's certificate, key and CA; the member
		// certificate is --ha's alone.
		{Options{HA: true, DataDir: dir, Name: "s1", Peers: "s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380"}, "peers"},
		{Options{HA: true, DataDir: dir, Name: "s1", Peers: "s1=https://10.0.0.1:2380,s2=https://10.0.0.2:2380"}, "peer-cert"},
		{Options{HA: true, DataDir: dir, Name: "s1", Peers: "s1=https://10.0.0.1:2380", PeerCert: "m.pem", PeerKey: "m-key.pem", PeerCA: "nope.pem"}, "peer-cert"},
		{Options{HA: true, DataDir: dir, EtcdListenClient: []string{"http://10.0.0.1:2379"}}, "etcd-listen-client"},
		{Options{Store: StoreEtcd, EtcdEndpoints: []string{"http://127.0.0.1:2379"}, DataDir: dir, PeerCert: "m.pem"}, "peer-cert"},
		{Options{DataDir: dir, PeerKey: "m-key.pem"}, "peer-key"},
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
