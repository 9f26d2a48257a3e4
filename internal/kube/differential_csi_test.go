package kube_test

// CSI attach limits in the differential test (NodeVolumeLimits): nodes
// whose CSINodes limit a driver's volumes, pods with one bound CSI
// volume each, and the legality check of the limits.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// csiDriver is the driver the scenario's CSINodes limit.
const csiDriver = "diff.csi.example.com"

// CSI attach limits: node a attaches two volumes of the driver, b one;
// five pods with a volume each (the first with one more, of a driver
// without limits): three bound and two waiting, in either copy.
func csiScenario() *scenario {
	sc := &scenario{name: "csi-limits", nodes: []diffNode{kindNode("a"), kindNode("b")}, setup: setupCSI}
	claim := func(name string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", len(p.Spec.Volumes)),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	for i := range 5 {
		opts := []podOpt{claim(fmt.Sprintf("c%d", i))}
		if i == 0 {
			opts = append(opts, claim("free"))
		}
		sc.pods = append(sc.pods, diffPod{pod: dpod(fmt.Sprintf("vol-%d", i), opts...), group: "vol"})
	}
	return sc
}

// setupCSI makes the copy's CSINodes, and its volumes bound to claims.
func setupCSI(d *diffEnv, cp *diffCopy) error {
	for node, n := range map[string]int32{"a": 2, "b": 1} {
		count := n
		if _, err := d.cs.StorageV1().CSINodes().Create(d.ctx, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: cp.nodeName(node)},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: csiDriver, NodeID: node, Allocatable: &storagev1.VolumeNodeResources{Count: &count}}}}},
			metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	d.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, node := range []string{"a", "b"} {
			d.cs.StorageV1().CSINodes().Delete(ctx, cp.nodeName(node), metav1.DeleteOptions{})
		}
		d.deleteVolumes(cp)
	})
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	fs := corev1.PersistentVolumeFilesystem
	for i := range 6 {
		name, driver := fmt.Sprintf("c%d", i), csiDriver
		if i == 5 {
			name, driver = "free", "free."+csiDriver
		}
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: cp.tag + "-" + name, Labels: map[string]string{diffCopyLabel: cp.tag}},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse("1Gi")},
				AccessModes: rwo, VolumeMode: &fs,
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: cp.ns, Name: name},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: cp.tag + "-" + name}}}}
		got, err := d.cs.CoreV1().PersistentVolumes().Create(d.ctx, v, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got.Status.Phase = corev1.VolumeBound
		if _, err := d.cs.CoreV1().PersistentVolumes().UpdateStatus(d.ctx, got, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := d.createPVC(cp, name, "", "1Gi", name, rwo); err != nil {
			return err
		}
	}
	return nil
}

// checkAttachLimits checks each node's distinct CSI volumes of its bound
// pods' claims, per driver, against its CSINode's limits.
func (w *world) checkAttachLimits() []violation {
	used := map[string]map[string]map[string]bool{} // node -> driver -> handles
	for _, p := range w.bound {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			c := w.pvcs[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]
			if c == nil {
				continue
			}
			pv := w.pvs[c.Spec.VolumeName]
			if pv == nil || pv.Spec.CSI == nil {
				continue
			}
			n, drv := p.Spec.NodeName, pv.Spec.CSI.Driver
			if used[n] == nil {
				used[n] = map[string]map[string]bool{}
			}
			if used[n][drv] == nil {
				used[n][drv] = map[string]bool{}
			}
			used[n][drv][pv.Spec.CSI.VolumeHandle] = true
		}
	}
	var out []violation
	for n, drivers := range used {
		for drv, handles := range drivers {
			if limit, ok := w.attachLimits[n][drv]; ok && int64(len(handles)) > limit {
				out = append(out, violation{n, fmt.Sprintf("%d volumes of CSI driver %s attached, past the CSINode's %d", len(handles), drv, limit)})
			}
		}
	}
	return out
}
