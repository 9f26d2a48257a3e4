//go:build nvml

package discover

import (
	"fmt"
	"math/bits"
	"strconv"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/hetsched/hetsched/internal/api"
)

// NVMLAvailable reports whether this binary was built with the nvml tag,
// that is whether NVML can find GPUs at all.
func NVMLAvailable() bool { return true }

// NVML finds NVIDIA GPUs through NVML (libnvidia-ml.so, loaded when
// Devices first runs; building needs cgo, finding GPUs needs the driver)
// and monitors them. Use a *NVML; it is safe for concurrent use.
//
// Devices:
//   - A GPU is type nvidia.com/gpu, id its NVML index ("0", "1", ...),
//     model gpuModel of its name, memory its total framebuffer, topology
//     uuid (the GPU's UUID), numa (its NUMA node, when NVML knows it) and
//     nvlink ("nv<k>", shared by the GPUs of one NVLink-connected group;
//     absent for a GPU that shares NVLink with no other GPU).
//   - A GPU in MIG mode is replaced by its MIG devices: id "<gpu
//     index>:<MIG slot>", model migModel(gpu model, profile), memory the
//     instance's, topology parent (the GPU index), uuid (the MIG UUID, when
//     it is a valid label value) and numa (the GPU's). MIG devices have no
//     nvlink key.
//   - A GPU NVML cannot open is listed, unhealthy.
//   - Init failing is no error: no devices, and a note.
//
// Sample reports every device of the last Devices call. A device turns
// unhealthy, for the life of the process, on an XID critical error that
// fatalXID accepts ("XID <n>"), a double-bit ECC event or a non-zero
// volatile uncorrected ECC count ("uncorrectable ECC errors"), or a call
// failing with ERROR_GPU_IS_LOST ("GPU is lost"). Events are drained from
// an event set registered at the first Sample. What happens to a GPU
// happens to all its MIG devices; an event that names a GPU instance and
// compute instance affects that MIG device only.
//
// An NVML call that panics (a mock without that method) reads as
// ERROR_NOT_SUPPORTED, and calls that older drivers lack are made only
// when the loaded library has them; unsupported readings are left out
// (zero in a sample, no key in a topology).
type NVML struct {
	// Lib is the NVML library; nil means nvml.New().
	Lib nvml.Interface

	mu          sync.Mutex
	lib         nvml.Interface // initialised; nil until Init succeeds
	gpus        []nvGPU
	devs        []nvDevice
	events      nvml.EventSet
	eventsTried bool
	symbols     map[string]bool
	sick        map[string]string // device id -> reason; never shrinks
}

// nvGPU is one physical GPU of the last Devices call.
type nvGPU struct {
	index  int
	handle nvml.Device // nil if NVML could not open it
	uuid   string
	mig    bool
	devs   []int // its entries in NVML.devs
}

// nvDevice is one device of the last Devices call: a GPU or a MIG device.
type nvDevice struct {
	dev    api.Device
	gpu    int // index into NVML.gpus
	handle nvml.Device
	gi, ci int // MIG device's GPU and compute instance ids; -1 if unknown
}

const (
	gpuType = "nvidia.com/gpu"
	// eventMask is what the Kubernetes device plugin registers for.
	eventMask = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError
	// maxEventsPerSample bounds one Sample's draining of the event set.
	maxEventsPerSample = 1024
	// maxMIGDevices bounds the MIG slots read per GPU.
	maxMIGDevices = 64
	// allInstances is the GPU/compute instance id of an event for a
	// whole GPU.
	allInstances = 0xFFFFFFFF

	reasonECC  = "uncorrectable ECC errors"
	reasonLost = "GPU is lost"
)

func (*NVML) Name() string { return "nvml" }

// Devices initialises NVML (once it succeeds) and lists the GPUs.
func (n *NVML) Devices() ([]api.Device, string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lib == nil {
		lib := n.Lib
		if lib == nil {
			lib = nvml.New()
		}
		if ret := tryRet(lib.Init); ret != nvml.SUCCESS {
			return nil, fmt.Sprintf("NVML unavailable: %v (no NVIDIA driver?)", ret), nil
		}
		n.lib, n.symbols = lib, map[string]bool{}
	}
	n.gpus, n.devs = nil, nil
	count, ret := try(n.lib.DeviceGetCount)
	if ret != nvml.SUCCESS {
		return nil, fmt.Sprintf("NVML could not count GPUs: %v", ret), nil
	}
	if count <= 0 {
		return nil, "NVML found no GPUs", nil
	}
	count = min(count, api.MaxNodeDevices)
	for i := range count {
		n.addGPU(i)
	}
	n.labelNVLink()
	out := make([]api.Device, len(n.devs))
	for i, d := range n.devs {
		_, d.dev.Unhealthy = n.sick[d.dev.ID]
		out[i] = d.dev
	}
	return out, "", nil
}

// addGPU appends GPU i and its devices to n.gpus and n.devs.
func (n *NVML) addGPU(i int) {
	g := nvGPU{index: i}
	id := strconv.Itoa(i)
	h, ret := try(func() (nvml.Device, nvml.Return) { return n.lib.DeviceGetHandleByIndex(i) })
	if ret != nvml.SUCCESS || h == nil {
		reason := "NVML cannot open the GPU: " + ret.Error()
		if ret == nvml.ERROR_GPU_IS_LOST {
			reason = reasonLost
		}
		n.markSick(id, reason)
		n.gpus = append(n.gpus, g)
		n.addDevice(len(n.gpus)-1, nvDevice{dev: api.Device{Type: gpuType, ID: id}, gi: -1, ci: -1})
		return
	}
	g.handle = h
	model := ""
	if name, ret := try(h.GetName); ret == nvml.SUCCESS {
		model = gpuModel(name)
	}
	var total uint64
	if m, ret := try(h.GetMemoryInfo); ret == nvml.SUCCESS {
		total = m.Total
	}
	topo := map[string]string{}
	if u, ret := try(h.GetUUID); ret == nvml.SUCCESS {
		g.uuid = u
		if u != "" && labelValue(u) == u {
			topo["uuid"] = u
		}
	}
	numa, haveNUMA := n.numaNode(h)
	if haveNUMA {
		topo[api.TopologyNUMA] = numa
	}
	if n.has("nvmlDeviceGetMigMode") {
		mode, ret := try(func() (int, nvml.Return) { cur, _, ret := h.GetMigMode(); return cur, ret })
		g.mig = ret == nvml.SUCCESS && mode == nvml.DEVICE_MIG_ENABLE
	}
	n.gpus = append(n.gpus, g)
	gi := len(n.gpus) - 1
	if !g.mig {
		n.addDevice(gi, nvDevice{dev: api.Device{Type: gpuType, ID: id, Model: model, Memory: api.Bytes(total), Topology: topo}, handle: h, gi: -1, ci: -1})
		return
	}
	maxMIG, ret := try(h.GetMaxMigDeviceCount)
	if ret != nvml.SUCCESS {
		return
	}
	profiles := instanceProfiles(h)
	for k := range min(maxMIG, maxMIGDevices) {
		m, ret := try(func() (nvml.Device, nvml.Return) { return h.GetMigDeviceHandleByIndex(k) })
		if ret != nvml.SUCCESS || m == nil {
			continue // an empty slot
		}
		d := nvDevice{handle: m, gi: -1, ci: -1, dev: api.Device{
			Type: gpuType, ID: fmt.Sprintf("%d:%d", i, k), Model: labelValue(model + "-MIG"),
			Topology: map[string]string{"parent": id},
		}}
		if haveNUMA {
			d.dev.Topology[api.TopologyNUMA] = numa
		}
		if u, ret := try(m.GetUUID); ret == nvml.SUCCESS && u != "" && labelValue(u) == u {
			d.dev.Topology["uuid"] = u
		}
		if giID, ret := try(m.GetGpuInstanceId); ret == nvml.SUCCESS {
			d.gi = giID
			if p, ok := profiles[giID]; ok {
				d.dev.Model = migModel(model, migProfileName(p.SliceCount, p.MemorySizeMB, total))
				d.dev.Memory = api.Bytes(p.MemorySizeMB << 20)
			}
		}
		if ci, ret := try(m.GetComputeInstanceId); ret == nvml.SUCCESS {
			d.ci = ci
		}
		if mem, ret := try(m.GetMemoryInfo); ret == nvml.SUCCESS && mem.Total > 0 {
			d.dev.Memory = api.Bytes(mem.Total)
		}
		n.addDevice(gi, d)
	}
}

// addDevice appends d, a device of n.gpus[gi], to n.devs.
func (n *NVML) addDevice(gi int, d nvDevice) {
	d.gpu = gi
	n.gpus[gi].devs = append(n.gpus[gi].devs, len(n.devs))
	n.devs = append(n.devs, d)
}

// instanceProfiles maps the ids of a MIG-mode GPU's GPU instances to
// their profiles.
func instanceProfiles(h nvml.Device) map[int]nvml.GpuInstanceProfileInfo {
	out := map[int]nvml.GpuInstanceProfileInfo{}
	for p := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := try(func() (nvml.GpuInstanceProfileInfo, nvml.Return) { return h.GetGpuInstanceProfileInfo(p) })
		if ret != nvml.SUCCESS {
			continue
		}
		gis, ret := try(func() ([]nvml.GpuInstance, nvml.Return) { return h.GetGpuInstances(&info) })
		if ret != nvml.SUCCESS {
			continue
		}
		for _, gi := range gis {
			if gi == nil {
				continue
			}
			if gInfo, ret := try(gi.GetInfo); ret == nvml.SUCCESS {
				out[int(gInfo.Id)] = info
			}
		}
	}
	return out
}

// numaNode is the GPU's NUMA node: GetNumaNodeId where the driver has it,
// else the single node of its memory affinity.
func (n *NVML) numaNode(h nvml.Device) (string, bool) {
	if n.has("nvmlDeviceGetNumaNodeId") {
		if node, ret := try(h.GetNumaNodeId); ret == nvml.SUCCESS && node >= 0 {
			return strconv.Itoa(node), true
		}
	}
	if !n.has("nvmlDeviceGetMemoryAffinity") {
		return "", false
	}
	set, ret := try(func() ([]uint, nvml.Return) { return h.GetMemoryAffinity(64, nvml.AFFINITY_SCOPE_NODE) })
	if ret != nvml.SUCCESS {
		return "", false
	}
	node, found := -1, 0
	for w, word := range set {
		found += bits.OnesCount(word)
		if word != 0 {
			node = w*bits.UintSize + bits.TrailingZeros(word)
		}
	}
	if found != 1 {
		return "", false
	}
	return strconv.Itoa(node), true
}

// labelNVLink sets the nvlink topology key of the whole (non-MIG) GPUs:
// GPUs are connected when an active NVLink of one ends at the other or at
// an endpoint (an NVSwitch) that a link of the other also ends at, or
// when NVML reports NVLink P2P between them.
func (n *NVML) labelNVLink() {
	var whole []*nvGPU
	owner := map[string]int{} // PCI address -> index into n.gpus; -1 if ambiguous
	for gi := range n.gpus {
		g := &n.gpus[gi]
		if g.handle == nil {
			continue
		}
		if !g.mig {
			whole = append(whole, g)
		}
		if p, ret := try(g.handle.GetPciInfo); ret == nvml.SUCCESS {
			k := pciAddress(p)
			if _, dup := owner[k]; dup {
				owner[k] = -1
			} else {
				owner[k] = gi
			}
		}
	}
	u := unionFind{}
	remoteType := n.has("nvmlDeviceGetNvLinkRemoteDeviceType")
	for _, g := range whole {
		for l := range nvml.NVLINK_MAX_LINKS {
			st, ret := try(func() (nvml.EnableState, nvml.Return) { return g.handle.GetNvLinkState(l) })
			if ret != nvml.SUCCESS {
				break // no NVLink, or no more links
			}
			if st != nvml.FEATURE_ENABLED {
				continue
			}
			if remoteType {
				t, ret := try(func() (nvml.IntNvLinkDeviceType, nvml.Return) { return g.handle.GetNvLinkRemoteDeviceType(l) })
				if ret == nvml.SUCCESS && t != nvml.NVLINK_DEVICE_TYPE_GPU && t != nvml.NVLINK_DEVICE_TYPE_SWITCH {
					continue // a CPU
				}
			}
			p, ret := try(func() (nvml.PciInfo, nvml.Return) { return g.handle.GetNvLinkRemotePciInfo(l) })
			if ret != nvml.SUCCESS {
				continue
			}
			k := pciAddress(p)
			switch o, ok := owner[k]; {
			case !ok:
				u.union(gpuKey(g.index), "pci:"+k)
			case o >= 0 && !n.gpus[o].mig:
				u.union(gpuKey(g.index), gpuKey(n.gpus[o].index))
			}
		}
	}
p2p:
	for i, a := range whole {
		for _, b := range whole[i+1:] {
			if u.find(gpuKey(a.index)) == u.find(gpuKey(b.index)) {
				continue
			}
			st, ret := try(func() (nvml.GpuP2PStatus, nvml.Return) {
				return a.handle.GetP2PStatus(b.handle, nvml.P2P_CAPS_INDEX_NVLINK)
			})
			if ret == nvml.ERROR_NOT_SUPPORTED {
				break p2p
			}
			if ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK {
				u.union(gpuKey(a.index), gpuKey(b.index))
			}
		}
	}
	idx := make([]int, len(whole))
	for i, g := range whole {
		idx[i] = g.index
	}
	domains := nvlinkDomains(idx, u)
	for _, g := range whole {
		if dom, ok := domains[g.index]; ok {
			for _, d := range g.devs {
				n.devs[d].dev.Topology[api.TopologyNVLink] = dom
			}
		}
	}
}

func pciAddress(p nvml.PciInfo) string {
	return fmt.Sprintf("%08x:%02x:%02x", p.Domain, p.Bus, p.Device)
}

// Sample reads utilization, memory used and health. Its error is always
// nil: what NVML cannot read is zero, or an unhealthy device.
func (n *NVML) Sample() (map[string]DeviceSample, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]DeviceSample, len(n.devs))
	if n.lib == nil {
		return out, nil
	}
	if !n.eventsTried {
		n.eventsTried = true
		n.registerEvents()
	}
	n.drainEvents()
	for gi := range n.gpus {
		g := &n.gpus[gi]
		if g.handle == nil {
			continue
		}
		c, ret := try(func() (uint64, nvml.Return) {
			return g.handle.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
		})
		if ret == nvml.SUCCESS && c > 0 {
			n.markGPU(g, reasonECC)
		}
		n.checkLost(g, ret)
	}
	for _, d := range n.devs {
		var s DeviceSample
		if d.handle != nil {
			u, ret := try(d.handle.GetUtilizationRates)
			if ret == nvml.SUCCESS {
				s.Utilization = min(float64(u.Gpu)/100, 1)
			}
			n.checkLost(&n.gpus[d.gpu], ret)
			m, ret := try(d.handle.GetMemoryInfo)
			if ret == nvml.SUCCESS {
				s.MemoryUsed = int64(min(m.Used, 1<<62))
			}
			n.checkLost(&n.gpus[d.gpu], ret)
		}
		reason, sick := n.sick[d.dev.ID]
		s.Healthy, s.Reason = !sick, reason
		out[d.dev.ID] = s
	}
	return out, nil
}

// registerEvents creates the event set and registers every GPU for the
// events of eventMask that it supports; a GPU that cannot be registered
// is watched through its ECC counts only.
func (n *NVML) registerEvents() {
	set, ret := try(n.lib.EventSetCreate)
	if ret != nvml.SUCCESS || set == nil {
		return
	}
	registered := false
	for _, g := range n.gpus {
		if g.handle == nil {
			continue
		}
		supported, ret := try(g.handle.GetSupportedEventTypes)
		if ret != nvml.SUCCESS || supported&eventMask == 0 {
			continue
		}
		if tryRet(func() nvml.Return { return g.handle.RegisterEvents(supported&eventMask, set) }) == nvml.SUCCESS {
			registered = true
		}
	}
	if !registered {
		tryRet(set.Free)
		return
	}
	n.events = set
}

// drainEvents handles the events waiting in the event set, without
// blocking.
func (n *NVML) drainEvents() {
	if n.events == nil {
		return
	}
	for range maxEventsPerSample {
		e, ret := try(func() (nvml.EventData, nvml.Return) { return n.events.Wait(0) })
		if ret != nvml.SUCCESS {
			return // ERROR_TIMEOUT: none left
		}
		n.handleEvent(e)
	}
}

// handleEvent marks the device an event is about unhealthy if the event
// is fatal. Events for GPUs that cannot be identified are dropped.
func (n *NVML) handleEvent(e nvml.EventData) {
	var reason string
	switch e.EventType {
	case nvml.EventTypeXidCriticalError:
		if !fatalXID(e.EventData) {
			return
		}
		reason = fmt.Sprintf("XID %d", e.EventData)
	case nvml.EventTypeDoubleBitEccError:
		reason = reasonECC
	default:
		return // single-bit ECC errors were corrected
	}
	if e.Device == nil {
		return
	}
	uuid, ret := try(e.Device.GetUUID)
	if ret != nvml.SUCCESS || uuid == "" {
		return
	}
	for gi := range n.gpus {
		g := &n.gpus[gi]
		if g.uuid != uuid {
			continue
		}
		if !g.mig || e.GpuInstanceId == allInstances || e.ComputeInstanceId == allInstances {
			n.markGPU(g, reason)
			return
		}
		for _, d := range g.devs {
			if dv := n.devs[d]; dv.gi == int(e.GpuInstanceId) && dv.ci == int(e.ComputeInstanceId) {
				n.markSick(dv.dev.ID, reason)
			}
		}
		return
	}
}

func (n *NVML) checkLost(g *nvGPU, ret nvml.Return) {
	if ret == nvml.ERROR_GPU_IS_LOST {
		n.markGPU(g, reasonLost)
	}
}

// markGPU marks every device of g unhealthy.
func (n *NVML) markGPU(g *nvGPU, reason string) {
	for _, d := range g.devs {
		n.markSick(n.devs[d].dev.ID, reason)
	}
}

// markSick records the first reason a device turned unhealthy.
func (n *NVML) markSick(id, reason string) {
	if n.sick == nil {
		n.sick = map[string]string{}
	}
	if _, ok := n.sick[id]; !ok {
		n.sick[id] = reason
	}
}

// has reports whether the loaded library has the C function sym.
func (n *NVML) has(sym string) bool {
	if ok, seen := n.symbols[sym]; seen {
		return ok
	}
	_, ret := try(func() (bool, nvml.Return) {
		if n.lib.Extensions().LookupSymbol(sym) != nil {
			return false, nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return true, nvml.SUCCESS
	})
	n.symbols[sym] = ret == nvml.SUCCESS
	return n.symbols[sym]
}

// Close frees the event set and shuts NVML down; a later Devices starts
// over. Devices found unhealthy stay unhealthy.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.events != nil {
		tryRet(n.events.Free)
		n.events = nil
	}
	n.eventsTried = false
	if n.lib == nil {
		return nil
	}
	ret := tryRet(n.lib.Shutdown)
	n.lib, n.gpus, n.devs = nil, nil, nil
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return fmt.Errorf("NVML shutdown: %v", ret)
	}
	return nil
}

// try calls an NVML function; a panic (a mock that lacks the method)
// reads as ERROR_NOT_SUPPORTED.
func try[T any](f func() (T, nvml.Return)) (v T, ret nvml.Return) {
	defer func() {
		if recover() != nil {
			var zero T
			v, ret = zero, nvml.ERROR_NOT_SUPPORTED
		}
	}()
	return f()
}

func tryRet(f func() nvml.Return) nvml.Return {
	_, ret := try(func() (struct{}, nvml.Return) { return struct{}{}, f() })
	return ret
}
