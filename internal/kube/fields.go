package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Every field of a PodSpec, and what hetsched does with it: honoured
// (with kube-scheduler v1.36's default plugins' meaning), irrelevant to
// placement (no default plugin reads it), or refused (the pod waits,
// its condition naming the field). TestEveryPodSpecFieldIsDecided walks
// PodSpec by reflection and fails on a field this table does not decide,
// so a Kubernetes upgrade that adds one fails until someone does.
//
// An entry decides its path and everything below it, unless a longer
// entry decides a part of that. docs/kubernetes.md has the same table.

// fieldUse is what hetsched does with a pod field.
type fieldUse uint8

const (
	honoured fieldUse = iota
	irrelevant
	refused
)

func (u fieldUse) String() string {
	return [...]string{"honoured", "irrelevant to placement", "refused"}[u]
}

// podField is one entry: a path in PodSpec (json names, [] for a list's
// elements) and its use, with why where it is refused or not plain.
type podField struct {
	path string
	use  fieldUse
	why  string
}

// podSpecFields decides every PodSpec field (the docs' table).
var podSpecFields = append([]podField{
	{"nodeSelector", honoured, ""},
	{"nodeName", honoured, "a pod with one is not placed but counted where it runs"},
	{"affinity", honoured, "node affinity (required and preferred), pod affinity and anti-affinity (required and preferred, namespaces, namespaceSelector, matchLabelKeys, mismatchLabelKeys)"},
	{"tolerations", honoured, "effects as TaintToleration reads them; operators Exists and Equal"},
	{"tolerations[].tolerationSeconds", irrelevant, "the taint manager's, not the scheduler's"},
	{"schedulerName", honoured, ""},
	{"priority", honoured, "the tier, and the order of preemption"},
	{"priorityClassName", honoured, "its value when priority is not set"},
	{"preemptionPolicy", honoured, ""},
	{"overhead", honoured, "added to the request"},
	{"resources", honoured, "pod-level resources, as NodeResourcesFit reads them"},
	{"topologySpreadConstraints", honoured, "maxSkew, whenUnsatisfiable, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys; a node without the key takes no pod"},
	{"schedulingGates", honoured, "a gated pod is not placed"},
	{"resourceClaims", honoured, "DRA claims, allocated on concrete devices"},
	{"containers[].resources", honoured, "requests (limits where the API server made them the requests)"},
	{"containers[].ports[].hostPort", honoured, "NodePorts"},
	{"containers[].ports[].hostIP", honoured, "NodePorts"},
	{"containers[].ports[].protocol", honoured, "NodePorts"},
	{"initContainers[].resources", honoured, "an init container's peak; a sidecar's adds"},
	{"initContainers[].restartPolicy", honoured, "Always makes a sidecar"},
	{"initContainers[].ports[].hostPort", honoured, "a sidecar's, NodePorts"},
	{"initContainers[].ports[].hostIP", honoured, "a sidecar's, NodePorts"},
	{"initContainers[].ports[].protocol", honoured, "a sidecar's, NodePorts"},
	{"hostNetwork", irrelevant, "the API server makes such a pod's container ports host ports, which are honoured"},
	{"volumes[].persistentVolumeClaim", honoured, "VolumeBinding, VolumeZone, VolumeRestrictions' ReadWriteOncePod: a missing or unbound Immediate claim waits; a bound volume's node affinity and zone constrain; a WaitForFirstConsumer claim gets a matching volume (claimRef) or its class provisions on the node (selected-node); NodeVolumeLimits: its volume counts against its CSI driver's attach limit on the node (csilimits.go)"},
	{"volumes[].ephemeral", honoured, "its claim (<pod>-<volume>), as a persistentVolumeClaim's"},
	{"volumes[].csi", irrelevant, "no default plugin reads an inline CSI volume (NodeVolumeLimits counts claims' volumes and in-tree ones)"},
	{"volumes[].awsElasticBlockStore", refused, "conflicts between pods (VolumeRestrictions) are not honoured"},
	{"volumes[].gcePersistentDisk", refused, "conflicts between pods (VolumeRestrictions) are not honoured"},
	{"volumes[].azureDisk", honoured, "NodeVolumeLimits: counts against the attach limit of the CSI driver it migrates to"},
	{"volumes[].cinder", honoured, "NodeVolumeLimits: counts against the attach limit of the CSI driver it migrates to"},
	{"volumes[].vsphereVolume", honoured, "NodeVolumeLimits: counts against the attach limit of the CSI driver it migrates to"},
	{"volumes[].azureFile", honoured, "NodeVolumeLimits: counts against the attach limit of the CSI driver it migrates to"},
	{"volumes[].portworxVolume", honoured, "NodeVolumeLimits: counts against the attach limit of the CSI driver it migrates to"},
	{"volumes[].rbd", refused, "conflicts between pods (VolumeRestrictions) are not honoured"},
	{"volumes[].iscsi", refused, "conflicts between pods (VolumeRestrictions) are not honoured"},
	{"schedulingGroup", honoured, "GangScheduling, TopologyPlacementGenerator: the PodGroup (scheduling.k8s.io/v1alpha2) it names is the pod's gang: minCount, one topology domain, disruption mode, the group's priority, its shared resourceClaims (workloads.go)"},
}, irrelevantFields()...)

// irrelevantFields are the fields no default plugin of kube-scheduler
// reads: the pod's running, not its placement.
func irrelevantFields() []podField {
	var out []podField
	add := func(prefix string, names ...string) {
		for _, n := range names {
			out = append(out, podField{path: prefix + n, use: irrelevant})
		}
	}
	add("", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "serviceAccountName",
		"serviceAccount", "automountServiceAccountToken", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
		"imagePullSecrets", "hostname", "subdomain", "hostAliases", "dnsConfig", "readinessGates", "runtimeClassName",
		"enableServiceLinks", "setHostnameAsFQDN", "os", "hostUsers", "hostnameOverride", "ephemeralContainers")
	add("volumes[].", "name", "hostPath", "emptyDir", "gitRepo", "secret", "nfs", "glusterfs", "flexVolume", "cephfs",
		"flocker", "downwardAPI", "fc", "configMap", "quobyte", "photonPersistentDisk", "projected", "scaleIO",
		"storageos", "image")
	for _, c := range []string{"containers[].", "initContainers[]."} {
		add(c, "name", "image", "command", "args", "workingDir", "ports[].name", "ports[].containerPort", "envFrom", "env",
			"resizePolicy", "restartPolicyRules", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
			"startupProbe", "lifecycle", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
			"securityContext", "stdin", "stdinOnce", "tty")
	}
	add("containers[].", "restartPolicy")
	return out
}

// refusedFields returns the first field of pod that hetsched refuses
// (podSpecFields), as an error naming it; nil when it has none.
func refusedFields(pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		if src := refusedVolumeSource(&pod.Spec.Volumes[i].VolumeSource); src != "" {
			return fmt.Errorf("volumes[%d].%s: %s", i, src, whyRefused("volumes[]."+src))
		}
	}
	return nil
}

// refusedVolumeSource names a volume source hetsched refuses ("" for
// one it does not).
func refusedVolumeSource(v *corev1.VolumeSource) string {
	switch {
	case v.AWSElasticBlockStore != nil:
		return "awsElasticBlockStore"
	case v.GCEPersistentDisk != nil:
		return "gcePersistentDisk"
	case v.RBD != nil:
		return "rbd"
	case v.ISCSI != nil:
		return "iscsi"
	}
	return ""
}

// whyRefused is the table's reason for a refused path.
func whyRefused(path string) string {
	for _, f := range podSpecFields {
		if f.path == path {
			return f.why
		}
	}
	return "not honoured"
}
