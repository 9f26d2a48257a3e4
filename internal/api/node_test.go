package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// goodNode returns a valid node with two healthy GPUs and one unhealthy one.
func goodNode() *Node {
	return &Node{
		Name:   "gpu-node-1",
		Labels: map[string]string{"zone": "eu-1", "example.com/rack": "r12", "empty": ""},
		Taints: []string{"gpu=true:NoSchedule", "dedicated:NoExecute", "spot"},
		Capacity: resource.List{
			resource.CPU:    64000,
			resource.Memory: 512 << 30,
			gpu:             2000,
		},
		Devices: []Device{
			{Type: "nvidia.com/gpu", ID: "0", Model: "H100", Memory: 80 << 30, Topology: map[string]string{TopologyNUMA: "0", TopologyNVLink: "a"}},
			{Type: "nvidia.com/gpu", ID: "1", Model: "H100", Memory: 80 << 30, Topology: map[string]string{TopologyNUMA: "1", TopologyNVLink: "a"}, Classes: []string{"h100", "fast"}},
			{Type: "nvidia.com/gpu", ID: "2", Model: "H100", Unhealthy: true},
			{Type: "example.com/fpga", ID: "0", Simulated: true},
		},
		State: NodeReady,
	}
}

func TestNodeValidate(t *testing.T) {
	devices := func(n int) []Device {
		d := make([]Device, n)
		for i := range d {
			d[i] = Device{Type: "nvidia.com/gpu", ID: fmt.Sprintf("g%d", i)}
		}
		return d
	}
	for _, c := range []struct {
		name  string
		edit  func(*Node)
		field string // "" means valid
	}{
		{"good", func(*Node) {}, ""},
		{"minimal", func(n *Node) { *n = Node{Name: "n"} }, ""},
		{"capacity without device types", func(n *Node) { delete(n.Capacity, gpu) }, ""},
		{"empty name", func(n *Node) { n.Name = "" }, "name"},
		{"bad name", func(n *Node) { n.Name = "node 1" }, "name"},
		{"bad label key", func(n *Node) { n.Labels = map[string]string{"bad key": "v"} }, "labels.bad key"},
		{"bad label prefix", func(n *Node) { n.Labels = map[string]string{"/k": "v"} }, "labels./k"},
		{"long bad label key", func(n *Node) { n.Labels = map[string]string{strings.Repeat("k", 100): "v"} }, "labels." + strings.Repeat("k", 80) + "…"},
		{"bad label value", func(n *Node) { n.Labels = map[string]string{"zone": "eu 1"} }, "labels.zone"},
		{"label value too long", func(n *Node) { n.Labels = map[string]string{"zone": strings.Repeat("v", 64)} }, "labels.zone"},
		{"too many labels", func(n *Node) {
			n.Labels = map[string]string{}
			for i := range MaxNodeLabels + 1 {
				n.Labels[fmt.Sprintf("k%d", i)] = "v"
			}
		}, "labels"},
		{"bad taint effect", func(n *Node) { n.Taints = []string{"k=v:Sometimes"} }, "taints[0]"},
		{"bad taint key", func(n *Node) { n.Taints = []string{"ok", "=v"} }, "taints[1]"},
		{"too many taints", func(n *Node) { n.Taints = make([]string, MaxNodeTaints+1) }, "taints"},
		{"state empty", func(n *Node) { n.State = "" }, ""},
		{"state notready", func(n *Node) { n.State = NodeNotReady }, ""},
		{"state cordoned", func(n *Node) { n.State = NodeCordoned }, ""},
		{"state draining", func(n *Node) { n.State = NodeDraining }, ""},
		{"bad state", func(n *Node) { n.State = "running" }, "state"},
		{"state wrong case", func(n *Node) { n.State = "Ready" }, "state"},
		{"device type without domain", func(n *Node) { n.Devices[0].Type = "gpu" }, "devices[0].type"},
		{"device type cpu", func(n *Node) { n.Devices[0].Type = "cpu" }, "devices[0].type"},
		{"device type bad domain", func(n *Node) { n.Devices[1].Type = "Nvidia.com/gpu" }, "devices[1].type"},
		{"device bad id", func(n *Node) { n.Devices[0].ID = "" }, "devices[0].id"},
		{"duplicate device id", func(n *Node) { n.Devices[1].ID = "0" }, "devices[1].id"},
		{"device class empty", func(n *Node) { n.Devices[1].Classes = []string{"ok", ""} }, "devices[1].classes[1]"},
		{"device class bad", func(n *Node) { n.Devices[1].Classes = []string{"a b"} }, "devices[1].classes[0]"},
		{"same id other type", func(n *Node) { n.Devices[3].ID = "1" }, ""},
		{"device bad model", func(n *Node) { n.Devices[0].Model = "H100 SXM" }, "devices[0].model"},
		{"device negative memory", func(n *Node) { n.Devices[1].Memory = -1 }, "devices[1].memory"},
		{"device bad topology key", func(n *Node) { n.Devices[0].Topology["bad key"] = "x" }, "devices[0].topology.bad key"},
		{"device bad topology value", func(n *Node) { n.Devices[0].Topology[TopologyNUMA] = "x y" }, "devices[0].topology.numa"},
		{"capacity counts healthy devices only", func(n *Node) { n.Capacity[gpu] = 3000 }, "capacity.nvidia.com/gpu"},
		{"capacity below devices", func(n *Node) { n.Capacity[gpu] = 1000 }, "capacity.nvidia.com/gpu"},
		{"capacity fractional device", func(n *Node) { n.Capacity[gpu] = 2500 }, "capacity.nvidia.com/gpu"},
		{"capacity for simulated device", func(n *Node) { n.Capacity["example.com/fpga"] = 1000 }, ""},
		{"capacity for simulated device mismatch", func(n *Node) { n.Capacity["example.com/fpga"] = 2000 }, "capacity.example.com/fpga"},
		{"capacity once unhealthy device heals", func(n *Node) { n.Devices[2].Unhealthy = false; n.Capacity[gpu] = 3000 }, ""},
		{"capacity with all devices unhealthy", func(n *Node) {
			for i := range n.Devices {
				n.Devices[i].Unhealthy = true
			}
			n.Capacity[gpu] = 2000
		}, "capacity.nvidia.com/gpu"},
		{"zero capacity with all devices unhealthy", func(n *Node) {
			for i := range n.Devices {
				n.Devices[i].Unhealthy = true
			}
			n.Capacity[gpu] = 0
		}, ""},
		{"pooled capacity without devices", func(n *Node) { n.Capacity["example.com/licenses"] = 5500 }, ""},
		{"negative capacity", func(n *Node) { n.Capacity[resource.CPU] = -1 }, "capacity.cpu"},
		{"max devices", func(n *Node) { n.Devices = devices(MaxNodeDevices); n.Capacity = nil }, ""},
		{"too many devices", func(n *Node) { n.Devices = devices(MaxNodeDevices + 1); n.Capacity = nil }, "devices"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := goodNode()
			c.edit(n)
			err := n.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantInvalid(t, err, c.field)
		})
	}
}

func TestParseTaint(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Taint
		str  string // String(); "" means in
	}{
		{"k=v:NoSchedule", Taint{"k", "v", NoSchedule}, ""},
		{"k=v:PreferNoSchedule", Taint{"k", "v", PreferNoSchedule}, ""},
		{"k=v:NoExecute", Taint{"k", "v", NoExecute}, ""},
		{"k:NoExecute", Taint{"k", "", NoExecute}, ""},
		{"k=v", Taint{"k", "v", NoSchedule}, "k=v:NoSchedule"},
		{"k", Taint{"k", "", NoSchedule}, "k:NoSchedule"},
		{"k=", Taint{"k", "", NoSchedule}, "k:NoSchedule"},
		{"example.com/gpu=a100:NoSchedule", Taint{"example.com/gpu", "a100", NoSchedule}, ""},
	} {
		got, err := ParseTaint(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseTaint(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		str := c.str
		if str == "" {
			str = c.in
		}
		if s := got.String(); s != str {
			t.Errorf("ParseTaint(%q).String() = %q, want %q", c.in, s, str)
		}
		if back, err := ParseTaint(got.String()); err != nil || back != got {
			t.Errorf("ParseTaint(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
	for _, in := range []string{
		"", "=v", "k=v:", "k=v:Bogus", "k=v:noschedule", "k=v:NoSchedule:x", "bad key=v",
		"k=bad value", "k=v=w", "*", "-k", "k=" + strings.Repeat("v", 64), "UPPER.com/k",
	} {
		if got, err := ParseTaint(in); err == nil {
			t.Errorf("ParseTaint(%q) = %+v, want an error", in, got)
		}
	}
}

func TestParseToleration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Toleration
	}{
		{"*", Toleration{All: true}},
		{"*:NoSchedule", Toleration{All: true, Effect: NoSchedule}},
		{"*:NoExecute", Toleration{All: true, Effect: NoExecute}},
		{"k=v", Toleration{Key: "k", Value: "v"}},
		{"k=", Toleration{Key: "k"}},
		{"k", Toleration{Key: "k", Exists: true}},
		{"k:NoExecute", Toleration{Key: "k", Effect: NoExecute, Exists: true}},
		{"k=v:NoSchedule", Toleration{Key: "k", Value: "v", Effect: NoSchedule}},
		{"k=v:PreferNoSchedule", Toleration{Key: "k", Value: "v", Effect: PreferNoSchedule}},
		{"example.com/k=v", Toleration{Key: "example.com/k", Value: "v"}},
	} {
		got, err := ParseToleration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseToleration(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", "k:", "k:Bogus", "k=v:", "*:", "*:Bogus", "*=v", "**", "bad key", "k=bad value", "=v", "k=v:NoSchedule:x",
	} {
		if got, err := ParseToleration(in); err == nil {
			t.Errorf("ParseToleration(%q) = %+v, want an error", in, got)
		}
	}
}

func TestTolerates(t *testing.T) {
	for _, c := range []struct {
		tol, taint string
		want       bool
	}{
		{"k=v", "k=v:NoSchedule", true},
		{"k=v", "k=v:NoExecute", true},
		{"k=v", "k=w:NoSchedule", false},
		{"k=v", "k:NoSchedule", false},
		{"k=", "k:NoSchedule", true},
		{"k", "k=x:NoSchedule", true},
		{"k", "k:PreferNoSchedule", true},
		{"k:NoSchedule", "k=x:NoSchedule", true},
		{"k:NoSchedule", "k=x:NoExecute", false},
		{"k=v:NoSchedule", "k=v:NoSchedule", true},
		{"k=v:NoExecute", "k=v:NoSchedule", false},
		{"k=v:NoSchedule", "k=v:PreferNoSchedule", false},
		{"*", "k=v:NoSchedule", true},
		{"*", "other:NoExecute", true},
		{"*", "x=y:PreferNoSchedule", true},
		{"*:NoSchedule", "k=v:NoSchedule", true},
		{"*:NoSchedule", "k=v:NoExecute", false},
		{"*:NoExecute", "k:NoExecute", true},
		{"*:NoExecute", "k:NoSchedule", false},
		{"*:PreferNoSchedule", "k:NoSchedule", false},
		{"j=v", "k=v:NoSchedule", false},
		{"j", "k=v:NoSchedule", false},
		{"example.com/k", "k=v:NoSchedule", false},
	} {
		tol, err := ParseToleration(c.tol)
		if err != nil {
			t.Fatalf("ParseToleration(%q): %v", c.tol, err)
		}
		taint, err := ParseTaint(c.taint)
		if err != nil {
			t.Fatalf("ParseTaint(%q): %v", c.taint, err)
		}
		if got := tol.Tolerates(taint); got != c.want {
			t.Errorf("%q tolerates %q = %v, want %v", c.tol, c.taint, got, c.want)
		}
	}
}

func TestNodeJSONErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{`{"name":"n","capacity":{"cpu":"x"}}`, "capacity.cpu"},
		{`{"name":"n","devices":[{"type":"nvidia.com/gpu","id":"0"},{"type":"nvidia.com/gpu","id":"1","memory":"lots"}]}`, "devices[1]"},
		{`{"name":"n","devices":[{"type":"nvidia.com/gpu","id":"0","colour":"red"}]}`, "devices[0].colour"},
		{`{"name":"n","colour":"red"}`, "colour"},
		{`{"name":"n","labels":5}`, "labels"},
		{`{"name":"n"} x`, ""},
	} {
		var n Node
		err := json.Unmarshal([]byte(c.in), &n)
		if err == nil {
			t.Errorf("%s: no error", c.in)
			continue
		}
		if f := errs.FieldOf(err); !strings.HasPrefix(f, c.field) {
			t.Errorf("%s: field %q, want %q (%v)", c.in, f, c.field, err)
		}
	}
	var n Node
	if err := json.Unmarshal([]byte(`{"name":"n","capacity":{"cpu":"2","memory":"1Gi"},"devices":[{"type":"nvidia.com/gpu","id":"0","memory":"80Gi","simulated":true}]}`), &n); err != nil {
		t.Fatal(err)
	}
	if n.Capacity["cpu"] != 2000 || n.Capacity["memory"] != 1<<30 || len(n.Devices) != 1 || n.Devices[0].Memory != 80<<30 || !n.Devices[0].Simulated {
		t.Fatalf("decoded %+v", n)
	}
}
