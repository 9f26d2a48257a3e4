package kube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/kube"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// applyFile creates the objects of one YAML file (those that exist
// already are left as they are) and waits for CRDs to be established.
func applyFile(t *testing.T, c *kubetest.Cluster, path string) {
	t.Helper()
	dir, base := filepath.Split(path)
	for _, o := range applyObjects(t, c, dir, func(name string) bool { return name != base }, true) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		waitEstablished(t, c, o.GetName())
	}
}

// waitEstablished waits for a CRD's Established condition.
func waitEstablished(t *testing.T, c *kubetest.Cluster, name string) {
	t.Helper()
	rc := c.JSONConfig(100, 200)
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	err = kubetest.WaitFor(context.Background(), 30*time.Second, func() (bool, string, error) {
		u, err := dyn.Resource(crds).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, "", nil
			}
		}
		return false, "not established", nil
	})
	if err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
}

// applyDir creates every object of the YAML files in dir, in file order.
func applyDir(t *testing.T, c *kubetest.Cluster, dir string, skip func(name string) bool) []*unstructured.Unstructured {
	t.Helper()
	return applyObjects(t, c, dir, skip, false)
}

// applyObjects is applyDir; with tolerateExisting an object that exists
// is not an error (and not returned).
func applyObjects(t *testing.T, c *kubetest.Cluster, dir string, skip func(name string) bool, tolerateExisting bool) []*unstructured.Unstructured {
	t.Helper()
	rc := c.JSONConfig(100, 200)
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	ctx := context.Background()
	for _, f := range files {
		if skip(filepath.Base(f)) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
			if m.Scope.Name() == "namespace" {
				if u.GetNamespace() == "" {
					u.SetNamespace("default") // as kubectl apply does
				}
				ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
			}
			got, err := ri.Create(ctx, &u, metav1.CreateOptions{FieldValidation: "Strict"})
			if tolerateExisting && apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s %s: %v", f, gvk.Kind, u.GetName(), err)
			}
			out = append(out, got)
		}
	}
	return out
}

// The examples (a GPU pod, a DRA claim and its pod, a pretend driver's
// DeviceClasses and ResourceSlices) are valid objects of the API server
// (strict field validation).
func TestExampleManifestsApply(t *testing.T) {
	c := cluster(t)
	objs := applyObjects(t, c, "../../deploy/kubernetes/examples", func(string) bool { return false }, true)
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
	}
	if len(objs) > 0 && (!kinds["Pod"] || !kinds["ResourceClaim"]) {
		t.Errorf("applied %v, want pods and a ResourceClaim", kinds)
	}
	// Cluster-scoped, so perhaps made before (TestPretendDriverExampleAllocates).
	cs := c.Client(t)
	for _, class := range []string{"gpu.example.com", "tpu.example.com"} {
		if _, err := cs.ResourceV1().DeviceClasses().Get(context.Background(), class, metav1.GetOptions{}); err != nil {
			t.Errorf("the pretend driver's DeviceClass %s: %v", class, err)
		}
	}
	for _, slice := range []string{"gpu-node-1-gpu.example.com", "gpu-node-1-tpu.example.com"} {
		if _, err := cs.ResourceV1().ResourceSlices().Get(context.Background(), slice, metav1.GetOptions{}); err != nil {
			t.Errorf("the pretend driver's ResourceSlice %s: %v", slice, err)
		}
	}
}

// The manifests in deploy/kubernetes (the Helm chart's default rendering)
// apply to a real API server with RBAC (strict field validation), and the
// ServiceAccount they bind may do a scheduler's job and nothing more: it
// reads the manifests' Queues and ResourceSchedule and reports on them,
// places pods in those queues, and no more; its metrics port needs a token
// RBAC lets read /metrics. kubectl's path is the README's: the namespace
// and the CRDs first, established, then the rest.
func TestManifestsApplyAndGrantLeastPrivilege(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{RBAC: true})
	first := []string{"00-namespace.yaml", "05-crds.yaml"}
	for _, name := range first {
		applyFile(t, c, filepath.Join("../../deploy/kubernetes", name))
	}
	objs := applyDir(t, c, "../../deploy/kubernetes", func(name string) bool { return slices.Contains(first, name) })
	queues := map[string]bool{}
	schedule := false
	for _, o := range objs {
		switch o.GetKind() {
		case "Queue":
			queues[o.GetName()] = true
		case "ResourceSchedule":
			schedule = true
		}
	}
	if !queues["research"] || !queues["production"] || !schedule {
		t.Fatalf("the manifests' Queues %v and ResourceSchedule (%v): want research, production and default", queues, schedule)
	}

	admin := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rl := corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("8"), corev1.ResourceMemory: k8sresource.MustParse("32Gi"),
		corev1.ResourcePods: k8sresource.MustParse("110"), "nvidia.com/gpu": k8sresource.MustParse("2")}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-node", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status:     corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Scheduler runs as the ServiceAccount.
	const saUser = "system:serviceaccount:hetsched-system:hetsched"
	sa := c.RESTConfig(500, 1000)
	sa.Impersonate.UserName = saUser
	cs, err := kubernetes.NewForConfig(sa)
	if err != nil {
		t.Fatal(err)
	}
	// Custom resources have no protobuf encoding.
	saJSON := c.JSONConfig(500, 1000)
	saJSON.Impersonate.UserName = saUser
	saDyn, err := dynamic.NewForConfig(saJSON)
	if err != nil {
		t.Fatal(err)
	}
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	st, err := kube.OpenMemStore(lg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{Core: kube.CoreConfig(), Logger: lg}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, err := kube.New(kube.Config{Client: cs, Dynamic: saDyn, Engine: eng, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { stop(); <-done }()

	// The manifests' Queues and ResourceSchedule are read and reported on
	// (their status subresource), as the ServiceAccount, before any pod
	// is made: the pods below are placed in those queues' order.
	adminDyn, err := dynamic.NewForConfig(c.JSONConfig(100, 200))
	if err != nil {
		t.Fatal(err)
	}
	err = kubetest.WaitFor(ctx, 30*time.Second, func() (bool, string, error) {
		var notYet []string
		for _, o := range []struct {
			res  schema.GroupVersionResource
			name string
		}{{kube.QueueResource, "research"}, {kube.QueueResource, "production"}, {kube.ResourceScheduleResource, kube.ResourceScheduleName}} {
			u, err := adminDyn.Resource(o.res).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			if s, msg := accepted(st); s != "True" {
				notYet = append(notYet, fmt.Sprintf("%s %s: Accepted %q %s", o.res.Resource, o.name, s, msg))
			}
		}
		return len(notYet) == 0, strings.Join(notYet, "; "), nil
	})
	if err != nil {
		t.Fatalf("the manifests' queues and schedule: %v", err)
	}

	mk := func(name string, gpus string, queue string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{kube.LabelQueue: queue}},
			Spec: corev1.PodSpec{SchedulerName: kube.DefaultSchedulerName, Containers: []corev1.Container{{Name: "c", Image: "x",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": k8sresource.MustParse(gpus)}}}}},
		}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("fits", "2", "research")
	// "waits" comes once "fits" holds both GPUs: pending together, the two
	// would go in the queues' order (production's weight is the larger),
	// and "fits" would be the one to wait.
	err = kubetest.WaitFor(ctx, time.Minute, func() (bool, string, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName != "", "fits is not bound", nil
	})
	if err != nil {
		t.Fatalf("as the ServiceAccount: %v", err)
	}
	mk("waits", "1", "production")
	// A DRA claim, allocated and reserved under the role.
	drv, node := "gpu.rbac.example.com", "rbac-node"
	if _, err := admin.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "rbac-gpu"}, Spec: resourcev1.DeviceClassSpec{
		Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + drv + `"`}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "rbac-slice"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: drv, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ResourceV1().ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "rbac-claim"}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "rbac-gpu"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimName := "rbac-claim"
	if _, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fits-dra", Namespace: "default"},
		Spec: corev1.PodSpec{SchedulerName: kube.DefaultSchedulerName, ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}},
			Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = kubetest.WaitFor(ctx, time.Minute, func() (bool, string, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "fits", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		w, err := admin.CoreV1().Pods("default").Get(ctx, "waits", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		reported := false
		for _, c := range w.Status.Conditions {
			reported = reported || c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "nvidia.com/gpu")
		}
		evs, err := admin.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=waits"})
		if err != nil {
			return false, "", err
		}
		d, err := admin.CoreV1().Pods("default").Get(ctx, "fits-dra", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		claim, err := admin.ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		allocated := claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1 &&
			claim.Status.Allocation.Devices.Results[0].Device == "gpu-0" && len(claim.Status.ReservedFor) == 1
		return p.Spec.NodeName == "rbac-node" && p.Annotations[kube.AnnotationDevices] == "nvidia.com/gpu=0,1" && reported && len(evs.Items) > 0 &&
				d.Spec.NodeName == "rbac-node" && allocated,
			"fits on " + p.Spec.NodeName + " with " + p.Annotations[kube.AnnotationDevices] + "; fits-dra on " + d.Spec.NodeName + fmt.Sprintf(", its claim %+v", claim.Status), nil
	})
	if err != nil {
		t.Fatalf("as the ServiceAccount: %v", err)
	}

	// Nothing beyond a scheduler's job.
	forbidden := map[string]error{}
	_, forbidden["read secrets"] = cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	forbidden["delete pods"] = cs.CoreV1().Pods("default").Delete(ctx, "fits", metav1.DeleteOptions{})
	_, forbidden["create pods"] = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	forbidden["delete nodes"] = cs.CoreV1().Nodes().Delete(ctx, "rbac-node", metav1.DeleteOptions{})
	_, forbidden["read config maps"] = cs.CoreV1().ConfigMaps("hetsched-system").Get(ctx, "hetsched", metav1.GetOptions{})
	_, forbidden["leases elsewhere"] = cs.CoordinationV1().Leases("kube-system").List(ctx, metav1.ListOptions{})
	forbidden["delete claims"] = cs.ResourceV1().ResourceClaims("default").Delete(ctx, claimName, metav1.DeleteOptions{})
	forbidden["delete slices"] = cs.ResourceV1().ResourceSlices().Delete(ctx, "rbac-slice", metav1.DeleteOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the ServiceAccount could %s (err %v)", what, err)
		}
	}

	// Its metrics port serves only the users RBAC lets read /metrics.
	checkReviewedMetrics(t, ctx, c, admin)
}
