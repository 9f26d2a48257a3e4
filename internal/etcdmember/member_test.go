package etcdmember

import (
	"context"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

func TestParsePeers(t *testing.T) {
	good, err := ParsePeers("s1=http://10.0.0.1:2380, s2=https://10.0.0.2:2380")
	if err != nil || len(good) != 2 || good["s2"].Host != "10.0.0.2:2380" {
		t.Fatalf("ParsePeers: %v %v", good, err)
	}
	for _, bad := range []string{"", "s1", "=http://h:1", "s1=", "s1=ftp://h:1", "s1=http://", "s1=http://a:1,s1=http://b:1", "s1=:::"} {
		if _, err := ParsePeers(bad); errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != "peers" {
			t.Errorf("ParsePeers(%q): %v, want invalid_argument on peers", bad, err)
		}
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{Name: "s1"}, "data-dir"},
		{Config{Name: "s9", Dir: t.TempDir(), Peers: "s1=http://127.0.0.1:1"}, "name"},
		{Config{Name: "s1", Dir: t.TempDir(), Peers: "s1"}, "peers"},
		{Config{Name: "s1", Dir: t.TempDir(), ClientURLs: []string{"::"}}, "etcd-listen-client"},
	} {
		if _, err := Start(context.Background(), c.cfg); errs.FieldOf(err) != c.field {
			t.Errorf("Start(%+v): %v, want an error on %s", c.cfg, err, c.field)
		}
	}
}
