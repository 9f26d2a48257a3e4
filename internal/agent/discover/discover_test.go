package discover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/hostinfo"
	"github.com/hetsched/hetsched/internal/resource"
)

const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"

func TestTPUsFromDevAndSysfs(t *testing.T) {
	fsys := fstest.MapFS{
		"dev/accel0": {}, "dev/accel1": {}, "dev/accel10": {}, "dev/accelX": {}, "dev/null": {},
		"sys/class/accel/accel0/device/device":    {Data: []byte("0x0063\n")},
		"sys/class/accel/accel0/device/numa_node": {Data: []byte("1\n")},
		"sys/class/accel/accel1/device/device":    {Data: []byte("0x005E\n")},
		"sys/class/accel/accel1/device/numa_node": {Data: []byte("-1\n")},
	}
	got, note, err := TPU{Root: fsys}.Devices()
	if err != nil || note != "" {
		t.Fatal(err, note)
	}
	want := []api.Device{
		{Type: "google.com/tpu", ID: "0", Model: "tpu-v5e", Topology: map[string]string{"numa": "1", "ici": "host"}},
		{Type: "google.com/tpu", ID: "1", Model: "tpu-v4", Topology: map[string]string{"ici": "host"}},
		{Type: "google.com/tpu", ID: "10", Model: "tpu", Topology: map[string]string{"ici": "host"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if devs, note, err := (TPU{Root: fstest.MapFS{"dev/null": {}}}).Devices(); len(devs) != 0 || note == "" || err != nil {
		t.Fatalf("no TPUs: %v %q %v", devs, note, err)
	}
}

func TestDeclaredDevicesAreSimulatedAndValidated(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: H100-80GB, memory: 80Gi}\n  - {type: nvidia.com/gpu, id: \"1\", model: H100-80GB, memory: 80Gi}\n"), 0o600)
	devs, _, err := Declared{Path: good}.Devices()
	if err != nil || len(devs) != 2 || !devs[0].Simulated || !devs[1].Simulated || devs[0].Memory != 80<<30 {
		t.Fatalf("%+v %v", devs, err)
	}
	for name, body := range map[string]string{
		"dup.yaml":     "devices:\n  - {type: nvidia.com/gpu, id: \"0\"}\n  - {type: nvidia.com/gpu, id: \"0\"}\n",
		"unknown.yaml": "devices:\n  - {type: nvidia.com/gpu, id: \"0\", colour: red}\n",
		"badtype.yaml": "devices:\n  - {type: gpu, id: \"0\"}\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		if _, _, err := (Declared{Path: p}).Devices(); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := (Declared{Path: filepath.Join(dir, "missing.yaml")}).Devices(); err == nil {
		t.Error("missing file accepted")
	}
}

func TestNodeAssemblesSourcesAndNotes(t *testing.T) {
	fsys := fstest.MapFS{"proc/meminfo": {Data: []byte(meminfo)}, "dev/accel0": {}}
	n, notes, err := Node("host-1", hostinfo.Host{Root: fsys, NumCPU: 4}, []Source{TPU{Root: fsys}, Declared{}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "host-1" || len(n.Devices) != 1 || n.Capacity[resource.CPU] != 4000 {
		t.Fatalf("%+v", n)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "declared: ") {
		t.Fatalf("notes %q", notes)
	}
}

func TestDeclaredSampleFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n  - {type: nvidia.com/gpu, id: \"1\", model: L4}\n")
	var m Monitor = Declared{Path: path}
	s, err := m.Sample()
	if err != nil || len(s) != 2 || !s["0"].Healthy || !s["1"].Healthy {
		t.Fatalf("sample %+v %v", s, err)
	}
	write("devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n  - {type: nvidia.com/gpu, id: \"1\", model: L4, unhealthy: true}\n")
	s, err = m.Sample()
	if err != nil || !s["0"].Healthy || s["1"].Healthy || s["1"].Reason == "" {
		t.Fatalf("after the flip: %+v %v", s, err)
	}
	write("devices: [")
	if _, err := m.Sample(); err == nil {
		t.Fatal("a broken file sampled without error")
	}
}
