package core

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// devReq is a request for one device type: milli >= 1000 asks for whole
// devices, below 1000 for a share of one device.
type devReq struct {
	dim   int
	milli int64
	class string // the device class the devices must carry ("": any)
}

// Option is one way to run a task: its own resources (index -1) or one of
// its alternatives.
type Option struct {
	Index int // -1 for the task's resources, else the alternative's index
	Speed float64
	req   resource.Vector
	// reqLen is one past the highest dim req asks for (0 for none): loops
	// that skip the dims a request leaves at zero stop there.
	reqLen int
	devs   []devReq // device-backed (extended) dims of req
	// devClass is the spec's deviceClasses (resource -> device class).
	devClass map[string]string
	// unknown lists requested resources no node offers yet (sorted by name).
	unknown []unknownRes
	// groups compatible with this option (static filters passed), cached
	// against index.version.
	groups    []*group
	groupSet  []bool      // by group id
	scans     []scanState // by group id: where the next search resumes
	groupsVer uint64
	groupsOK  bool
}

// Request returns the option's resource vector (do not modify).
func (o *Option) Request() *resource.Vector { return &o.req }

// selTerm is one nodeSelector entry; a value may list alternatives.
type selTerm struct {
	key    string
	values []string
}

// classTable holds the scheduling classes by request hash, the runtime
// classes (what the learner keys runtimes by) by name and by metadata,
// and the classes that ask for resources no node offers yet. The core
// calls it at named points: classFor and runtimeClassFor when a task is
// admitted, resolveClasses when a node brings new resources.
type classTable struct {
	c          *Core
	byHash     map[uint64][]*class
	rtByName   map[string]*runtimeClass
	rtByMeta   map[string]*runtimeClass
	rtByClass  map[*class]*runtimeClass
	unresolved []*class // classes requesting resources no node offers yet
}

// class is a scheduling class: tasks with the same options, selector and
// tolerations are interchangeable for placement, so one failed attempt
// stands for all of them until capacity changes.
type class struct {
	key         string
	opts        []Option
	selector    []selTerm // all terms
	identity    []selTerm // the terms on identity labels (checked per node)
	tolerations []api.Toleration
	// affinity are the node affinity terms (one must match), by their
	// sorted text; affinityIdentity is set when a term reads an identity
	// label: then the terms are checked per node, not per group.
	affinity         []api.Selector
	affinityText     []string
	affinityIdentity bool
	// extra is the rest of the class's identity (extraKey): priority
	// value, preemption policy, placement constraints and the labels they
	// read; cons the constraints compiled (nil: none).
	extra string
	cons  *classCons
	// proto is the spec the class was made from, less id and labels
	// (protoOf), to make the class of other labels; sigEpoch is its scope's
	// epoch when its signature was written (reclass.go).
	proto      *api.Task
	sigEpoch   uint64
	scopeEpoch *uint64
	// queues holds the class's pending tasks per level, native and raised
	// by aging apart ([level][0] native, [level][1] raised): a raised task
	// that cannot preempt must not hold back natively urgent or high work
	// of its class, which can.
	queues   [4][2]*classQueue
	leaf     *queueNode // the tenant queue leaf its tasks wait in
	optOrder []int      // option indexes, fastest declared speed first
	// rrExhaustive: the last round-robin attempt ran out of budget, so the
	// next one checks a whole turn of the cluster.
	rrExhaustive bool
}

// perNode reports whether the class's node constraints read identity
// labels, so that they are checked per node (NodeIdentity), not per group.
func (cl *class) perNode() bool { return len(cl.identity) > 0 || cl.affinityIdentity }

// classQueues lists the class's queues (nil where none was made yet).
func (cl *class) classQueues() [8]*classQueue {
	var out [8]*classQueue
	for l := range cl.queues {
		out[2*l], out[2*l+1] = cl.queues[l][0], cl.queues[l][1]
	}
	return out
}

// hasGroup reports whether g passed o's static filters.
func (o *Option) hasGroup(g *group) bool { return g.id < len(o.groupSet) && o.groupSet[g.id] }

// runtimeClass groups tasks whose runtimes predict each other: the task's
// metadata "class", else its name, else its scheduling class.
type runtimeClass struct {
	key     string
	runtime ewma            // observed runtime at speed 1.0, ns
	byModel map[string]ewma // observed runtime per device model, ns
}

// classKey builds the scheduling-class key of a validated spec. Options are
// keyed by their canonical lists, so equal requests share a class.
func classKey(spec *api.Task) string {
	var b strings.Builder
	b.WriteString(spec.Resources.String())
	writeDeviceClasses(&b, spec.DeviceClasses)
	for _, a := range spec.Alternatives {
		b.WriteString("|")
		b.WriteString(a.Resources.String())
		writeDeviceClasses(&b, a.DeviceClasses)
		b.WriteString("@")
		b.WriteString(strconv.FormatFloat(a.Speed, 'g', -1, 64))
	}
	b.WriteString("#")
	writePairs(&b, spec.NodeSelector, nil)
	b.WriteString("#")
	tols := append([]string(nil), spec.Tolerations...)
	sort.Strings(tols)
	b.WriteString(strings.Join(tols, ";"))
	if len(spec.NodeAffinity) > 0 {
		b.WriteString("#")
		b.WriteString(strings.Join(sortedAffinity(spec), "\x00"))
	}
	return b.String()
}

// writeDeviceClasses writes an option's device classes, if any, as
// "{k=v;...}".
func writeDeviceClasses(b *strings.Builder, dc map[string]string) {
	if len(dc) == 0 {
		return
	}
	b.WriteByte('{')
	writePairs(b, dc, nil)
	b.WriteByte('}')
}

// sortedAffinity is the spec's affinity terms in order (their order does
// not matter: one must match).
func sortedAffinity(spec *api.Task) []string {
	terms := append([]string(nil), spec.NodeAffinity...)
	sort.Strings(terms)
	return terms
}

// unknownRes is a requested resource no node has ever offered: it is not
// given a dim (tasks must not use up the table of resource names), and the
// option cannot be placed until a node brings it.
type unknownRes struct {
	name resource.Name
	q    int64
}

// computeDevs lists the option's device-backed (extended) dims (and sets
// reqLen).
func (o *Option) computeDevs(dims *resource.Dims) {
	o.reqLen = 0
	for i := range o.req {
		if o.req[i] != 0 {
			o.reqLen = i + 1
		}
	}
	o.devs = o.devs[:0]
	for i := 2; i < dims.Len(); i++ {
		if o.req[i] > 0 && dims.Name(i).IsExtended() && dims.Name(i).Scale() == resource.Milli { // huge pages are bytes, never devices
			o.devs = append(o.devs, devReq{dim: i, milli: o.req[i], class: o.devClass[string(dims.Name(i))]})
		}
	}
}

// resolve gives dims to unknown resources that nodes now offer; it reports
// whether any changed.
func (o *Option) resolve(dims *resource.Dims) bool {
	changed := false
	keep := o.unknown[:0]
	for _, u := range o.unknown {
		if i, ok := dims.Lookup(u.name); ok {
			o.req[i] = u.q
			changed = true
			continue
		}
		keep = append(keep, u)
	}
	o.unknown = keep
	if changed {
		o.computeDevs(dims)
		o.groupsOK = false
	}
	return changed
}

// buildClass converts a validated spec's scheduling fields, given each
// option's vector and unknown resources (from Core.vectorOf).
func buildClass(key string, spec *api.Task, dims *resource.Dims, vecs []resource.Vector, unknown [][]unknownRes) (*class, error) {
	cl := &class{key: key}
	add := func(idx int, v resource.Vector, u []unknownRes, speed float64, dc map[string]string) {
		if speed == 0 {
			speed = 1
		}
		o := Option{Index: idx, Speed: speed, req: v, unknown: u, devClass: maps.Clone(dc)}
		o.computeDevs(dims)
		cl.opts = append(cl.opts, o)
	}
	add(-1, vecs[0], unknown[0], 1, spec.DeviceClasses)
	for i, a := range spec.Alternatives {
		add(i, vecs[i+1], unknown[i+1], a.Speed, a.DeviceClasses)
	}
	for i := range cl.opts {
		cl.optOrder = append(cl.optOrder, i)
	}
	sort.SliceStable(cl.optOrder, func(a, b int) bool {
		return cl.opts[cl.optOrder[a]].Speed > cl.opts[cl.optOrder[b]].Speed
	})
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cl.selector = append(cl.selector, selTerm{key: k, values: strings.Split(spec.NodeSelector[k], "|")})
	}
	tols := append([]string(nil), spec.Tolerations...)
	sort.Strings(tols)
	for _, s := range tols {
		t, err := api.ParseToleration(s)
		if err != nil {
			return nil, errs.Invalid("tolerations", "%v", err)
		}
		cl.tolerations = append(cl.tolerations, t)
	}
	cl.affinityText = sortedAffinity(spec)
	for i, term := range cl.affinityText {
		sel, err := api.ParseSelector(term)
		if err != nil {
			return nil, errs.Invalid("nodeAffinity["+strconv.Itoa(i)+"]", "%v", err)
		}
		cl.affinity = append(cl.affinity, sel)
	}
	return cl, nil
}

// classFor returns the scheduling class of a spec, creating it when new.
// Classes are found by a hash of the options' vectors, selector and
// tolerations, and confirmed by comparing them.
func (ct *classTable) classFor(spec *api.Task, leaf *queueNode) (*class, error) {
	c := ct.c
	var vecs [1 + api.MaxAlternatives]resource.Vector
	var unknown [1 + api.MaxAlternatives][]unknownRes
	if len(spec.Alternatives) > api.MaxAlternatives {
		return nil, errs.Invalid("alternatives", "at most %d alternatives", api.MaxAlternatives)
	}
	var err error
	if unknown[0], err = ct.vectorOf(&vecs[0], "resources", spec.Resources); err != nil {
		return nil, err
	}
	h := uint64(14695981039346656037)
	mix := func(x uint64) {
		h ^= x
		h *= 1099511628211
	}
	mixOpt := func(v *resource.Vector, u []unknownRes) { mix(reqHash(c.dims, v, u)) }
	mixClasses := func(dc map[string]string) {
		var x uint64 // order-independent
		for k, v := range dc {
			x += strHash(k)*31 + strHash(v)
		}
		mix(x)
	}
	mixOpt(&vecs[0], unknown[0])
	mixClasses(spec.DeviceClasses)
	for i, a := range spec.Alternatives {
		if unknown[i+1], err = ct.vectorOf(&vecs[i+1], "alternatives["+strconv.Itoa(i)+"].resources", a.Resources); err != nil {
			return nil, err
		}
		if a.Speed < 0 || math.IsNaN(a.Speed) || math.IsInf(a.Speed, 0) {
			return nil, errs.Invalid("alternatives["+strconv.Itoa(i)+"].speed", "must be a positive number")
		}
		mix(0xa17)
		mixOpt(&vecs[i+1], unknown[i+1])
		mixClasses(a.DeviceClasses)
		mix(math.Float64bits(a.Speed))
	}
	var sel uint64
	for k, v := range spec.NodeSelector {
		sel += strHash(k)*31 + strHash(v)
	}
	mix(sel)
	var tols uint64 // order-independent
	for _, t := range spec.Tolerations {
		tols += strHash(t)
	}
	mix(tols)
	var aff uint64 // order-independent
	for _, t := range spec.NodeAffinity {
		aff += strHash(t)
	}
	mix(aff)
	mix(uint64(leaf.order))
	extra := c.cons.extraKey(spec)
	if extra != "" {
		mix(strHash(extra))
	}
	nopts := 1 + len(spec.Alternatives)
	for _, cl := range ct.byHash[h] {
		if cl.leaf == leaf && cl.extra == extra && cl.matches(spec, vecs[:nopts], unknown[:nopts]) {
			return cl, nil
		}
	}
	key := classKey(spec)
	if extra != "" {
		key += "#" + extra
	}
	cl, err := buildClass(key, spec, c.dims, vecs[:nopts], unknown[:nopts])
	if err != nil {
		return nil, err
	}
	cl.leaf, cl.extra = leaf, extra
	if cl.cons, err = c.cons.compile(spec); err != nil {
		return nil, err
	}
	cl.proto = protoOf(spec)
	cl.scopeEpoch = c.cons.epochOf(spec.Metadata[api.MetaTenant])
	cl.sigEpoch = *cl.scopeEpoch // after compile: its own keys are in its signature
	for _, s := range cl.selector {
		if c.idx.identity[s.key] {
			cl.identity = append(cl.identity, s)
		}
	}
	for _, sel := range cl.affinity {
		for _, k := range sel.Keys() {
			cl.affinityIdentity = cl.affinityIdentity || c.idx.identity[k]
		}
	}
	for _, u := range unknown[:nopts] {
		if len(u) > 0 {
			ct.unresolved = append(ct.unresolved, cl)
			break
		}
	}
	ct.byHash[h] = append(ct.byHash[h], cl)
	return cl, nil
}

// resolveClasses gives dims to the unknown resources of classes once nodes
// offer them (called when the name table grows).
func (ct *classTable) resolveClasses() {
	c := ct.c
	keep := ct.unresolved[:0]
	for _, cl := range ct.unresolved {
		left := false
		for oi := range cl.opts {
			cl.opts[oi].resolve(c.dims)
			left = left || len(cl.opts[oi].unknown) > 0
		}
		if left {
			keep = append(keep, cl)
		}
	}
	ct.unresolved = keep
}

// reqHash hashes an option's request (its vector and its unknown
// resources) by resource name, in any order, so that a resource hashes
// the same known or unknown: interning a new name (resolveClasses turns
// the unknown resources of existing classes into known ones) changes no
// request's hash, and a resolved class is still found by the requests
// equal to it. Only nonzero entries count.
func reqHash(dims *resource.Dims, v *resource.Vector, u []unknownRes) uint64 {
	var x uint64
	for i := 0; i < dims.Len(); i++ {
		if v[i] != 0 {
			x += resHash(dims.Name(i), v[i])
		}
	}
	for _, r := range u {
		x += resHash(r.name, r.q)
	}
	return x
}

// resHash hashes one resource's quantity (mixed, so that sums of
// different pairs rarely collide).
func resHash(n resource.Name, q int64) uint64 {
	h := (strHash(string(n)) ^ uint64(q)) * 0x9e3779b97f4a7c15
	return h ^ h>>32
}

func strHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// vectorOf converts a list into v. Names no node has offered are not
// interned (tasks must not use up the name table): they come back, sorted,
// as unknown resources.
func (ct *classTable) vectorOf(v *resource.Vector, field string, l resource.List) ([]unknownRes, error) {
	c := ct.c
	var unknown []unknownRes
	for k, q := range l {
		if i, ok := c.dims.Lookup(k); ok {
			v[i] = q
			continue
		}
		if err := resource.ValidateName(string(k)); err != nil {
			return nil, errs.Invalid(field+"."+string(k), "%v", err)
		}
		if q > 0 {
			unknown = append(unknown, unknownRes{name: k, q: q})
		}
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].name < unknown[j].name })
	return unknown, nil
}

// matches reports whether spec (with its converted vectors) belongs to cl.
func (cl *class) matches(spec *api.Task, vecs []resource.Vector, unknown [][]unknownRes) bool {
	if len(vecs) != len(cl.opts) {
		return false
	}
	for i := range vecs {
		if vecs[i] != cl.opts[i].req || len(unknown[i]) != len(cl.opts[i].unknown) {
			return false
		}
		dc := spec.DeviceClasses
		if i > 0 {
			dc = spec.Alternatives[i-1].DeviceClasses
		}
		if !maps.Equal(dc, cl.opts[i].devClass) {
			return false
		}
		for j := range unknown[i] {
			if unknown[i][j] != cl.opts[i].unknown[j] {
				return false
			}
		}
		if i > 0 {
			sp := spec.Alternatives[i-1].Speed
			if sp == 0 {
				sp = 1
			}
			if sp != cl.opts[i].Speed {
				return false
			}
		}
	}
	n := 0
	for _, s := range cl.selector {
		v, ok := spec.NodeSelector[s.key]
		if !ok || v != joinValues(s.values) {
			return false
		}
		n++
	}
	if n != len(spec.NodeSelector) || len(spec.Tolerations) != len(cl.tolerations) || len(spec.NodeAffinity) != len(cl.affinityText) {
		return false
	}
	if len(cl.affinityText) > 0 && !slices.Equal(sortedAffinity(spec), cl.affinityText) {
		return false
	}
	// Tolerations match in any order (cl.tolerations are sorted by text).
	tols := append([]string(nil), spec.Tolerations...)
	sort.Strings(tols)
	for i, s := range tols {
		t, err := api.ParseToleration(s)
		if err != nil || t != cl.tolerations[i] {
			return false
		}
	}
	return true
}

func joinValues(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	s := vs[0]
	for _, v := range vs[1:] {
		s += "|" + v
	}
	return s
}

// runtimeClassFor finds the runtime-prediction class of a spec.
func (ct *classTable) runtimeClassFor(spec *api.Task, cls *class) *runtimeClass {
	var m map[string]*runtimeClass
	var k string
	switch {
	case spec.Metadata["class"] != "":
		m, k = ct.rtByMeta, spec.Metadata["class"]
	case spec.Name != "":
		m, k = ct.rtByName, spec.Name
	default:
		rc := ct.rtByClass[cls]
		if rc == nil {
			rc = &runtimeClass{key: cls.key}
			ct.rtByClass[cls] = rc
		}
		return rc
	}
	rc := m[k]
	if rc == nil {
		rc = &runtimeClass{key: k}
		m[k] = rc
	}
	return rc
}
