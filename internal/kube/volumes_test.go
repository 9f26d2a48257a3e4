package kube_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volumes as kube-scheduler's VolumeBinding reads them: a missing claim
// waits; a claim bound to a local volume pins the pod to that volume's
// node; an unbound claim of an Immediate class waits; a
// WaitForFirstConsumer claim takes an available local volume on the
// chosen node (its claimRef written before the Binding), or, for a class
// that provisions, gets the node in its selected-node annotation.
func TestVolumesAsKubeSchedulerBindsThem(t *testing.T) {
	e := newEnv(t)
	e.node("a", nil, nil)
	e.node("b", nil, nil)
	e.start()
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	classes := map[string]*storagev1.StorageClass{
		"local": {Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		"dyn":   {Provisioner: "csi.example.com", VolumeBindingMode: &wffc},
		"now":   {Provisioner: "csi.example.com", VolumeBindingMode: &immediate},
	}
	for name, sc := range classes {
		sc.Name = e.ns + "-" + name
		if _, err := e.cs.StorageV1().StorageClasses().Create(e.ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pv := func(name, class, node string, claim *corev1.ObjectReference) {
		fs := corev1.PersistentVolumeFilesystem
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse("10Gi")}, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class, VolumeMode: &fs, ClaimRef: claim,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{e.prefix + node}}}}}}},
		}}
		got, err := e.cs.CoreV1().PersistentVolumes().Create(e.ctx, v, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status.Phase = corev1.VolumeAvailable
		if claim != nil {
			got.Status.Phase = corev1.VolumeBound
		}
		if _, err := e.cs.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pvc := func(name, class, volume string) {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeName: volume,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse("1Gi")}}}}
		if volume != "" {
			c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
		}
		if _, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, claim string) {
		p := e.podSpec(name, map[string]string{"cpu": "1"})
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		e.create(p)
	}

	// Missing, then bound to a local volume on b: waits, then goes to b.
	pod("bound", "data-bound")
	e.waitReason("bound", "persistentvolumeclaim "+e.ns+"/data-bound not found")
	pv("pv-bound", e.ns+"-local", "b", &corev1.ObjectReference{Namespace: e.ns, Name: "data-bound"})
	pvc("data-bound", e.ns+"-local", e.ns+"-pv-bound")
	if got := e.waitBound("bound").Spec.NodeName; got != e.prefix+"b" {
		t.Errorf("the pod of a volume on b is on %s", got)
	}

	// Immediate and unbound: waits for the volume controller.
	pvc("data-now", e.ns+"-now", "")
	pod("now", "data-now")
	e.waitReason("now", "unbound immediate persistentvolumeclaim")

	// WaitForFirstConsumer, a local volume on a: the pod goes to a and
	// the volume is claimed for its claim.
	pv("pv-free", e.ns+"-local", "a", nil)
	pvc("data-local", e.ns+"-local", "")
	pod("local", "data-local")
	if got := e.waitBound("local").Spec.NodeName; got != e.prefix+"a" {
		t.Errorf("the pod of the local volume on a is on %s", got)
	}
	v, err := e.cs.CoreV1().PersistentVolumes().Get(e.ctx, e.ns+"-pv-free", metav1.GetOptions{})
	if err != nil || v.Spec.ClaimRef == nil || v.Spec.ClaimRef.Name != "data-local" || v.Spec.ClaimRef.Namespace != e.ns {
		t.Errorf("the local volume's claimRef: %+v, %v", v.Spec.ClaimRef, err)
	}

	// WaitForFirstConsumer with a provisioner: the claim names the node.
	pvc("data-dyn", e.ns+"-dyn", "")
	pod("dyn", "data-dyn")
	node := e.waitBound("dyn").Spec.NodeName
	c, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "data-dyn", metav1.GetOptions{})
	if err != nil || c.Annotations["volume.kubernetes.io/selected-node"] != node {
		t.Errorf("claim data-dyn selects %q, the pod is on %s (%v)", c.Annotations["volume.kubernetes.io/selected-node"], node, err)
	}
}

// CSI attach limits, as kube-scheduler's NodeVolumeLimits counts them: a
// node whose CSINode allows two volumes of a driver takes two pods with
// one volume each, one that allows one takes one, and the next pod waits,
// its reason naming the driver; a pod that uses one volume twice counts
// it once, and a bound volume of another driver counts nothing here.
func TestCSIAttachLimitsPerNode(t *testing.T) {
	e := newEnv(t)
	e.node("a", nil, nil)
	e.node("b", nil, nil)
	driver := "d." + e.ns
	for node, n := range map[string]int32{"a": 2, "b": 1} {
		count := n
		if _, err := e.cs.StorageV1().CSINodes().Create(e.ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: e.prefix + node},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: node, Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.start()
	bound := func(name, drv string) {
		fs := corev1.PersistentVolumeFilesystem
		pv, err := e.cs.CoreV1().PersistentVolumes().Create(e.ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &fs,
				ClaimRef:               &corev1.ObjectReference{Namespace: e.ns, Name: name},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: drv, VolumeHandle: name}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv.Status.Phase = corev1.VolumeBound
		if _, err := e.cs.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, pv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		none := ""
		if _, err := e.cs.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns,
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &none, VolumeName: pv.Name,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse("1Gi")}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name string, claims ...string) {
		p := e.podSpec(name, map[string]string{"cpu": "1"})
		for i, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		e.create(p)
	}
	for i := range 4 {
		bound(fmt.Sprintf("c%d", i), driver)
	}
	bound("other", "other."+driver)
	// One volume mounted twice, and a volume of a driver without limits.
	pod("p0", "c0", "c0", "other")
	for i := 1; i < 3; i++ {
		pod(fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i))
	}
	per := map[string]int{}
	for i := range 3 {
		per[e.waitBound(fmt.Sprintf("p%d", i)).Spec.NodeName]++
	}
	if per[e.prefix+"a"] != 2 || per[e.prefix+"b"] != 1 {
		t.Errorf("pods per node %v, want two on a and one on b", per)
	}
	pod("p3", "c3")
	e.waitReason("p3", "insufficient attach.csi.hetsched.io/"+driver)
	// Raising b's limit lets it in.
	cn, err := e.cs.StorageV1().CSINodes().Get(e.ctx, e.prefix+"b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	two := int32(2)
	cn.Spec.Drivers[0].Allocatable.Count = &two
	if _, err := e.cs.StorageV1().CSINodes().Update(e.ctx, cn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := e.waitBound("p3").Spec.NodeName; got != e.prefix+"b" {
		t.Errorf("p3 on %s, want b", got)
	}
}
