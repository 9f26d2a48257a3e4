package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/cel"

	"github.com/hetsched/hetsched/internal/api"
)

// Dynamic resource allocation (resource.k8s.io/v1), as hetsched models it:
//
//   - A DRA device of a node-local ResourceSlice is a hetsched device of
//     type "<driver>/dra" (one resource dimension per driver), with the
//     device's name as its id where that is free on the node.
//   - A device selector (a DeviceClass's CEL selectors plus a request's)
//     is a draSelector; the devices it matches carry its name as a device
//     class (api.Device.Classes), and the request asks for its count of
//     that driver's devices of that class (api.Task.DeviceClasses). CEL is
//     evaluated here, by the Kubernetes DRA library, once per selector and
//     device; the core only compares class names.
//   - A request's firstAvailable subrequests, and a selector matching
//     devices of several drivers, become the task's alternatives: the core
//     picks the one expected to finish first, ties going to the earlier.
//   - Devices of an allocated claim are held by the pod's task while it
//     lives, else by a claim task ("claim-<uid>") adopted where the
//     allocation says, until the claim is deallocated or deleted.

// draTypeSuffix ends the device type of a DRA driver's devices.
const draTypeSuffix = "/dra"

// draType is the hetsched device type of a driver's DRA devices.
func draType(driver string) string { return driver + draTypeSuffix }

// isDRAType reports whether a device type is a DRA driver's.
func isDRAType(t string) bool { return strings.HasSuffix(t, draTypeSuffix) }

// Bounds on what DRA objects may make the Scheduler hold.
const (
	maxDRASelectors = 64 // distinct selectors in use at once
	maxDRADrivers   = 8  // drivers whose devices become devices (resource dims are few)
	maxDRAOptions   = 1 + api.MaxAlternatives
)

// draDevice names one DRA device.
type draDevice struct{ driver, pool, name string }

// draDev is a DRA device as the Scheduler last translated it.
type draDev struct {
	ref     draDevice
	typ, id string // the hetsched device
	cel     cel.Device
	classes []string
	// tainted: a NoSchedule or NoExecute taint keeps work off it
	// (hetsched does not take device tolerations yet).
	tainted bool
}

// draNode is a node's DRA devices.
type draNode struct {
	devs  []draDev
	byID  map[string]int    // typ+"\x00"+id -> index in devs
	byRef map[draDevice]int // -> index in devs
}

// draSelector is a device class (a DeviceClass's selectors plus a
// request's), named as the device class its devices carry.
type draSelector struct {
	name    string
	class   string // the DeviceClass
	exprs   []string
	progs   []cel.CompilationResult
	drivers map[string]int // matching devices per driver, all nodes
}

// draAllocator is the Scheduler's DRA side, as kube-scheduler's
// DynamicResources plugin: it turns a pod's ResourceClaims into the
// options of its task (withClaims), writes the claims' allocations before
// the Binding (writeClaims) and releases them when a bind fails, keeps a
// claim task for each allocated claim no pod's task holds, and knows
// which claim holds each allocated device. It reaches the pod state only
// through draPods and the pod state's lock: a claim's state and the pods
// using it change together, under that one lock.
type draAllocator struct {
	pods   draPods
	mu     *sync.Mutex // the pod state's lock (Scheduler.mu): guards the maps below
	dirty  *dirtySet   // where it marks pods, nodes and claims to look at again
	log    *slog.Logger
	client kubernetes.Interface
	// devices is the DRA devices and selectors (its own lock); the
	// listers are nil where the cluster does not serve resource.k8s.io/v1.
	devices  *draState
	claimLst resourcelisters.ResourceClaimLister
	classLst resourcelisters.DeviceClassLister
	slices   cache.Indexer // ResourceSlices, indexed by node

	// Claims (under mu): holders is the pod task holding an allocated
	// claim's devices, by claim uid; pseudo the claim task holding them
	// when no pod's task does; claimUID a claim task's claim by key;
	// waiting the pods waiting for a claim to change, by claim key;
	// noDevice the pods waiting for devices to match their claims;
	// unmapped allocated claims whose devices are not known yet.
	holders  map[types.UID]string
	pseudo   map[types.UID]string
	claimUID map[string]types.UID
	waiting  map[string]map[string]bool
	noDevice map[string]bool
	unmapped map[string]bool
	// planned are the tracked pods whose task has a claims plan.
	planned map[types.UID]*podState
	// inUse is the claim each allocated device is for, allocs each
	// allocated claim's devices (from the claims informer).
	inUse  map[draDevice]claimUse
	allocs map[string][]draDevice
	seq    int
	// seen is the DRA state version the waiting pods were last looked at
	// against (the reconcile loop's alone).
	seen uint64
}

// draPods is what the DRA allocator asks of the Scheduler's pod state.
type draPods interface {
	// groupClaim resolves a pod's claim made for its PodGroup
	// (workloads.go).
	groupClaim(pod *corev1.Pod, pc *corev1.PodResourceClaim) (name string, g *groupRef, wait string)
	// apply sends a batch of task changes to the engine (reconcile.go).
	apply(ctx context.Context, b *podBatch)
	// retry runs an API call with the Scheduler's retries (decisions.go).
	retry(ctx context.Context, call func(context.Context) error) error
}

func newDRAAllocator(s *Scheduler) *draAllocator {
	return &draAllocator{pods: s, mu: &s.mu, dirty: &s.dirty, log: s.log, client: s.client, devices: newDRAState(),
		holders: map[types.UID]string{}, pseudo: map[types.UID]string{}, claimUID: map[string]types.UID{},
		waiting: map[string]map[string]bool{}, noDevice: map[string]bool{}, unmapped: map[string]bool{},
		inUse: map[draDevice]claimUse{}, allocs: map[string][]draDevice{}, planned: map[types.UID]*podState{}}
}

// draState is what the Scheduler knows of DRA devices and selectors.
type draState struct {
	mu        sync.Mutex
	cache     *cel.Cache
	selectors map[string]*draSelector // by key (class and expressions)
	byName    map[string]*draSelector
	nodes     map[string]*draNode
	drivers   map[string]bool
	// version changes when a selector gains its first device of a driver
	// or loses its last: the options of waiting pods may change.
	version uint64
	// resync: selectors were added; every node with DRA devices must be
	// translated again (their classes) before tasks naming them are sent.
	resync bool
	// warned keeps one log line per unsupported thing.
	warned map[string]bool
}

func newDRAState() *draState {
	return &draState{
		cache:     cel.NewCache(256, cel.Features{}),
		selectors: map[string]*draSelector{}, byName: map[string]*draSelector{},
		nodes: map[string]*draNode{}, drivers: map[string]bool{}, warned: map[string]bool{},
	}
}

// selectorKey is a selector's identity.
func selectorKey(class string, exprs []string) string {
	return class + "\x00" + strings.Join(exprs, "\x00")
}

// selectorName is the device class name of a selector: the DeviceClass's
// name when the request adds no selectors, else that name and a hash.
func selectorName(class string, exprs, classExprs []string) string {
	base := sanitizeLabelValue(class, 63)
	if len(exprs) == len(classExprs) {
		return base
	}
	h := sha256.Sum256([]byte(selectorKey(class, exprs)))
	return sanitizeLabelValue(class, 52) + "." + hex.EncodeToString(h[:5])
}

// sanitizeLabelValue keeps what a label value may hold, up to n bytes.
func sanitizeLabelValue(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b[:min(len(b), n)]), "-_.")
	if out == "" {
		out = "x"
	}
	return out
}

// selector returns the selector for a DeviceClass and a request's
// selectors, compiling and evaluating it on every known device when new.
// An expression that does not compile is the claim's error.
func (d *draState) selector(dc *resourcev1.DeviceClass, reqSel []resourcev1.DeviceSelector) (*draSelector, error) {
	var exprs, classExprs []string
	for _, s := range dc.Spec.Selectors {
		if s.CEL != nil {
			classExprs = append(classExprs, s.CEL.Expression)
		}
	}
	exprs = append(exprs, classExprs...)
	for _, s := range reqSel {
		if s.CEL != nil {
			exprs = append(exprs, s.CEL.Expression)
		}
	}
	key := selectorKey(dc.Name, exprs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if sel := d.selectors[key]; sel != nil {
		return sel, nil
	}
	if len(d.selectors) >= maxDRASelectors {
		return nil, fmt.Errorf("more than %d distinct device selectors are in use; hetsched cannot track another", maxDRASelectors)
	}
	sel := &draSelector{name: selectorName(dc.Name, exprs, classExprs), class: dc.Name, exprs: exprs, drivers: map[string]int{}}
	for _, e := range exprs {
		p := d.cache.GetOrCompile(e)
		if p.Error != nil {
			return nil, fmt.Errorf("selector %q: %v", clip(e, 120), p.Error)
		}
		sel.progs = append(sel.progs, p)
	}
	if other := d.byName[sel.name]; other != nil {
		// Two keys sanitized alike: tell them apart by the hash.
		h := sha256.Sum256([]byte(key))
		sel.name = sanitizeLabelValue(dc.Name, 52) + "." + hex.EncodeToString(h[:5])
	}
	d.selectors[key] = sel
	d.byName[sel.name] = sel
	// The known devices carry the new class from now on (the engine hears
	// of it when their nodes are translated again: resync).
	for _, n := range d.nodes {
		for i := range n.devs {
			dv := &n.devs[i]
			if len(dv.classes) < api.MaxDeviceClasses && sel.matches(&dv.cel) {
				dv.classes = append(slices.Clone(dv.classes), sel.name)
				sel.drivers[dv.ref.driver]++
			}
		}
	}
	if len(sel.drivers) > 0 {
		d.version++
		d.resync = true
	}
	return sel, nil
}

// matches evaluates the selector on a device; an expression that fails
// at runtime does not match (kube-scheduler reports it; here the request
// waits, and the log says why).
func (s *draSelector) matches(dev *cel.Device) bool {
	for i := range s.progs {
		ok, _, err := s.progs[i].DeviceMatches(context.Background(), *dev)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// takeResync reports (and clears) whether nodes must be translated again.
func (d *draState) takeResync() (nodes []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.resync {
		return nil
	}
	d.resync = false
	for n := range d.nodes {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return nodes
}

// drop forgets a node's DRA devices (the node went away).
func (d *draState) drop(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.setNode(node, nil)
}

// setNode replaces a node's devices, keeping the selectors' counts; the
// version changes when a selector gains its first device of a driver or
// loses its last.
func (d *draState) setNode(node string, n *draNode) {
	type pair struct{ sel, driver string }
	had := map[pair]bool{} // before this change, per pair it touches
	count := func(sel, driver string, delta int) {
		s := d.byName[sel]
		if s == nil {
			return
		}
		p := pair{sel, driver}
		if _, seen := had[p]; !seen {
			had[p] = s.drivers[driver] > 0
		}
		if s.drivers[driver] += delta; s.drivers[driver] <= 0 {
			delete(s.drivers, driver)
		}
	}
	if old := d.nodes[node]; old != nil {
		for i := range old.devs {
			for _, c := range old.devs[i].classes {
				count(c, old.devs[i].ref.driver, -1)
			}
		}
		delete(d.nodes, node)
	}
	if n != nil && len(n.devs) > 0 {
		for i := range n.devs {
			for _, c := range n.devs[i].classes {
				count(c, n.devs[i].ref.driver, +1)
			}
		}
		d.nodes[node] = n
	}
	for p, before := range had {
		if before != (d.byName[p.sel].drivers[p.driver] > 0) {
			d.version++
			return
		}
	}
}

// warnOnce reports whether what has not been warned about yet.
func (d *draState) warnOnce(what string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.firstWarning(what)
}

// firstWarning is warnOnce under d.mu (bounded: at most 1024 kept).
func (d *draState) firstWarning(what string) bool {
	if d.warned[what] || len(d.warned) > 1024 {
		return false
	}
	d.warned[what] = true
	return true
}

// translate turns the ResourceSlices of a node into its hetsched devices
// (at most room of them), recording the node's devices. Only complete
// pools at their newest generation count; devices the model cannot hold
// (partitionable ones, those with their own node selection or binding
// conditions) are left out and logged once.
func (d *draState) translate(node string, slices []*resourcev1.ResourceSlice, room int, warn func(msg string, args ...any)) []api.Device {
	type poolKey struct{ driver, pool string }
	gen := map[poolKey]int64{}
	count := map[poolKey]int64{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		switch g, ok := gen[k]; {
		case !ok || s.Spec.Pool.Generation > g:
			gen[k], count[k] = s.Spec.Pool.Generation, 1
		case s.Spec.Pool.Generation == g:
			count[k]++
		}
	}
	sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
	n := &draNode{byID: map[string]int{}, byRef: map[draDevice]int{}}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.Generation != gen[k] {
			continue
		}
		if count[k] < s.Spec.Pool.ResourceSliceCount {
			d.warnLocked(warn, "pool "+k.driver+"/"+k.pool, "DRA pool incomplete: its devices wait for the rest of its slices", "node", node)
			continue
		}
		if !d.drivers[s.Spec.Driver] {
			if len(d.drivers) >= maxDRADrivers {
				d.warnLocked(warn, "driver "+s.Spec.Driver, "DRA driver left out: too many drivers", "max", maxDRADrivers)
				continue
			}
			d.drivers[s.Spec.Driver] = true
		}
		for _, dev := range s.Spec.Devices {
			if len(n.devs) >= room {
				d.warnLocked(warn, "room "+node, "DRA devices left out: the node has too many devices", "node", node, "max", api.MaxNodeDevices)
				break
			}
			if why := unsupportedDevice(&dev); why != "" {
				d.warnLocked(warn, "device "+s.Spec.Driver+"/"+dev.Name+" "+why, "DRA device left out", "node", node, "driver", s.Spec.Driver, "device", dev.Name, "why", why)
				continue
			}
			d.addDevice(n, s, &dev)
		}
	}
	d.setNode(node, n)
	out := make([]api.Device, 0, len(n.devs))
	for i := range n.devs {
		dv := &n.devs[i]
		ad := api.Device{Type: dv.typ, ID: dv.id, Classes: dv.classes, Unhealthy: dv.tainted}
		ad.Model, ad.Memory = draModel(&dv.cel)
		out = append(out, ad)
	}
	return out
}

func (d *draState) warnLocked(warn func(string, ...any), key, msg string, args ...any) {
	if d.firstWarning(key) {
		warn(msg, args...)
	}
}

// unsupportedDevice says why a slice's device cannot be a hetsched device
// ("" when it can).
func unsupportedDevice(dev *resourcev1.Device) string {
	switch {
	case len(dev.ConsumesCounters) > 0:
		return "partitionable devices (consumesCounters) are not modelled"
	case dev.NodeName != nil || dev.NodeSelector != nil || dev.AllNodes != nil:
		return "per-device node selection is not modelled"
	case dev.BindsToNode != nil && *dev.BindsToNode || len(dev.BindingConditions) > 0:
		return "binding conditions are not supported"
	}
	return ""
}

// addDevice adds one slice device to n, with its classes.
func (d *draState) addDevice(n *draNode, s *resourcev1.ResourceSlice, dev *resourcev1.Device) {
	ref := draDevice{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, name: dev.Name}
	if _, dup := n.byRef[ref]; dup {
		return
	}
	typ := draType(s.Spec.Driver)
	id := dev.Name
	if _, taken := n.byID[typ+"\x00"+id]; taken || api.ValidateID("id", id) != nil {
		id = sanitizeLabelValue(s.Spec.Pool.Name, 120) + "." + sanitizeLabelValue(dev.Name, 120)
		for i := 2; ; i++ {
			if _, taken := n.byID[typ+"\x00"+id]; !taken {
				break
			}
			id = fmt.Sprintf("%s.%s.%d", sanitizeLabelValue(s.Spec.Pool.Name, 120), sanitizeLabelValue(dev.Name, 120), i)
		}
	}
	dv := draDev{ref: ref, typ: typ, id: id, cel: cel.Device{
		Driver: s.Spec.Driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
		Attributes: dev.Attributes, Capacity: dev.Capacity,
	}}
	for _, t := range dev.Taints {
		dv.tainted = dv.tainted || t.Effect == resourcev1.DeviceTaintEffectNoSchedule || t.Effect == resourcev1.DeviceTaintEffectNoExecute
	}
	names := make([]string, 0, len(d.byName))
	for name := range d.byName {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if len(dv.classes) == api.MaxDeviceClasses {
			break
		}
		if d.byName[name].matches(&dv.cel) {
			dv.classes = append(dv.classes, name)
		}
	}
	n.byID[typ+"\x00"+id] = len(n.devs)
	n.byRef[ref] = len(n.devs)
	n.devs = append(n.devs, dv)
}

// draModel reads a device's model (the attribute model, productName or
// type) and memory (the capacity memory) for hetsched's per-model view.
func draModel(dev *cel.Device) (string, api.Bytes) {
	model := ""
	for _, k := range []resourcev1.QualifiedName{"model", "productName", "type"} {
		if a, ok := dev.Attributes[k]; ok && a.StringValue != nil {
			model = sanitizeLabelValue(*a.StringValue, 63)
			break
		}
	}
	var mem api.Bytes
	if c, ok := dev.Capacity["memory"]; ok {
		if v, ok := c.Value.AsInt64(); ok && v > 0 {
			mem = api.Bytes(v)
		}
	}
	return model, mem
}

// lookup finds the DRA device behind a hetsched device of a node, with
// its classes.
func (d *draState) lookup(node, typ, id string) (draDevice, []string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[node]
	if n == nil {
		return draDevice{}, nil, false
	}
	i, ok := n.byID[typ+"\x00"+id]
	if !ok {
		return draDevice{}, nil, false
	}
	return n.devs[i].ref, slices.Clone(n.devs[i].classes), true
}

// hetschedDevice finds the hetsched device of a DRA device on a node.
func (d *draState) hetschedDevice(node string, ref draDevice) (api.DeviceRef, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.nodes[node]
	if n == nil {
		return api.DeviceRef{}, false
	}
	i, ok := n.byRef[ref]
	if !ok {
		return api.DeviceRef{}, false
	}
	return api.DeviceRef{Type: n.devs[i].typ, ID: n.devs[i].id, Share: 1000}, true
}

// driversOf is the drivers with devices the selector matches, sorted.
func (d *draState) driversOf(sel *draSelector) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(sel.drivers))
	for dr := range sel.drivers {
		out = append(out, dr)
	}
	sort.Strings(out)
	return out
}

func (d *draState) currentVersion() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sliceNodeIndex indexes ResourceSlices by their node.
const sliceNodeIndex = "node"

// startDRA sets up the DRA informers where the cluster serves
// resource.k8s.io/v1 (before the factory starts): slices mark their node
// changed, claims themselves, device classes the pods waiting on devices.
func (s *Scheduler) startDRA(ctx context.Context) error {
	ok, err := servesResource(ctx, s.client.Discovery(), resourcev1.SchemeGroupVersion.WithResource("resourceslices"))
	if err != nil {
		return fmt.Errorf("kube: discovering resource.k8s.io/v1: %w", err)
	}
	if !ok {
		return nil
	}
	rf := s.factory.Resource().V1()
	sliceInf := rf.ResourceSlices().Informer()
	if err := sliceInf.AddIndexers(cache.Indexers{sliceNodeIndex: func(o any) ([]string, error) {
		if sl, ok := o.(*resourcev1.ResourceSlice); ok && sl.Spec.NodeName != nil {
			return []string{*sl.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	sliceNode := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		sl, ok := o.(*resourcev1.ResourceSlice)
		if !ok {
			return
		}
		if sl.Spec.NodeName == nil {
			if s.dra.devices.warnOnce("slice not node-local " + sl.Spec.Driver) {
				s.log.Warn("DRA ResourceSlice left out: only node-local slices (spec.nodeName) are modelled", "slice", sl.Name, "driver", sl.Spec.Driver)
			}
			return
		}
		s.dirty.add(&s.dirty.nodes, *sl.Spec.NodeName)
	}
	if _, err := sliceInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: sliceNode, UpdateFunc: func(_, o any) { sliceNode(o) }, DeleteFunc: sliceNode,
	}); err != nil {
		return err
	}
	claimInf := rf.ResourceClaims().Informer()
	if _, err := claimInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.dirty.addClaim, UpdateFunc: func(_, o any) { s.dirty.addClaim(o) }, DeleteFunc: s.dirty.addClaim,
	}); err != nil {
		return err
	}
	classInf := rf.DeviceClasses().Informer()
	if _, err := classInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.dra.wakeDRAWaiting() },
		UpdateFunc: func(any, any) { s.dra.wakeDRAWaiting() },
	}); err != nil {
		return err
	}
	s.dra.slices = sliceInf.GetIndexer()
	s.dra.claimLst = rf.ResourceClaims().Lister()
	s.dra.classLst = rf.DeviceClasses().Lister()
	return nil
}

// wakeDRAWaiting looks again at the pods waiting for devices to match.
func (da *draAllocator) wakeDRAWaiting() {
	da.mu.Lock()
	keys := drainKeys(&da.noDevice)
	da.mu.Unlock()
	for _, k := range keys {
		da.dirty.addPodKey(k)
	}
}

// nodeSlices is the ResourceSlices of a node.
func (da *draAllocator) nodeSlices(node string) []*resourcev1.ResourceSlice {
	if da.slices == nil {
		return nil
	}
	objs, err := da.slices.ByIndex(sliceNodeIndex, node)
	if err != nil {
		return nil
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*resourcev1.ResourceSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}
