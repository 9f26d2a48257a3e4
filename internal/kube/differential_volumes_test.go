package kube_test

// Volumes in the differential test (issue 40 §1.4): claims and volumes
// made for each copy before its pods, a stand-in for the volume
// controller (no controller-manager runs) that completes the bindings
// kube-scheduler and hetsched start, and the volume constraints of the
// legality check (VolumeBinding's node affinity, VolumeZone, and
// ReadWriteOncePod's one pod).

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

const annBindCompleted = "pv.kubernetes.io/bind-completed"

// Volumes: a missing claim, a claim bound to a local volume on b, one
// bound to a volume of zone z2, an unbound Immediate claim, a
// WaitForFirstConsumer claim only the volume on c can hold, one no
// volume can, one whose class provisions, and a ReadWriteOncePod claim
// two pods want.
func volumesScenario() *scenario {
	zoned := func(name, zone string) diffNode {
		return diffNode{name: name, labels: map[string]string{corev1.LabelTopologyZone: zone}}
	}
	claim := func(name string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v" + fmt.Sprint(len(p.Spec.Volumes)),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	sc := &scenario{name: "volumes", nodes: []diffNode{zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z2")}, setup: setupVolumes}
	sc.pods = []diffPod{
		single(0, "missing-claim", claim("nope")),
		single(0, "on-local-b", claim("bound-local")),
		single(0, "on-zone-z2", claim("bound-zone")),
		single(0, "immediate-unbound", claim("unbound-now")),
		single(0, "wffc-only-c", claim("wffc-big")),
		single(0, "wffc-none-fits", claim("wffc-huge")),
		single(0, "provisioned", claim("dyn")),
		single(0, "rwop-first", claim("rwop")),
		single(1, "rwop-second", claim("rwop")),
	}
	return sc
}

// setupVolumes makes the copy's classes, volumes and claims, and starts
// its volume controller stand-in.
func setupVolumes(d *diffEnv, cp *diffCopy) error {
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	for name, c := range map[string]*storagev1.StorageClass{
		"local": {Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		"dyn":   {Provisioner: "csi.example.com", VolumeBindingMode: &wffc},
		"now":   {Provisioner: "csi.example.com", VolumeBindingMode: &immediate},
	} {
		c.Name, c.Labels = cp.tag+"-"+name, map[string]string{diffCopyLabel: cp.tag}
		if _, err := d.cs.StorageV1().StorageClasses().Create(d.ctx, c, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	volumes := []struct {
		name, class, node, size, claim string
		modes                          []corev1.PersistentVolumeAccessMode
		zone                           string
	}{
		{"pv-b", "local", "b", "10Gi", "bound-local", rwo, ""},
		{"pv-zone", "", "", "10Gi", "bound-zone", rwo, "z2"},
		{"pv-a-small", "local", "a", "1Gi", "", rwo, ""},
		{"pv-c", "local", "c", "10Gi", "", rwo, ""},
		{"pv-rwop", "local", "a", "1Gi", "rwop", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, ""},
	}
	for _, v := range volumes {
		if err := d.createPV(cp, v.name, v.class, v.node, v.size, v.claim, v.modes, v.zone); err != nil {
			return err
		}
	}
	claims := []struct{ name, class, size, volume string }{
		{"bound-local", "local", "1Gi", "pv-b"}, {"bound-zone", "", "1Gi", "pv-zone"}, {"unbound-now", "now", "1Gi", ""},
		{"wffc-big", "local", "5Gi", ""}, {"wffc-huge", "local", "50Gi", ""}, {"dyn", "dyn", "1Gi", ""}, {"rwop", "local", "1Gi", "pv-rwop"},
	}
	for _, c := range claims {
		modes := rwo
		if c.name == "rwop" {
			modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		}
		if err := d.createPVC(cp, c.name, c.class, c.size, c.volume, modes); err != nil {
			return err
		}
	}
	go d.volumeController(cp)
	d.t.Cleanup(func() { d.deleteVolumes(cp) })
	return nil
}

// deleteVolumes deletes the copy's classes and volumes (their protection
// finalizers dropped: no controller would).
func (d *diffEnv) deleteVolumes(cp *diffCopy) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag}
	d.cs.StorageV1().StorageClasses().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	unfinal := []byte(`{"metadata":{"finalizers":null}}`)
	if pvs, err := d.cs.CoreV1().PersistentVolumes().List(ctx, sel); err == nil {
		for _, v := range pvs.Items {
			d.cs.CoreV1().PersistentVolumes().Patch(ctx, v.Name, types.MergePatchType, unfinal, metav1.PatchOptions{})
			d.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{})
		}
	}
	if pvcs, err := d.cs.CoreV1().PersistentVolumeClaims(cp.ns).List(ctx, sel); err == nil {
		for _, c := range pvcs.Items {
			d.cs.CoreV1().PersistentVolumeClaims(cp.ns).Patch(ctx, c.Name, types.MergePatchType, unfinal, metav1.PatchOptions{})
			d.cs.CoreV1().PersistentVolumeClaims(cp.ns).Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
	}
}

// createPV makes a volume of the copy: local on node (or, with none, of
// zone), claimed by claim ("" for none: Available).
func (d *diffEnv) createPV(cp *diffCopy, name, class, node, size, claim string, modes []corev1.PersistentVolumeAccessMode, zone string) error {
	fs := corev1.PersistentVolumeFilesystem
	if class != "" {
		class = cp.tag + "-" + class
	}
	v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: cp.tag + "-" + name, Labels: map[string]string{diffCopyLabel: cp.tag}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse(size)},
			AccessModes: modes, StorageClassName: class, VolumeMode: &fs}}
	if node != "" {
		v.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/" + name}
		v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{cp.nodeName(node)}}}}}}}
	} else {
		v.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/mnt/" + name}
		v.Labels[corev1.LabelTopologyZone] = zone
	}
	if claim != "" {
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: cp.ns, Name: claim}
	}
	got, err := d.cs.CoreV1().PersistentVolumes().Create(d.ctx, v, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	got.Status.Phase = corev1.VolumeAvailable
	if claim != "" {
		got.Status.Phase = corev1.VolumeBound
	}
	_, err = d.cs.CoreV1().PersistentVolumes().UpdateStatus(d.ctx, got, metav1.UpdateOptions{})
	return err
}

// createPVC makes a claim of the copy's main namespace, bound to volume
// when one is named.
func (d *diffEnv) createPVC(cp *diffCopy, name, class, size, volume string, modes []corev1.PersistentVolumeAccessMode) error {
	if class != "" {
		class = cp.tag + "-" + class
	}
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cp.ns, Labels: map[string]string{diffCopyLabel: cp.tag}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: k8sresource.MustParse(size)}}}}
	if volume != "" {
		c.Spec.VolumeName = cp.tag + "-" + volume
		c.Annotations = map[string]string{annBindCompleted: "yes"}
	}
	got, err := d.cs.CoreV1().PersistentVolumeClaims(cp.ns).Create(d.ctx, c, metav1.CreateOptions{})
	if err != nil || volume == "" {
		return err
	}
	return d.claimBound(got)
}

// claimBound writes a bound claim's status, as the volume controller.
func (d *diffEnv) claimBound(c *corev1.PersistentVolumeClaim) error {
	c.Status.Phase = corev1.ClaimBound
	c.Status.AccessModes = c.Spec.AccessModes
	c.Status.Capacity = c.Spec.Resources.Requests
	_, err := d.cs.CoreV1().PersistentVolumeClaims(c.Namespace).UpdateStatus(d.ctx, c, metav1.UpdateOptions{})
	return err
}

// volumeController stands in for the volume controller (and a
// provisioner of the dyn class) until the test ends: a volume whose
// claimRef a scheduler wrote gets its claim bound to it; a claim of the
// dyn class given a selected node gets a local volume there.
func (d *diffEnv) volumeController(cp *diffCopy) {
	for d.ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		claims, err := d.cs.CoreV1().PersistentVolumeClaims(cp.ns).List(d.ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		pvs, err := d.cs.CoreV1().PersistentVolumes().List(d.ctx, metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag})
		if err != nil {
			continue
		}
		claimedBy := map[string]string{} // claim name -> volume
		for _, v := range pvs.Items {
			if r := v.Spec.ClaimRef; r != nil && r.Namespace == cp.ns {
				claimedBy[r.Name] = v.Name
			}
		}
		for i := range claims.Items {
			c := &claims.Items[i]
			node := c.Annotations["volume.kubernetes.io/selected-node"]
			switch vol, ok := claimedBy[c.Name]; {
			case c.Spec.VolumeName == "" && ok:
				c.Spec.VolumeName = vol
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, annBindCompleted, "yes")
				metav1.SetMetaDataAnnotation(&c.ObjectMeta, "pv.kubernetes.io/bound-by-controller", "yes")
				if got, err := d.cs.CoreV1().PersistentVolumeClaims(cp.ns).Update(d.ctx, c, metav1.UpdateOptions{}); err == nil {
					d.claimBound(got)
				}
			case c.Spec.VolumeName == "" && node != "" && c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == cp.tag+"-dyn":
				d.createPV(cp, "dyn-"+c.Name, "dyn", node[len(cp.tag)+1:], "1Gi", c.Name, c.Spec.AccessModes, "")
			}
		}
	}
}

// checkVolumes checks a bound pod's claims: each exists and is bound,
// its volume's node affinity and zone admit n, and a ReadWriteOncePod
// claim has no other pod (others: the pods of each claim so far).
func (w *world) checkVolumes(p *corev1.Pod, n *corev1.Node, users map[string]string) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		key := p.Namespace + "/" + v.PersistentVolumeClaim.ClaimName
		c := w.pvcs[key]
		if c == nil || c.Spec.VolumeName == "" {
			out = append(out, fmt.Sprintf("claim %s missing or unbound", key))
			continue
		}
		pv := w.pvs[c.Spec.VolumeName]
		if pv == nil {
			out = append(out, fmt.Sprintf("claim %s's volume %s missing", key, c.Spec.VolumeName))
			continue
		}
		if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
			if sel, err := nodeaffinity.NewNodeSelector(na.Required); err != nil || !sel.Match(n) {
				out = append(out, fmt.Sprintf("volume %s's node affinity does not admit the node", pv.Name))
			}
		}
		for _, k := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion} {
			if want, ok := pv.Labels[k]; ok && n.Labels[k] != want {
				out = append(out, fmt.Sprintf("volume %s is in %s=%s, the node in %q", pv.Name, k, want, n.Labels[k]))
			}
		}
		if other, ok := users[key]; ok && other != p.Name && slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOncePod) {
			out = append(out, fmt.Sprintf("ReadWriteOncePod claim %s used by %s too", key, other))
		}
		users[key] = p.Name
	}
	return out
}
