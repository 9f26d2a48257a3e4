package core

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Placement constraints (API.md "Placement constraints", as Kubernetes'
// NodePorts, InterPodAffinity, PodTopologySpread and the preferred halves
// of NodeAffinity and TaintToleration define them). The state lives in a
// constraintIndex; the filter and the preference are in
// plugins_constraints.go.
//
// Glossary (see also package api's constraints.go):
//   - term: a selector over placed tasks' labels within one scope (a
//     tenant: the api.MetaTenant label), counted per domain of one
//     topology key (a node label). Classes share terms by their text.
//   - count: the placed tasks a term matches, per domain and per node.
//   - owners: the placed tasks that hold a term as a required
//     anti-affinity, per domain: a task the term matches may not join
//     them (the rule is symmetric, as kube-scheduler's).
//   - self: whether a class's tasks match one of its own terms (their
//     labels for the keys the class's selectors read are part of the
//     class: labelSignature).
//
// What a placement costs: nothing for a task of a scope without terms;
// otherwise one lookup per label of the task (terms are indexed by one
// value they require) plus a match per term found, and one per term of
// its scope that requires no value. No walk over tasks or nodes.

// scopedPair is a label of a task of one scope, as terms are indexed.
type scopedPair struct{ scope, key, value string }

// term is one selector counted in the domains of one topology key.
type term struct {
	text    string
	desc    string // the selector, for reasons
	scope   string
	key     string
	sel     api.Selector
	count   map[string]int32 // domain -> placed tasks it matches
	byNode  map[*Node]int32  // node -> placed tasks it matches
	total   int32
	owners  map[string]int32 // domain -> placed tasks holding it as required anti-affinity
	nOwners int32
	// blocked are class queues waiting on the term's counts (a required
	// affinity nothing satisfies yet, a spread at its skew): any change
	// wakes them.
	blocked []blockRef
}

// consTerm is a class's use of a term.
type consTerm struct {
	t      *term
	weight int32 // a preference's weight; 0 for a required term
	self   bool  // the class's tasks match the term's selector
}

// spreadTerm is a class's spread constraint.
type spreadTerm struct {
	t          *term
	maxSkew    int32
	minDomains int32
	wait       bool // a filter; otherwise a preference
	honorAff   bool // only nodes the class's selector and affinity admit count
	honorTaint bool // only nodes whose taints the class tolerates count
	self       bool
	// domains are the eligible domains (cached against the node index's
	// members count: every node added, removed or replaced): the nodes
	// that count, by domain.
	domains map[string]int32
	domVer  uint64
	domOK   bool
}

// nodePref is a preferred node affinity term.
type nodePref struct {
	sel    api.Selector
	weight int32
}

// classCons is a class's compiled placement constraints.
type classCons struct {
	ports             []api.HostPort
	affinity, anti    []consTerm // required
	prefAff, prefAnti []consTerm // preferred
	spread            []*spreadTerm
	prefs             []nodePref
	// selfAffinity: the class's tasks match every required affinity term
	// (the first of a group that must run together may start anywhere).
	selfAffinity bool
}

// terms lists every term the class reads, for blocking on them.
func (cc *classCons) terms() []*term {
	var out []*term
	for _, l := range [][]consTerm{cc.affinity, cc.anti} {
		for _, ct := range l {
			out = append(out, ct.t)
		}
	}
	for _, sp := range cc.spread {
		out = append(out, sp.t)
	}
	return out
}

// constraintIndex is the state of the placement constraints of one core.
type constraintIndex struct {
	c      *Core
	terms  map[string]*term
	byPair map[scopedPair][]*term
	scan   map[string][]*term // by scope: terms that require no value
	// antiKeys are the label keys that required anti-affinity terms read,
	// by scope: a task's values for them are part of its class, since
	// those terms may keep it from nodes (labelSignature).
	antiKeys map[string][]string
	// epochs count, per scope, the keys added to antiKeys: a class made at
	// an older epoch is stale (reclass.go); stale says some may be.
	epochs map[string]*uint64
	stale  bool
	owned  int                      // terms with owners
	ports  map[*Node][]api.HostPort // host ports held, one entry per task's port
	gen    uint64                   // bumped by every change of counts or owners
	att    attempt                  // the current attempt's view
}

// attempt caches what one placement attempt of a task reads of the
// counts: the other tasks' anti-affinity terms it matches and its
// spread's eligible counts. It is valid while t and gen are unchanged.
type attempt struct {
	t      *Task
	gen    uint64
	ver    uint64
	sym    []*term
	spread []spreadCounts
}

// spreadCounts are one spread constraint's counts for an attempt: per
// eligible domain, and the smallest of them.
type spreadCounts struct {
	count map[string]int32
	min   int32
}

func newConstraintIndex(c *Core) constraintIndex {
	return constraintIndex{c: c, terms: map[string]*term{}, byPair: map[scopedPair][]*term{}, scan: map[string][]*term{},
		antiKeys: map[string][]string{}, ports: map[*Node][]api.HostPort{}, epochs: map[string]*uint64{}}
}

// extraKey is the part of a task's scheduling class beyond its options,
// selectors and tolerations: its priority value and preemption policy
// (which decide what it may evict), its placement constraints (host
// ports, affinity, spread, node preferences) in a canonical text, and the
// labels those rules read (labelSignature); "" for a task with none of
// them, the common case, which costs nothing.
func (ci *constraintIndex) extraKey(spec *api.Task) string {
	sig := ci.labelSignature(spec)
	if spec.PriorityValue == 0 && spec.PreemptionPolicy == "" && !spec.HasConstraints() && sig == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("v=")
	b.WriteString(strconv.FormatInt(int64(spec.PriorityValue), 10))
	b.WriteString(";p=")
	b.WriteString(spec.PreemptionPolicy)
	if spec.HasConstraints() {
		// encoding/json writes maps sorted by key: one text per meaning
		// (lists keep their order, as the task gave them).
		j, _ := json.Marshal([]any{spec.HostPorts, spec.Affinity, spec.AntiAffinity, spec.Spread, spec.PreferredNodeAffinity})
		b.WriteString(";c=")
		b.Write(j)
	}
	b.WriteString(sig)
	return b.String()
}

// labelSignature is the task's scope and its values of the label keys
// that decide its placement: those its own selectors read (whether it
// matches its own terms) and those of its scope's required anti-affinity
// terms (whether other tasks' anti-affinity keeps it away). Tasks that
// differ there are not interchangeable. A key that a term reads only
// from a later task on is not in the classes made before it: such a
// class may hold tasks an anti-affinity treats apart, which can delay
// its other tasks (until the next capacity change retries it), never
// misplace one (the filter checks each task's own labels).
func (ci *constraintIndex) labelSignature(spec *api.Task) string {
	if len(ci.antiKeys) == 0 && !spec.HasConstraints() {
		return ""
	}
	scope := spec.Metadata[api.MetaTenant]
	keys := ci.antiKeys[scope]
	if !spec.HasConstraints() && len(keys) == 0 {
		return ""
	}
	keys = slices.Clone(keys)
	add := func(ts api.TaskSelector) {
		keys = append(keys, slices.Collect(maps.Keys(ts.Selector))...)
		if sel, err := api.ParseSelector(ts.Match); err == nil {
			keys = append(keys, sel.Keys()...)
		}
	}
	for _, l := range [][]api.AffinityTerm{spec.Affinity, spec.AntiAffinity} {
		for _, a := range l {
			add(a.TaskSelector)
		}
	}
	for _, s := range spec.Spread {
		add(s.TaskSelector)
	}
	sort.Strings(keys)
	keys = slices.Compact(keys)
	var b strings.Builder
	b.WriteString(";s=")
	b.WriteString(scope)
	for _, k := range keys {
		if v, ok := spec.Metadata[k]; ok {
			b.WriteString(";")
			b.WriteString(k)
			b.WriteString("=")
			b.WriteString(v)
		}
	}
	return b.String()
}

// compile builds the class constraints of spec (nil when it has none),
// registering its terms.
func (ci *constraintIndex) compile(spec *api.Task) (*classCons, error) {
	if !spec.HasConstraints() {
		return nil, nil
	}
	cc := &classCons{ports: slices.Clone(spec.HostPorts)}
	scope := spec.Metadata[api.MetaTenant]
	for i, p := range spec.PreferredNodeAffinity {
		sel, err := api.ParseSelector(p.Selector)
		if err != nil {
			return nil, errs.Invalid("preferredNodeAffinity["+strconv.Itoa(i)+"].selector", "%v", err)
		}
		cc.prefs = append(cc.prefs, nodePref{sel: sel, weight: p.Weight})
	}
	for _, l := range []struct {
		field     string
		terms     []api.AffinityTerm
		req, pref *[]consTerm
		anti      bool
	}{{"affinity", spec.Affinity, &cc.affinity, &cc.prefAff, false}, {"antiAffinity", spec.AntiAffinity, &cc.anti, &cc.prefAnti, true}} {
		for i, a := range l.terms {
			t, self, err := ci.termFor(l.field+"["+strconv.Itoa(i)+"]", scope, a.TopologyKey, a.TaskSelector, spec.Metadata)
			if err != nil {
				return nil, err
			}
			if !a.Required {
				*l.pref = append(*l.pref, consTerm{t: t, weight: a.Weight, self: self})
				continue
			}
			*l.req = append(*l.req, consTerm{t: t, self: self})
			if l.anti {
				ci.addAntiKeys(scope, t.sel.Keys())
			}
		}
	}
	cc.selfAffinity = len(cc.affinity) > 0
	for _, ct := range cc.affinity {
		cc.selfAffinity = cc.selfAffinity && ct.self
	}
	for i, s := range spec.Spread {
		t, self, err := ci.termFor("spread["+strconv.Itoa(i)+"]", scope, s.TopologyKey, s.TaskSelector, spec.Metadata)
		if err != nil {
			return nil, err
		}
		cc.spread = append(cc.spread, &spreadTerm{t: t, maxSkew: s.MaxSkew, minDomains: s.MinDomains, self: self,
			wait: s.WhenUnsatisfiable != api.SpreadPlace, honorAff: s.NodeAffinityPolicy != api.PolicyIgnore,
			honorTaint: s.NodeTaintsPolicy == api.PolicyHonor})
	}
	return cc, nil
}

// termFor finds or makes the term of a selector in scope over key, and
// says whether labels (the class's) match it.
func (ci *constraintIndex) termFor(field, scope, key string, ts api.TaskSelector, labels map[string]string) (*term, bool, error) {
	sel, err := ts.Compile()
	if err != nil {
		return nil, false, errs.Invalid(field+".match", "%v", err)
	}
	canon, _ := json.Marshal(ts)
	text := scope + "\x00" + key + "\x00" + string(canon)
	t := ci.terms[text]
	if t == nil {
		t = &term{text: text, desc: describeSelector(ts), scope: scope, key: key, sel: sel, count: map[string]int32{}, byNode: map[*Node]int32{}, owners: map[string]int32{}}
		ci.terms[text] = t
		if k, vs, ok := sel.Equality(); ok {
			for _, v := range vs {
				p := scopedPair{scope, k, v}
				ci.byPair[p] = append(ci.byPair[p], t)
			}
		} else {
			ci.scan[scope] = append(ci.scan[scope], t)
		}
		// Tasks placed before the term existed count at once.
		for _, n := range ci.c.idx.order {
			for _, x := range n.tasks {
				if ci.matches(t, x) {
					t.add(n, 1)
				}
			}
		}
	}
	return t, sel.MatchesMap(labels), nil
}

// describeSelector writes a selector as a reason shows it: "app=web,
// tier in (a,b)"; "any task" for the empty one.
func describeSelector(ts api.TaskSelector) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ts.Selector)) {
		parts = append(parts, k+"="+ts.Selector[k])
	}
	if ts.Match != "" {
		parts = append(parts, ts.Match)
	}
	if len(parts) == 0 {
		return "any task"
	}
	return strings.Join(parts, ", ")
}

// addAntiKeys records keys that a required anti-affinity term reads.
func (ci *constraintIndex) addAntiKeys(scope string, keys []string) {
	for _, k := range keys {
		if !slices.Contains(ci.antiKeys[scope], k) {
			ci.antiKeys[scope] = append(ci.antiKeys[scope], k)
			*ci.epochOf(scope)++
			ci.stale = true
		}
	}
}

// epochOf is scope's epoch counter.
func (ci *constraintIndex) epochOf(scope string) *uint64 {
	e := ci.epochs[scope]
	if e == nil {
		e = new(uint64)
		ci.epochs[scope] = e
	}
	return e
}

// matches reports whether term t counts task x.
func (ci *constraintIndex) matches(t *term, x *Task) bool {
	return x.labels[api.MetaTenant] == t.scope && t.sel.MatchesMap(x.labels)
}

// reserve counts placed task t on n (sign 1) or takes it away (sign -1):
// the terms its labels match, the anti-affinity terms it holds, its host
// ports. Every placement and release calls it, and the journal's undo.
func (ci *constraintIndex) reserve(t *Task, n *Node, sign int32) {
	cc := t.cls.cons
	if len(ci.terms) == 0 && cc == nil {
		return
	}
	scope := t.labels[api.MetaTenant]
	if len(ci.terms) > 0 {
		for k, v := range t.labels {
			for _, tm := range ci.byPair[scopedPair{scope, k, v}] {
				if tm.sel.MatchesMap(t.labels) {
					ci.change(tm, n, sign)
				}
			}
		}
		for _, tm := range ci.scan[scope] {
			if tm.sel.MatchesMap(t.labels) {
				ci.change(tm, n, sign)
			}
		}
	}
	if cc == nil {
		return
	}
	for _, ct := range cc.anti {
		if dom, ok := n.labels[ct.t.key]; ok {
			was := ct.t.nOwners
			bump(ct.t.owners, dom, sign)
			ct.t.nOwners += sign
			switch {
			case was == 0 && ct.t.nOwners > 0:
				ci.owned++
			case was > 0 && ct.t.nOwners == 0:
				ci.owned--
			}
			ci.gen++
		}
	}
	if len(cc.ports) > 0 {
		ci.usePorts(n, cc.ports, sign)
	}
}

// change counts a matching task on n in tm and wakes what waits on tm;
// under a checkpoint the wake waits for the keep (journal.go).
func (ci *constraintIndex) change(tm *term, n *Node, sign int32) {
	tm.add(n, sign)
	ci.gen++
	if len(tm.blocked) == 0 {
		return
	}
	if ci.c.jr.journaling() {
		ci.c.jr.woken = append(ci.c.jr.woken, tm)
		return
	}
	ci.wakeTerm(tm)
}

// wakeTerm wakes the class queues blocked on tm.
func (ci *constraintIndex) wakeTerm(tm *term) {
	for _, r := range tm.blocked {
		if r.q.blocked && r.q.gen == r.gen {
			ci.c.wk.unblock(r.q)
		}
	}
	clear(tm.blocked)
	tm.blocked = tm.blocked[:0]
}

// add counts a matching task on n (sign -1 takes it away).
func (tm *term) add(n *Node, sign int32) {
	bump(tm.byNode, n, sign)
	tm.total += sign
	if dom, ok := n.labels[tm.key]; ok {
		bump(tm.count, dom, sign)
	}
}

func bump[K comparable](m map[K]int32, k K, sign int32) {
	if v := m[k] + sign; v != 0 {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// usePorts adds (sign 1) or removes one holding of each of ports on n.
func (ci *constraintIndex) usePorts(n *Node, ports []api.HostPort, sign int32) {
	held := ci.ports[n]
	for _, p := range ports {
		if sign > 0 {
			held = append(held, p)
			continue
		}
		if i := slices.Index(held, p); i >= 0 {
			held = slices.Delete(held, i, i+1)
		}
	}
	if len(held) == 0 {
		delete(ci.ports, n)
	} else {
		ci.ports[n] = held
	}
	ci.gen++
}

// domainsChanged wakes the class queues waiting on a term whose topology
// key n carried, as n leaves or changes its labels or taints: a domain may
// go with it, and with it the smallest count a spread compares against
// (n frees no capacity, so nothing else wakes them; kube-scheduler
// retries on a node's deletion and update alike).
func (ci *constraintIndex) domainsChanged(n *Node) {
	var wake []*term
	for _, tm := range ci.terms {
		if _, ok := n.labels[tm.key]; ok && len(tm.blocked) > 0 {
			wake = append(wake, tm)
		}
	}
	slices.SortFunc(wake, func(a, b *term) int { return strings.Compare(a.text, b.text) })
	for _, tm := range wake {
		ci.wakeTerm(tm)
	}
}

// affinityNeeds reports whether one of t's required affinity terms
// matches x. Preemption's what-ifs do not take victims out of the
// constraints' counts (a victim's host ports and anti-affinity stay held:
// conservative), which for affinity is not conservative: t would fit by
// the task it evicts, find it gone, and evict again when it came back.
// So t never evicts such a task.
func (ci *constraintIndex) affinityNeeds(t, x *Task) bool {
	cc := t.cls.cons
	if cc == nil {
		return false
	}
	for _, ct := range cc.affinity {
		if ci.matches(ct.t, x) {
			return true
		}
	}
	return false
}

// blockOn makes class queue ref wait on the terms of cc too: a change of
// their counts may let it fit where no capacity change would.
func (ci *constraintIndex) blockOn(cc *classCons, ref blockRef) {
	for _, t := range cc.terms() {
		t.blocked = appendRef(t.blocked, ref)
	}
}
