package kube

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// CSI attach limits, as kube-scheduler's NodeVolumeLimits (CSILimits)
// counts them: a node's CSINode says, per CSI driver, how many volumes
// the node can attach (spec.drivers[].allocatable.count); a pod's
// persistent volume claims (its own and its ephemeral volumes') use one
// volume of their driver each: a bound claim's volume's CSI driver (an
// in-tree volume counts as the CSI driver it migrates to), an unbound
// claim's class's provisioner; so do its in-tree inline volumes (Azure
// disks and files, Cinder, vSphere, Portworx; inline CSI volumes count
// nothing, as in kube-scheduler). In-tree volumes count whether or not
// the node's CSINode says they were migrated (kube-scheduler counts
// them only then).
//
// Each driver is a pooled resource, AttachResourceDomain/<driver>: a pod
// asks for one per volume it uses (a volume it mounts twice counts once),
// and a node offers its limit, or, without one, more than any node
// attaches. So a node never holds more than its limit of volumes by
// pods' counts. Where kube-scheduler counts volume handles, a volume
// that two pods on one node share counts twice here (a pod may then wait
// where kube-scheduler would place it), and VolumeAttachments of no pod
// do not count.
//
// The drivers the nodes offer are those pods asked for: the first pod
// asking for a driver has every node sent again with it, before its
// task goes to the engine.

// AttachResourceDomain is the domain of the attach resources.
const AttachResourceDomain = "attach.csi.hetsched.io"

// unlimitedAttach is what a node without a limit for a driver offers.
const unlimitedAttach = 1 << 20

// inTreeAttachment is the CSI driver an in-tree volume source migrates
// to (k8s.io/csi-translation-lib's plugins) and its volume's id; "" for
// a source that migrates to none.
func inTreeAttachment(s *corev1.PersistentVolumeSource) (driver, handle string) {
	switch {
	case s.AWSElasticBlockStore != nil:
		return "ebs.csi.aws.com", s.AWSElasticBlockStore.VolumeID
	case s.GCEPersistentDisk != nil:
		return "pd.csi.storage.gke.io", s.GCEPersistentDisk.PDName
	case s.AzureDisk != nil:
		return "disk.csi.azure.com", s.AzureDisk.DataDiskURI
	case s.AzureFile != nil:
		return "file.csi.azure.com", s.AzureFile.ShareName
	case s.Cinder != nil:
		return "cinder.csi.openstack.org", s.Cinder.VolumeID
	case s.VsphereVolume != nil:
		return "csi.vsphere.vmware.com", s.VsphereVolume.VolumePath
	case s.PortworxVolume != nil:
		return "pxd.portworx.com", s.PortworxVolume.VolumeID
	}
	return "", ""
}

// inlineAttachment is the CSI driver and volume id of an in-tree inline
// volume that migrates to one (those hetsched does not refuse: fields.go).
func inlineAttachment(v *corev1.VolumeSource) (driver, handle string) {
	switch {
	case v.AzureDisk != nil:
		return "disk.csi.azure.com", v.AzureDisk.DataDiskURI
	case v.AzureFile != nil:
		return "file.csi.azure.com", v.AzureFile.SecretName + "#" + v.AzureFile.ShareName
	case v.Cinder != nil:
		return "cinder.csi.openstack.org", v.Cinder.VolumeID
	case v.VsphereVolume != nil:
		return "csi.vsphere.vmware.com", v.VsphereVolume.VolumePath
	case v.PortworxVolume != nil:
		return "pxd.portworx.com", v.PortworxVolume.VolumeID
	}
	return "", ""
}

// inTreeProvisioners are the in-tree provisioners of those drivers.
var inTreeProvisioners = map[string]string{
	"kubernetes.io/aws-ebs": "ebs.csi.aws.com", "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
	"kubernetes.io/azure-disk": "disk.csi.azure.com", "kubernetes.io/azure-file": "file.csi.azure.com",
	"kubernetes.io/cinder": "cinder.csi.openstack.org", "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
	"kubernetes.io/portworx-volume": "pxd.portworx.com",
}

// AttachResource is the resource of a CSI driver's attach limit.
func AttachResource(driver string) resource.Name {
	return resource.Name(AttachResourceDomain + "/" + driver)
}

// csiLimits reads the nodes' limits from their CSINodes and remembers the
// drivers pods asked for.
type csiLimits struct {
	lst storagelisters.CSINodeLister
	inf cache.SharedIndexInformer

	mu      sync.Mutex
	drivers map[string]bool // asked for by a pod; every node offers them
	resync  bool            // a driver was added since takeResync
}

func newCSILimits(f informers.SharedInformerFactory) *csiLimits {
	return &csiLimits{lst: f.Storage().V1().CSINodes().Lister(), inf: f.Storage().V1().CSINodes().Informer(), drivers: map[string]bool{}}
}

// watch marks a node dirty when its CSINode changes.
func (c *csiLimits) watch(d *dirtySet) error {
	_, err := c.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: d.addNode, UpdateFunc: func(_, o any) { d.addNode(o) }, DeleteFunc: d.addNode,
	})
	return err
}

// request adds to req (a copy is made: req may be shared) one unit of
// AttachResource per distinct volume of the pod's claims and in-tree
// inline volumes, per driver, and returns it. Claims, volumes and classes not found count nothing (the
// pod waits for them: volumeWatch.plan).
func (c *csiLimits) request(pod *corev1.Pod, w *volumeWatch, req resource.List) resource.List {
	if c == nil || len(pod.Spec.Volumes) == 0 {
		return req
	}
	seen := map[string]bool{}
	var add map[resource.Name]int64
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var driver, handle string
		switch {
		case v.PersistentVolumeClaim != nil:
			driver, handle = w.attachment(pod.Namespace, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			driver, handle = w.attachment(pod.Namespace, pod.Name+"-"+v.Name)
		default:
			driver, handle = inlineAttachment(&v.VolumeSource)
		}
		if driver == "" || seen[driver+"^"+handle] || resource.ValidateName(string(AttachResource(driver))) != nil {
			continue
		}
		seen[driver+"^"+handle] = true
		if add == nil {
			add = map[resource.Name]int64{}
		}
		add[AttachResource(driver)] += 1000
		c.mu.Lock()
		if !c.drivers[driver] {
			c.drivers[driver], c.resync = true, true
		}
		c.mu.Unlock()
	}
	if add == nil {
		return req
	}
	out := make(resource.List, len(req)+len(add))
	for k, v := range req {
		out[k] = v
	}
	for k, v := range add {
		out[k] += v
	}
	return out
}

// offer adds to n's capacity every driver pods asked for: the node's
// CSINode limit, or unlimitedAttach without one.
func (c *csiLimits) offer(n *api.Node) {
	if c == nil {
		return
	}
	limits := map[string]int64{}
	if cn, err := c.lst.Get(n.Name); err == nil {
		for _, d := range cn.Spec.Drivers {
			if d.Allocatable != nil && d.Allocatable.Count != nil {
				limits[d.Name] = int64(max(*d.Allocatable.Count, 0))
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for d := range c.drivers {
		l, ok := limits[d]
		if !ok {
			l = unlimitedAttach
		}
		n.Capacity[AttachResource(d)] = l * 1000
	}
}

// takeResync reports whether a driver was added since it last did: every
// node must be sent again before the task asking for it.
func (c *csiLimits) takeResync() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resync
	c.resync = false
	return r
}

// attachment is the CSI driver and volume handle claim ns/name uses:
// its bound volume's (an in-tree one's migrated driver), else its class's
// provisioner with the claim as the handle; "" when it uses none.
func (w *volumeWatch) attachment(ns, name string) (driver, handle string) {
	pvc, err := w.pvcs.PersistentVolumeClaims(ns).Get(name)
	if err != nil {
		return "", ""
	}
	if pvc.Spec.VolumeName != "" {
		if pv, err := w.pvs.Get(pvc.Spec.VolumeName); err == nil {
			return pvAttachment(pv)
		}
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class == "" {
		return "", ""
	}
	sc, err := w.classes.Get(class)
	if err != nil || sc.Provisioner == "" || sc.Provisioner == "kubernetes.io/no-provisioner" {
		return "", ""
	}
	p := sc.Provisioner
	if d, ok := inTreeProvisioners[p]; ok {
		p = d
	} else if strings.HasPrefix(p, "kubernetes.io/") {
		return "", "" // an in-tree provisioner that attaches nothing through CSI
	}
	return p, "claim:" + ns + "/" + name
}

// pvAttachment is a volume's CSI driver and handle ("" when it is
// neither CSI nor in-tree migratable).
func pvAttachment(pv *corev1.PersistentVolume) (string, string) {
	if s := pv.Spec.CSI; s != nil {
		return s.Driver, s.VolumeHandle
	}
	return inTreeAttachment(&pv.Spec.PersistentVolumeSource)
}
