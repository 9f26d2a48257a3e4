// Package discover finds what a node has to offer: CPU and memory (from
// /proc, capped by the cgroup limits the agent runs under; package
// hostinfo reads them), TPUs (from /dev/accel* and sysfs), NVIDIA GPUs
// (from NVML, in a binary built with the nvml tag; see NVML) and devices
// declared in a file.
//
// Contracts:
//   - Every source reads through an fs.FS rooted at "/", so tests run the
//     real parsers over fixture trees; nothing here writes. NVML is the
//     exception: it reads through an nvml.Interface, which tests replace
//     with go-nvml's mocks.
//   - A source that finds nothing returns no devices and a reason (for the
//     one log line the agent prints), not an error; an error means the
//     host looked broken (unreadable /proc/meminfo, a malformed file).
//   - Declared devices are marked Simulated everywhere they are shown.
//   - A source that can watch its devices also implements Monitor. Sample
//     reports the devices of the source's last Devices call, keyed by
//     their ids; a device it reports unhealthy stays unhealthy for the
//     life of the process.
//   - The default build needs no cgo: without the nvml tag, NVML is a
//     stub that finds no GPUs and says how to build one that does.
package discover

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/hostinfo"
)

// Source is one way of finding devices.
type Source interface {
	// Name identifies the source in logs ("tpu", "nvml", "declared").
	Name() string
	// Devices returns what the source found; note says why it found none.
	Devices() (devs []api.Device, note string, err error)
}

// Monitor is implemented by sources that report live device state; the
// agent samples it for every heartbeat.
type Monitor interface {
	// Sample returns the state of each device the source found, keyed by
	// device id.
	Sample() (map[string]DeviceSample, error)
}

// DeviceSample is one device's live state.
type DeviceSample struct {
	Utilization float64 // 0..1
	MemoryUsed  int64   // bytes
	Healthy     bool
	Reason      string // why not healthy ("XID 79", "uncorrectable ECC errors")
}

// TPU finds Google TPUs: /dev/accel0..N, with each chip's PCI device id
// from sysfs (/sys/class/accel/accelN/device/device) naming its model.
type TPU struct{ Root fs.FS }

// tpuModels maps Google's PCI device ids to TPU generations (the ids gVisor's
// pkg/abi/tpu lists); other chips are model "tpu".
var tpuModels = map[string]string{
	"0x005e": "tpu-v4", "0x0056": "tpu-v4lite", "0x0063": "tpu-v5e", "0x0062": "tpu-v5p",
}

// maxChips bounds the /dev scan.
const maxChips = 256

func (TPU) Name() string { return "tpu" }

// Devices lists the chips; their ids are the accel index (what
// TPU_VISIBLE_CHIPS takes).
func (t TPU) Devices() ([]api.Device, string, error) {
	entries, err := fs.ReadDir(t.Root, "dev")
	if err != nil {
		return nil, "no /dev to read", nil
	}
	var idx []int
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), "accel")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= maxChips {
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return nil, "no /dev/accel* devices", nil
	}
	sort.Ints(idx)
	devs := make([]api.Device, 0, len(idx))
	for _, i := range idx {
		id := strconv.Itoa(i)
		// Chips of one host share one ICI domain.
		d := api.Device{Type: "google.com/tpu", ID: id, Model: "tpu", Topology: map[string]string{api.TopologyICI: "host"}}
		base := path.Join("sys/class/accel", "accel"+id, "device")
		if b, err := fs.ReadFile(t.Root, base+"/device"); err == nil {
			if m, ok := tpuModels[strings.ToLower(strings.TrimSpace(string(b)))]; ok {
				d.Model = m
			}
		}
		if b, err := fs.ReadFile(t.Root, base+"/numa_node"); err == nil {
			if n := strings.TrimSpace(string(b)); n != "" && n != "-1" {
				d.Topology[api.TopologyNUMA] = n
			}
		}
		devs = append(devs, d)
	}
	return devs, "", nil
}

// Declared reads devices from a --devices file (YAML or JSON:
// {"devices": [...]}) for machines without accelerators and for tests.
type Declared struct{ Path string }

func (Declared) Name() string { return "declared" }

// DeclaredFile is the --devices file format.
type DeclaredFile struct {
	Devices []api.Device `json:"devices"`
}

// Devices returns the declared devices, each marked simulated.
func (d Declared) Devices() ([]api.Device, string, error) {
	if d.Path == "" {
		return nil, "no --devices file", nil
	}
	b, err := os.ReadFile(d.Path)
	if err != nil {
		return nil, "", fmt.Errorf("--devices: %w", err)
	}
	var f DeclaredFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, "", fmt.Errorf("--devices %s: %w", d.Path, err)
	}
	if len(f.Devices) > api.MaxNodeDevices {
		return nil, "", fmt.Errorf("--devices %s: at most %d devices", d.Path, api.MaxNodeDevices)
	}
	for i := range f.Devices {
		f.Devices[i].Simulated = true
	}
	// Validate as part of a node, which checks types, ids and duplicates.
	probe := api.Node{Name: "probe", Devices: f.Devices}
	if err := probe.Validate(); err != nil {
		return nil, "", fmt.Errorf("--devices %s: %w", d.Path, err)
	}
	return f.Devices, "", nil
}

// Sample re-reads the file: a device now marked unhealthy: true turns
// unhealthy (and back), so tests and operators can flip a declared
// device's health while the agent runs. Utilization is 0 (nothing
// measures a declared device). A file that no longer reads keeps the
// last state: the error is returned and the agent logs it.
func (d Declared) Sample() (map[string]DeviceSample, error) {
	if d.Path == "" {
		return nil, nil
	}
	devs, _, err := d.Devices()
	if err != nil {
		return nil, err
	}
	out := make(map[string]DeviceSample, len(devs))
	for _, dv := range devs {
		s := DeviceSample{Healthy: !dv.Unhealthy}
		if dv.Unhealthy {
			s.Reason = "declared unhealthy in " + d.Path
		}
		out[dv.ID] = s
	}
	return out, nil
}

// Node assembles a node from the host's capacity and every source's
// devices; notes collects one line per source that found nothing.
func Node(name string, host hostinfo.Host, sources []Source) (api.Node, []string, error) {
	capacity, err := host.Capacity()
	if err != nil {
		return api.Node{}, nil, err
	}
	n := api.Node{Name: name, Capacity: capacity}
	var notes []string
	for _, s := range sources {
		devs, note, err := s.Devices()
		if err != nil {
			return api.Node{}, nil, fmt.Errorf("%s: %w", s.Name(), err)
		}
		if len(devs) == 0 && note != "" {
			notes = append(notes, s.Name()+": "+note)
		}
		n.Devices = append(n.Devices, devs...)
	}
	if err := n.Validate(); err != nil {
		return api.Node{}, notes, fmt.Errorf("the discovered node is invalid: %w", err)
	}
	return n, notes, nil
}

// Local discovers this machine as node name: CPU and memory from /proc
// (within the cgroup limits), NVIDIA GPUs (nvml builds), TPUs and, when
// devicesFile is set, declared devices. It returns the node, the sources
// that report live device state, and one note per source that found
// nothing.
func Local(name, devicesFile string) (api.Node, []Monitor, []string, error) {
	root := os.DirFS("/")
	sources := []Source{&NVML{}, TPU{Root: root}}
	if devicesFile != "" {
		sources = append(sources, Declared{Path: devicesFile})
	}
	n, notes, err := Node(name, hostinfo.Host{Root: root, NumCPU: runtime.NumCPU()}, sources)
	if err != nil {
		return api.Node{}, nil, notes, err
	}
	var monitors []Monitor
	for _, s := range sources {
		if m, ok := s.(Monitor); ok {
			monitors = append(monitors, m)
		}
	}
	return n, monitors, notes, nil
}
