package kube

import (
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// PodsResource is the resource a Node's allocatable "pods" becomes: each
// pod asks for one, so a node holds no more pods than its kubelet admits.
const PodsResource resource.Name = "kubernetes.io/pods"

// Labels of GPU feature discovery and GKE that name a node's device
// models and memory.
const (
	LabelGPUProduct     = "nvidia.com/gpu.product"
	LabelGPUMemory      = "nvidia.com/gpu.memory" // MiB
	LabelAMDGPUProduct  = "amd.com/gpu.product-name"
	LabelTPUAccelerator = "cloud.google.com/gke-tpu-accelerator"
	LabelTPUTopology    = "cloud.google.com/gke-tpu-topology"
)

// DefaultDeviceResources are the extended resources whose units are
// devices (a placement names which ones): GPUs, TPUs and other
// accelerators. Other extended resources are pooled counts.
var DefaultDeviceResources = []string{
	"nvidia.com/gpu", "amd.com/gpu", "google.com/tpu", "intel.com/gpu",
	"habana.ai/gaudi", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "intel.com/fpga",
}

// nodeTranslator turns Kubernetes Nodes into hetsched nodes.
type nodeTranslator struct {
	devices map[resource.Name]bool // the device-backed extended resources
}

func newNodeTranslator(deviceResources []string) nodeTranslator {
	nt := nodeTranslator{devices: map[resource.Name]bool{}}
	for _, r := range deviceResources {
		nt.devices[resource.Name(r)] = true
	}
	return nt
}

// node translates n. Its capacity is the Node's allocatable: cpu, memory,
// ephemeral-storage, pods (as PodsResource) and every extended resource.
// Device-backed resources become that many devices, ids "0".."N-1", with
// the model and memory the discovery labels give. Taints keep their
// effect, except NoExecute, which becomes NoSchedule: evicting running
// pods for a taint is the taint manager's job in Kubernetes, not the
// scheduler's. A cordoned (spec.unschedulable) or not Ready node is
// cordoned: it takes no new pods and its pods stay (the node lifecycle
// controller decides about them). dropped lists what could not be carried
// over (a label hetsched cannot hold, say), for the log.
func (nt nodeTranslator) node(n *corev1.Node) (out api.Node, dropped []string) {
	out = api.Node{Name: n.Name, Capacity: resource.List{}, State: api.NodeReady}
	for name, q := range n.Status.Allocatable {
		rn, v, ok := resourceQuantity(name, q)
		if !ok {
			dropped = append(dropped, "resource "+string(name))
			continue
		}
		out.Capacity[rn] = v
	}
	out.Labels, dropped = nodeLabels(n.Labels, dropped)
	for _, rn := range slices.Sorted(maps.Keys(out.Capacity)) {
		if !nt.devices[rn] {
			continue
		}
		count := out.Capacity[rn] / 1000
		out.Capacity[rn] = count * 1000 // devices are whole
		if len(out.Devices)+int(count) > api.MaxNodeDevices {
			dropped = append(dropped, "devices of "+string(rn)+" past "+strconv.Itoa(api.MaxNodeDevices))
			delete(out.Capacity, rn)
			continue
		}
		model, mem := deviceModel(rn, n.Labels)
		for i := int64(0); i < count; i++ {
			out.Devices = append(out.Devices, api.Device{Type: string(rn), ID: strconv.FormatInt(i, 10), Model: model, Memory: api.Bytes(mem)})
		}
	}
	for _, t := range n.Spec.Taints {
		effect := string(t.Effect)
		if t.Effect == corev1.TaintEffectNoExecute {
			effect = api.NoSchedule
		}
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + effect
		if _, err := api.ParseTaint(s); err != nil || len(out.Taints) == api.MaxNodeTaints {
			dropped = append(dropped, "taint "+s)
			continue
		}
		out.Taints = append(out.Taints, s)
	}
	if n.Spec.Unschedulable || !nodeReady(n) {
		out.State = api.NodeCordoned
	}
	return out, dropped
}

// nodeReady reports the Node's Ready condition.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// resourceQuantity converts a Kubernetes resource quantity to hetsched's
// name and canonical units (milli-units, bytes for memory and storage).
func resourceQuantity(name corev1.ResourceName, q k8sresource.Quantity) (resource.Name, int64, bool) {
	rn := resource.Name(name)
	if name == corev1.ResourcePods {
		rn = PodsResource
	}
	if resource.ValidateName(string(rn)) != nil {
		return "", 0, false // hugepages-2Mi and other names hetsched cannot hold
	}
	if rn.Scale() == resource.Units {
		return rn, q.Value(), true
	}
	return rn, q.MilliValue(), true
}

// deviceModel is the model and memory of a device type from discovery
// labels.
func deviceModel(rn resource.Name, labels map[string]string) (string, int64) {
	var model string
	var mem int64
	switch rn {
	case "nvidia.com/gpu":
		model = labels[LabelGPUProduct]
		if mib, err := strconv.ParseInt(labels[LabelGPUMemory], 10, 64); err == nil && mib > 0 {
			mem = mib << 20
		}
	case "amd.com/gpu":
		model = labels[LabelAMDGPUProduct]
	case "google.com/tpu":
		model = labels[LabelTPUAccelerator]
	}
	if api.ValidateLabelValue(model) != nil {
		model = ""
	}
	return model, mem
}

// labelPriority orders the labels kept when a node has more than
// api.MaxNodeLabels: these first, then the rest by key.
var labelPriority = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelInstanceTypeStable, corev1.LabelArchStable, corev1.LabelOSStable,
	LabelGPUProduct, LabelGPUMemory, "nvidia.com/gpu.count", LabelAMDGPUProduct,
	LabelTPUAccelerator, LabelTPUTopology,
}

// nodeLabels keeps the labels hetsched can hold, at most
// api.MaxNodeLabels, the well-known ones first.
func nodeLabels(in map[string]string, dropped []string) (map[string]string, []string) {
	out := make(map[string]string, min(len(in), api.MaxNodeLabels))
	add := func(k, v string) {
		if k == api.NodeNameLabel || api.ValidateLabelKey(k) != nil || api.ValidateLabelValue(v) != nil {
			dropped = append(dropped, "label "+k)
			return
		}
		if len(out) == api.MaxNodeLabels {
			dropped = append(dropped, "label "+k+" (past "+strconv.Itoa(api.MaxNodeLabels)+")")
			return
		}
		out[k] = v
	}
	for _, k := range labelPriority {
		if v, ok := in[k]; ok {
			add(k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if _, done := out[k]; !done && !slices.Contains(labelPriority, k) {
			add(k, in[k])
		}
	}
	return out, dropped
}

// formatDevices is the hetsched.io/devices annotation: "type=id,id;type=id"
// with shares as id@milli when not whole.
func formatDevices(devs []api.DeviceRef) string {
	byType := map[string][]string{}
	var types []string
	for _, d := range devs {
		if _, ok := byType[d.Type]; !ok {
			types = append(types, d.Type)
		}
		id := d.ID
		if d.Share > 0 && d.Share < 1000 {
			id += "@" + strconv.Itoa(int(d.Share))
		}
		byType[d.Type] = append(byType[d.Type], id)
	}
	sort.Strings(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = t + "=" + strings.Join(byType[t], ",")
	}
	return strings.Join(parts, ";")
}

// parseDevices reads the hetsched.io/devices annotation back; a malformed
// one yields nil (the adopted pod then gets any free devices).
func parseDevices(s string) []api.DeviceRef {
	if s == "" {
		return nil
	}
	var out []api.DeviceRef
	for _, part := range strings.Split(s, ";") {
		typ, ids, ok := strings.Cut(part, "=")
		if !ok || typ == "" || ids == "" || len(out) > api.MaxNodeDevices {
			return nil
		}
		for _, id := range strings.Split(ids, ",") {
			share := int32(1000)
			if i, m, ok := strings.Cut(id, "@"); ok {
				v, err := strconv.Atoi(m)
				if err != nil || v <= 0 || v > 1000 {
					return nil
				}
				id, share = i, int32(v)
			}
			if id == "" {
				return nil
			}
			out = append(out, api.DeviceRef{Type: typ, ID: id, Share: share})
		}
	}
	return out
}
