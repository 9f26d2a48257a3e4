//go:build nvml

package discover

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/hostinfo"
)

var (
	_ Source  = (*NVML)(nil)
	_ Monitor = (*NVML)(nil)
)

// The dgxa100 mock implements Init, the device count and handles, and per
// GPU the name, UUID, memory info, PCI info (device id only), MIG mode
// and GPU/compute instances. Everything else (NVLink, P2P, NUMA,
// utilization, ECC, events, MIG device handles) panics unless a test
// sets the method's Func field, which is how these tests supply it.

func gpu(s *dgxa100.Server, i int) *dgxa100.Device { return s.Devices[i].(*dgxa100.Device) }

func mustDevices(t *testing.T, n *NVML) []api.Device {
	t.Helper()
	devs, note, err := n.Devices()
	if err != nil || note != "" {
		t.Fatalf("Devices: note %q, err %v", note, err)
	}
	probe := api.Node{Name: "probe", Devices: devs}
	if err := probe.Validate(); err != nil {
		t.Fatalf("the devices make an invalid node: %v", err)
	}
	return devs
}

func mustSample(t *testing.T, n *NVML) map[string]DeviceSample {
	t.Helper()
	s, err := n.Sample()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNVMLAvailableWithTheTag(t *testing.T) {
	if !NVMLAvailable() {
		t.Fatal("NVMLAvailable() false in the nvml build")
	}
	if (&NVML{}).Name() != "nvml" {
		t.Fatal("name")
	}
}

func TestNVMLListsTheGPUsOfADGXA100(t *testing.T) {
	s := dgxa100.New()
	n := &NVML{Lib: s}
	devs := mustDevices(t, n)
	if len(devs) != 8 {
		t.Fatalf("%d devices, want 8", len(devs))
	}
	uuids := map[string]bool{}
	for i, d := range devs {
		want := api.Device{
			Type: "nvidia.com/gpu", ID: strconv.Itoa(i), Model: "Mock-A100-SXM4-40GB", Memory: 40 << 30,
			// The mock has neither NUMA nor NVLink: no numa or nvlink key.
			Topology: map[string]string{"uuid": gpu(s, i).UUID},
		}
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("device %d (-want +got)\n%s", i, diff)
		}
		if !strings.HasPrefix(d.Topology["uuid"], "GPU-") {
			t.Errorf("device %d uuid %q", i, d.Topology["uuid"])
		}
		uuids[d.Topology["uuid"]] = true
	}
	if len(uuids) != 8 {
		t.Fatalf("%d distinct UUIDs, want 8", len(uuids))
	}

	// Through Node, with no note.
	fsys := fstest.MapFS{"proc/meminfo": {Data: []byte(meminfo)}}
	node, notes, err := Node("dgx", hostinfo.Host{Root: fsys, NumCPU: 4}, []Source{n})
	if err != nil || len(notes) != 0 || len(node.Devices) != 8 {
		t.Fatalf("Node: %d devices, notes %q, %v", len(node.Devices), notes, err)
	}

	// The bare mock lacks every sampling call: zero readings, healthy, no panic.
	sample := mustSample(t, n)
	if len(sample) != 8 {
		t.Fatalf("sample of %d devices", len(sample))
	}
	for id, ds := range sample {
		if ds != (DeviceSample{Healthy: true}) {
			t.Errorf("%s: %+v", id, ds)
		}
	}
}

func TestNVMLInitFailureIsANoteNotAnError(t *testing.T) {
	s := dgxa100.New()
	s.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	n := &NVML{Lib: s}
	devs, note, err := n.Devices()
	if len(devs) != 0 || err != nil {
		t.Fatalf("%v %v", devs, err)
	}
	if want := "NVML unavailable: ERROR_DRIVER_NOT_LOADED (no NVIDIA driver?)"; note != want {
		t.Fatalf("note %q, want %q", note, want)
	}
	if sample := mustSample(t, n); len(sample) != 0 {
		t.Fatalf("sample %v", sample)
	}
	// The next Devices tries again.
	s.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	if devs := mustDevices(t, n); len(devs) != 8 {
		t.Fatalf("%d devices after a good Init", len(devs))
	}

	s = dgxa100.NewWithGPUs()
	if devs, note, err := (&NVML{Lib: s}).Devices(); len(devs) != 0 || note != "NVML found no GPUs" || err != nil {
		t.Fatalf("no GPUs: %v %q %v", devs, note, err)
	}
}

func TestNVMLGPUThatCannotBeOpenedIsListedUnhealthy(t *testing.T) {
	s := dgxa100.New()
	open := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 2 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return open(i)
	}
	n := &NVML{Lib: s}
	devs := mustDevices(t, n)
	if len(devs) != 8 || !devs[2].Unhealthy || devs[2].ID != "2" || devs[1].Unhealthy || devs[3].Unhealthy {
		t.Fatalf("%+v", devs)
	}
	if got := mustSample(t, n)["2"]; got.Healthy || got.Reason != "GPU is lost" {
		t.Fatalf("sample of GPU 2: %+v", got)
	}
}

func TestNVMLNVLinkDomainsFromP2P(t *testing.T) {
	s := dgxa100.New()
	group := func(i int) int { return []int{0, 0, 0, 0, 1, 1, -1, -2}[i] }
	for i := range 8 {
		gpu(s, i).GetP2PStatusFunc = func(other nvml.Device, idx nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if idx != nvml.P2P_CAPS_INDEX_NVLINK {
				t.Errorf("P2P asked for %v", idx)
			}
			if group(i) == group(other.(*dgxa100.Device).Index) {
				return nvml.P2P_STATUS_OK, nvml.SUCCESS
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}
	}
	devs := mustDevices(t, &NVML{Lib: s})
	want := []string{"nv0", "nv0", "nv0", "nv0", "nv1", "nv1", "", ""}
	for i, d := range devs {
		got, ok := d.Topology["nvlink"]
		if got != want[i] || ok != (want[i] != "") {
			t.Errorf("GPU %d nvlink %q (present %v), want %q", i, got, ok, want[i])
		}
	}
}

func TestNVMLNVLinkDomainsFromLinks(t *testing.T) {
	// Every GPU has six active links, one to each of six NVSwitches, as in
	// a DGX A100, except GPU 7, whose links end at a CPU.
	s := dgxa100.New()
	for i := range 8 {
		d := gpu(s, i)
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= 6 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{Bus: uint32(0xa0 + l)}, nvml.SUCCESS
		}
		d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			if i == 7 {
				return nvml.NVLINK_DEVICE_TYPE_IBMNPU, nvml.SUCCESS
			}
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
	}
	devs := mustDevices(t, &NVML{Lib: s})
	for i, d := range devs {
		if got, want := d.Topology["nvlink"], map[bool]string{true: "", false: "nv0"}[i == 7]; got != want {
			t.Errorf("GPU %d nvlink %q, want %q", i, got, want)
		}
	}

	// Direct GPU-to-GPU links: 0-1 and 2-3, found by PCI address.
	s = dgxa100.New()
	peer := map[int]int{0: 1, 1: 0, 2: 3, 3: 2}
	for i := range 8 {
		d := gpu(s, i)
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{Bus: uint32(0x10 + i)}, nvml.SUCCESS }
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if _, ok := peer[i]; !ok {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			if l > 0 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{Bus: uint32(0x10 + peer[i])}, nvml.SUCCESS
		}
	}
	n := &NVML{Lib: s}
	// An older driver without the remote device type call: not called.
	s.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlDeviceGetNvLinkRemoteDeviceType" {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
	devs = mustDevices(t, n)
	want := []string{"nv0", "nv0", "nv1", "nv1", "", "", "", ""}
	for i, d := range devs {
		if got := d.Topology["nvlink"]; got != want[i] {
			t.Errorf("direct links: GPU %d nvlink %q, want %q", i, got, want[i])
		}
	}
}

func TestNVMLNUMANode(t *testing.T) {
	s := dgxa100.New()
	for i := range 8 {
		gpu(s, i).GetNumaNodeIdFunc = func() (int, nvml.Return) { return i / 4, nvml.SUCCESS }
	}
	for i, d := range mustDevices(t, &NVML{Lib: s}) {
		if got, want := d.Topology["numa"], strconv.Itoa(i/4); got != want {
			t.Errorf("GPU %d numa %q, want %q", i, got, want)
		}
	}

	// A driver without GetNumaNodeId: the memory affinity, when it names
	// one node.
	s = dgxa100.New()
	s.LookupSymbolFunc = func(sym string) error {
		if sym == "nvmlDeviceGetNumaNodeId" {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
	for i := range 8 {
		d := gpu(s, i)
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) {
			t.Error("GetNumaNodeId called though the library lacks it")
			return 0, nvml.SUCCESS
		}
		d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
			switch i {
			case 0:
				return []uint{0, 1 << 3}, nvml.SUCCESS // node 67
			case 1:
				return []uint{0b110}, nvml.SUCCESS // two nodes: unknown
			case 2:
				return nil, nvml.ERROR_NOT_SUPPORTED
			}
			return []uint{1 << 1}, nvml.SUCCESS
		}
	}
	devs := mustDevices(t, &NVML{Lib: s})
	want := []string{"67", "", "", "1", "1", "1", "1", "1"}
	for i, d := range devs {
		got, ok := d.Topology["numa"]
		if got != want[i] || ok != (want[i] != "") {
			t.Errorf("GPU %d numa %q (present %v), want %q", i, got, ok, want[i])
		}
	}
}

func TestNVMLSampleReadsUtilizationAndMemory(t *testing.T) {
	s := dgxa100.New()
	for i := range 8 {
		d := gpu(s, i)
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, nvml.SUCCESS
		}
		d.MemoryInfo.Used = uint64(i) << 30
	}
	gpu(s, 7).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	n := &NVML{Lib: s}
	mustDevices(t, n)
	got := mustSample(t, n)
	if len(got) != 8 {
		t.Fatalf("%d samples", len(got))
	}
	for i := range 8 {
		ds := got[strconv.Itoa(i)]
		want := float64(i) / 10
		if i == 7 {
			want = 0
		}
		if math.Abs(ds.Utilization-want) > 1e-9 || ds.MemoryUsed != int64(i)<<30 || !ds.Healthy || ds.Reason != "" {
			t.Errorf("GPU %d: %+v, want utilization %v, memory %d", i, ds, want, int64(i)<<30)
		}
	}
}

// eventQueue fakes an NVML event set.
type eventQueue struct {
	mu         sync.Mutex
	q          []nvml.EventData
	created    int
	registered map[int]uint64
}

func (e *eventQueue) push(d nvml.EventData) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.q = append(e.q, d)
}

func (e *eventQueue) install(t *testing.T, s *dgxa100.Server) {
	e.registered = map[int]uint64{}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.created++
		return &mock.EventSet{
			WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
				if timeout != 0 {
					t.Errorf("Wait(%d) would block the heartbeat", timeout)
				}
				e.mu.Lock()
				defer e.mu.Unlock()
				if len(e.q) == 0 {
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
				d := e.q[0]
				e.q = e.q[1:]
				return d, nvml.SUCCESS
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	for i := range s.Devices {
		d := gpu(s, i)
		d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return 0xffff, nvml.SUCCESS }
		d.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.registered[i] = mask
			return nvml.SUCCESS
		}
	}
}

func xid(d nvml.Device, n uint64) nvml.EventData {
	return nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: n, GpuInstanceId: allInstances, ComputeInstanceId: allInstances}
}

func health(sample map[string]DeviceSample) map[string]string {
	out := map[string]string{}
	for id, s := range sample {
		if s.Healthy != (s.Reason == "") {
			out[id] = "inconsistent"
		} else if !s.Healthy {
			out[id] = s.Reason
		}
	}
	return out
}

func TestNVMLEventsMakeDevicesUnhealthyForGood(t *testing.T) {
	s := dgxa100.New()
	var events eventQueue
	events.install(t, s)
	n := &NVML{Lib: s}
	mustDevices(t, n)
	if got := health(mustSample(t, n)); len(got) != 0 {
		t.Fatalf("unhealthy before any event: %v", got)
	}
	if events.created != 1 || len(events.registered) != 8 {
		t.Fatalf("event set created %d times, %d GPUs registered", events.created, len(events.registered))
	}
	for i, mask := range events.registered {
		if mask != nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError|nvml.EventTypeSingleBitEccError {
			t.Errorf("GPU %d registered for %#x", i, mask)
		}
	}

	events.push(xid(s.Devices[3], 79))
	events.push(xid(s.Devices[2], 13)) // an application error
	events.push(nvml.EventData{Device: s.Devices[1], EventType: nvml.EventTypeSingleBitEccError})
	events.push(xid(dgxa100.NewDevice(9), 79)) // not a GPU of ours
	want := map[string]string{"3": "XID 79"}
	if diff := cmp.Diff(want, health(mustSample(t, n))); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}

	events.push(nvml.EventData{Device: s.Devices[5], EventType: nvml.EventTypeDoubleBitEccError, GpuInstanceId: allInstances, ComputeInstanceId: allInstances})
	events.push(xid(s.Devices[3], 48)) // the first reason stays
	want["5"] = "uncorrectable ECC errors"
	if diff := cmp.Diff(want, health(mustSample(t, n))); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	// Sticky: no new events, still unhealthy; a new Devices lists them so.
	if diff := cmp.Diff(want, health(mustSample(t, n))); diff != "" {
		t.Fatalf("after a quiet sample (-want +got)\n%s", diff)
	}
	for _, d := range mustDevices(t, n) {
		if _, sick := want[d.ID]; d.Unhealthy != sick {
			t.Errorf("Devices: %s unhealthy %v", d.ID, d.Unhealthy)
		}
	}
	mustSample(t, n)
	if events.created != 1 {
		t.Fatalf("event set created %d times", events.created)
	}
}

func TestNVMLUncorrectableECCAndLostGPUs(t *testing.T) {
	s := dgxa100.New()
	for i := range 8 {
		gpu(s, i).GetTotalEccErrorsFunc = func(et nvml.MemoryErrorType, ct nvml.EccCounterType) (uint64, nvml.Return) {
			if et != nvml.MEMORY_ERROR_TYPE_UNCORRECTED || ct != nvml.VOLATILE_ECC {
				t.Errorf("ECC count of %v %v", et, ct)
			}
			if i == 6 {
				return 2, nvml.SUCCESS
			}
			return 0, nvml.SUCCESS
		}
	}
	lost := true
	gpu(s, 4).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if lost {
			return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Utilization{Gpu: 50}, nvml.SUCCESS
	}
	n := &NVML{Lib: s}
	mustDevices(t, n)
	want := map[string]string{"4": "GPU is lost", "6": "uncorrectable ECC errors"}
	if diff := cmp.Diff(want, health(mustSample(t, n))); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	lost = false
	got := mustSample(t, n)
	if diff := cmp.Diff(want, health(got)); diff != "" {
		t.Fatalf("after recovery (-want +got)\n%s", diff)
	}
	if got["4"].Utilization != 0.5 {
		t.Fatalf("GPU 4 still reads: %+v", got["4"])
	}
}

// migGPU turns GPU 0 of s to MIG mode with a 1g.5gb instance in slot 0
// and a 3g.20gb instance in slot 2, each with one compute instance.
func migGPU(t *testing.T, s *dgxa100.Server) (small, large *mock.Device) {
	t.Helper()
	d := gpu(s, 0)
	if ret, _ := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	instance := func(profile int) (gi, ci int) {
		info, ret := d.GetGpuInstanceProfileInfo(profile)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		g, ret := d.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		ciInfo, ret := g.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		c, ret := g.CreateComputeInstance(&ciInfo)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		gInfo, _ := g.GetInfo()
		cInfo, _ := c.GetInfo()
		return int(gInfo.Id), int(cInfo.Id)
	}
	migDevice := func(uuid string, gi, ci int) *mock.Device {
		return &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return gi, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		}
	}
	gi, ci := instance(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	small = migDevice("MIG-0b3f4cd4-1f5a-5a4e-9f3c-2b8e1c7d6a01", gi, ci)
	small.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 4800 << 20, Used: 1 << 30}, nvml.SUCCESS
	}
	gi, ci = instance(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	// An old-style MIG UUID, not a valid label value: left out.
	large = migDevice("MIG-GPU-3c1f0e6e-8f1b-4b0e-a3a5-0e4f6f9b2c11/1/0", gi, ci)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		switch k {
		case 0:
			return small, nvml.SUCCESS
		case 2:
			return large, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return small, large
}

func TestNVMLMIGDevices(t *testing.T) {
	s := dgxa100.New()
	migGPU(t, s)
	n := &NVML{Lib: s}
	devs := mustDevices(t, n)
	if len(devs) != 9 {
		t.Fatalf("%d devices, want 2 MIG devices and 7 GPUs", len(devs))
	}
	want := []api.Device{
		// Memory from the MIG device where it says, else from its profile.
		{Type: "nvidia.com/gpu", ID: "0:0", Model: "Mock-A100-SXM4-40GB-MIG-1g.5gb", Memory: 4800 << 20,
			Topology: map[string]string{"parent": "0", "uuid": "MIG-0b3f4cd4-1f5a-5a4e-9f3c-2b8e1c7d6a01"}},
		{Type: "nvidia.com/gpu", ID: "0:2", Model: "Mock-A100-SXM4-40GB-MIG-3g.20gb", Memory: 19968 << 20,
			Topology: map[string]string{"parent": "0"}},
	}
	if diff := cmp.Diff(want, devs[:2]); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if devs[2].ID != "1" || devs[2].Model != "Mock-A100-SXM4-40GB" {
		t.Fatalf("GPU 1: %+v", devs[2])
	}

	var events eventQueue
	events.install(t, s)
	sample := mustSample(t, n)
	if got := sample["0:0"]; got != (DeviceSample{MemoryUsed: 1 << 30, Healthy: true}) {
		t.Fatalf("0:0: %+v", got)
	}
	// An XID in the large instance's GPU and compute instance: that MIG
	// device only.
	large := devsByID(n)["0:2"]
	events.push(nvml.EventData{Device: s.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 94,
		GpuInstanceId: uint32(large.gi), ComputeInstanceId: uint32(large.ci)})
	wantHealth := map[string]string{"0:2": "XID 94"}
	if diff := cmp.Diff(wantHealth, health(mustSample(t, n))); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	// An XID of the whole GPU: every MIG device of it.
	events.push(xid(s.Devices[0], 79))
	wantHealth["0:0"] = "XID 79"
	if diff := cmp.Diff(wantHealth, health(mustSample(t, n))); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

func devsByID(n *NVML) map[string]nvDevice {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]nvDevice{}
	for _, d := range n.devs {
		out[d.dev.ID] = d
	}
	return out
}

func TestNVMLCloseShutsDownAndDevicesStartsOver(t *testing.T) {
	s := dgxa100.New()
	inits, shutdowns := 0, 0
	s.InitFunc = func() nvml.Return { inits++; return nvml.SUCCESS }
	s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	n := &NVML{Lib: s}
	mustDevices(t, n)
	mustDevices(t, n)
	if inits != 1 {
		t.Fatalf("Init called %d times for two Devices", inits)
	}
	if err := n.Close(); err != nil || shutdowns != 1 {
		t.Fatalf("Close: %v, %d shutdowns", err, shutdowns)
	}
	if got := mustSample(t, n); len(got) != 0 {
		t.Fatalf("sample after Close: %v", got)
	}
	if err := n.Close(); err != nil || shutdowns != 1 {
		t.Fatalf("second Close: %v, %d shutdowns", err, shutdowns)
	}
	if devs := mustDevices(t, n); len(devs) != 8 || inits != 2 {
		t.Fatalf("%d devices, %d inits", len(devs), inits)
	}
}
