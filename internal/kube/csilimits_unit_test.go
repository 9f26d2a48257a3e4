package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/resource"
)

// A pod asks for one unit of its drivers' attach resources per distinct
// volume: a bound claim's CSI or in-tree volume, an unbound claim's
// class's provisioner (an in-tree one as the driver it migrates to; none
// for a class that provisions nothing), an ephemeral volume's claim, and
// in-tree inline volumes; inline CSI volumes and volumes mounted twice
// add nothing more. The request it was given is not changed, and the
// first pod asking for a driver asks for the nodes to be sent again.
func TestAttachRequest(t *testing.T) {
	idx := func(namespaced bool, objs ...any) cache.Indexer {
		ix := cache.Indexers{}
		if namespaced {
			ix[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
		}
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, ix)
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return i
	}
	claim := func(name, class, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: volume}}
	}
	w := &volumeWatch{
		pvcs: corelisters.NewPersistentVolumeClaimLister(idx(true,
			claim("csi", "", "pv-csi"), claim("ebs", "", "pv-ebs"), claim("local", "", "pv-local"),
			claim("gce", "gce", ""), claim("none", "none", ""), claim("hostpath", "hostpath", ""), claim("p-scratch", "dyn", ""))),
		pvs: corelisters.NewPersistentVolumeLister(idx(false,
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-csi"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "x.example.com", VolumeHandle: "h1"}}}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-ebs"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1"}}}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-local"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: "/mnt"}}}})),
		classes: storagelisters.NewStorageClassLister(idx(false,
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gce"}, Provisioner: "kubernetes.io/gce-pd"},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Provisioner: "kubernetes.io/no-provisioner"},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "hostpath"}, Provisioner: "kubernetes.io/host-path"},
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "dyn"}, Provisioner: "x.example.com"})),
	}
	c := &csiLimits{drivers: map[string]bool{}}
	vols := func(srcs ...corev1.VolumeSource) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		for i, s := range srcs {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: string(rune('a' + i)), VolumeSource: s})
		}
		return p
	}
	pvc := func(name string) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	cinder := corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "c1"}}
	base := resource.List{resource.CPU: 1000}
	pod := vols(pvc("csi"), pvc("csi"), pvc("ebs"), pvc("local"), pvc("gce"), pvc("none"), pvc("hostpath"), pvc("missing"),
		cinder, cinder, corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "inline.example.com"}})
	// The ephemeral volume's claim is <pod>-<volume>: p-scratch.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
	got := c.request(pod, w, base)
	want := resource.List{resource.CPU: 1000, AttachResource("x.example.com"): 2000, AttachResource("ebs.csi.aws.com"): 1000,
		AttachResource("pd.csi.storage.gke.io"): 1000, AttachResource("cinder.csi.openstack.org"): 1000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if len(base) != 1 {
		t.Errorf("the request given was changed: %v", base)
	}
	if !c.takeResync() || c.takeResync() {
		t.Error("new drivers: one resync wanted")
	}
	c.request(pod, w, base)
	if c.takeResync() {
		t.Error("no new driver, yet a resync")
	}
	if got := c.request(vols(pvc("local")), w, base); len(got) != 1 {
		t.Errorf("a local volume asks %v", got)
	}
}
