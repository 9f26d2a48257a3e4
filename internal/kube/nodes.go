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
// ephemeral-storage, hugepages, pods (as PodsResource) and every extended
// resource. Device-backed resources become that many devices, ids
// "0".."N-1", with the model and memory the discovery labels give. Every
// label and taint is kept, each taint with its effect: a NoExecute taint
// repels pods that do not tolerate that effect, and the engine leaves the
// pods already there to the taint manager (coreConfig). A cordoned node
// (spec.unschedulable) gets the node.kubernetes.io/unschedulable:NoSchedule
// taint, so that a pod tolerating it still lands there, as kube-scheduler's
// NodeUnschedulable plugin lets it; a node that is not Ready gets the
// not-ready (Ready False or missing) or unreachable (Unknown) NoSchedule
// taint that the node lifecycle controller gives it, when it has not yet.
// dropped lists what could not be carried over (a resource hetsched
// cannot hold, the hetsched.io/node label), for the log.
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
	taints := n.Spec.Taints
	if n.Spec.Unschedulable {
		taints = withTaint(taints, corev1.TaintNodeUnschedulable)
	}
	switch nodeReady(n) {
	case corev1.ConditionTrue:
	case corev1.ConditionUnknown:
		taints = withTaint(taints, corev1.TaintNodeUnreachable)
	default:
		taints = withTaint(taints, corev1.TaintNodeNotReady)
	}
	for _, t := range taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + string(t.Effect)
		if _, err := api.ParseTaint(s); err != nil {
			dropped = append(dropped, "taint "+s)
			continue
		}
		out.Taints = append(out.Taints, s)
	}
	return out, dropped
}

// withTaint is taints with key's NoSchedule taint added, unless a taint
// of that key and effect is there (the node controller's, say).
func withTaint(taints []corev1.Taint, key string) []corev1.Taint {
	for _, t := range taints {
		if t.Key == key && t.Effect == corev1.TaintEffectNoSchedule {
			return taints
		}
	}
	return append(slices.Clip(taints), corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
}

// nodeReady is the status of the Node's Ready condition ("" when it has
// none).
func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// resourceQuantity converts a Kubernetes resource quantity to hetsched's
// name and canonical units (milli-units, bytes for memory and storage).
func resourceQuantity(name corev1.ResourceName, q k8sresource.Quantity) (resource.Name, int64, bool) {
	rn := resource.Name(name)
	switch {
	case name == corev1.ResourcePods:
		rn = PodsResource
	case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
		rn = resource.HugePagesPrefix + resource.Name(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	}
	if resource.ValidateName(string(rn)) != nil {
		return "", 0, false // a name hetsched cannot hold
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

// nodeLabels is every label of a node, but hetsched's own node-name
// label (hetsched.io/node), which hetsched sets to the node's name; the
// API server has checked the rest's syntax, which is hetsched's.
func nodeLabels(in map[string]string, dropped []string) (map[string]string, []string) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k == api.NodeNameLabel || api.ValidateLabelKey(k) != nil || api.ValidateLabelValue(v) != nil {
			dropped = append(dropped, "label "+k)
			continue
		}
		out[k] = v
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
