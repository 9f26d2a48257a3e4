// Package discover finds what a node has to offer: CPU and memory (from
// /proc, capped by the cgroup limits the agent runs under), TPUs (from
// /dev/accel* and sysfs), NVIDIA GPUs (from NVML, in a binary built with
// the nvml tag; see NVML) and devices declared in a file.
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
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
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

// Host reads CPU and memory capacity from root (normally os.DirFS("/")).
type Host struct {
	Root fs.FS
	// NumCPU is the CPUs the OS reports (runtime.NumCPU()); the cgroup
	// limit, when lower, wins.
	NumCPU int
}

// Capacity returns cpu (milli) and memory (bytes): the smaller of what the
// machine has and what the agent's cgroup (v2 or v1) allows.
func (h Host) Capacity() (resource.List, error) {
	memTotal, err := meminfoTotal(h.Root)
	if err != nil {
		return nil, err
	}
	cpuMilli := int64(h.NumCPU) * 1000
	if q, ok := cgroupCPU(h.Root); ok && q < cpuMilli {
		cpuMilli = q
	}
	if m, ok := cgroupMemory(h.Root); ok && m < memTotal {
		memTotal = m
	}
	if cpuMilli <= 0 {
		return nil, fmt.Errorf("no CPUs found")
	}
	return resource.List{resource.CPU: cpuMilli, resource.Memory: memTotal}, nil
}

func meminfoTotal(root fs.FS) (int64, error) {
	f, err := root.Open("proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for lines := 0; sc.Scan() && lines < 1000; lines++ {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: unexpected MemTotal line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 || kb > math.MaxInt64>>10 {
			return 0, fmt.Errorf("/proc/meminfo: bad MemTotal %q", fields[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
}

// cgroupCPU reads the CPU quota in millicores: cgroup v2 cpu.max
// ("max 100000" or "200000 100000"), else v1 cfs_quota/period.
func cgroupCPU(root fs.FS) (int64, bool) {
	if b, err := fs.ReadFile(root, "sys/fs/cgroup/cpu.max"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			return quotaMilli(f[0], f[1])
		}
		return 0, false
	}
	q, err1 := fs.ReadFile(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	p, err2 := fs.ReadFile(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return quotaMilli(strings.TrimSpace(string(q)), strings.TrimSpace(string(p)))
}

func quotaMilli(quota, period string) (int64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 || q > math.MaxInt64/1000 {
		return 0, false // -1 (v1 "no limit") and garbage alike
	}
	return q * 1000 / p, true
}

// cgroupMemory reads the memory limit: v2 memory.max, else v1
// memory.limit_in_bytes (v1 reports "no limit" as a huge number, which
// loses against MemTotal anyway).
func cgroupMemory(root fs.FS) (int64, bool) {
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := fs.ReadFile(root, p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			return 0, false
		}
		return v, true
	}
	return 0, false
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
func Node(name string, host Host, sources []Source) (api.Node, []string, error) {
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
	n, notes, err := Node(name, Host{Root: root, NumCPU: runtime.NumCPU()}, sources)
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
