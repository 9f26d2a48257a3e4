package core

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
)

// Placement constraints in the property tests: what drawTaskParams adds to
// a spec (consParams), and an oracle of the checker's own that judges
// placements by them. The oracle never calls the core's constraint code:
// it recomputes every rule from the specs the runner submitted, the
// placements the outputs report and the nodes' labels (Node.EachLabel),
// as kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread
// define the rules (and testdata/scenarios/constraints shows them).
//
// What it checks:
//   - after every input (final state): no two tasks on one node hold
//     conflicting host ports, and no task sits on a node beside a task its
//     required anti-affinity on hetsched.io/node selects;
//   - every placement, at the time it was made (the state before the
//     input plus the placements before it in the output): host ports,
//     the task's own required anti-affinity, the anti-affinity of the
//     tasks there that select it (symmetric), required affinity and
//     spread (whenUnsatisfiable wait). Tasks the input may have removed
//     before the placement (a transition away from scheduled or running
//     in the same output; the output does not order transitions against
//     placements) are "maybe" present: a rule is broken only if it is
//     broken whichever of them were still there, so the check is exact
//     for inputs that remove nothing and sound for the others;
//   - liveness (fitsNow, for stranded): a pending task counts as fitting
//     a node only where these rules allow it as things are.
//
// What it does not check: preferences (preferred anti-affinity is drawn,
// only to exercise the code); affinity and spread after the placement
// (later removals may break them, as in Kubernetes); spread's minDomains,
// node policies and "place" (not drawn); selectors' Match (not drawn).

// Constraint choices of a drawn task (consParams.Kind).
const (
	consNone      = iota
	consLabel     // metadata app=<app> only
	consAntiSelf  // required anti-affinity on hetsched.io/node with app=<app>, labelled
	consAntiOther // required anti-affinity on hetsched.io/node with the other app, unlabelled
	consAffSelf   // required affinity on zone with app=<app>, labelled
	consAffOther  // required affinity on zone with the other app, unlabelled
	consSpread    // spread on zone, maxSkew 1, wait, over app=<app>, labelled
	consPort      // one host port, labelled
	consPrefAnti  // preferred anti-affinity (50) on hetsched.io/node with app=<app>, labelled
	numConsKinds
)

const (
	zoneKey    = "zone"
	propTenant = "t1"
)

var (
	propApps  = []string{"a", "b"}
	propPorts = []api.HostPort{{Port: 80}, {Port: 81}, {Port: 80, Protocol: "TCP"}, {Port: 80, Protocol: "UDP"},
		{Port: 80, HostIP: "10.0.0.1"}, {Port: 80, HostIP: "10.0.0.2"}, {Port: 81, HostIP: "0.0.0.0"}}
)

// consParams are a task's placement constraints and labels.
type consParams struct {
	Kind   int
	App    int  // index into propApps
	Tenant bool // labelled hetsched.io/tenant=t1: its selectors see only t1's tasks
	Port   int  // index into propPorts
}

func drawConsParams(t *rapid.T) consParams {
	p := consParams{Kind: rapid.IntRange(1, numConsKinds-1).Draw(t, "cons")}
	p.App = rapid.IntRange(0, len(propApps)-1).Draw(t, "app")
	p.Tenant = rapid.IntRange(0, 5).Draw(t, "tenant") == 0
	if p.Kind == consPort {
		// Mostly 80 and 81 on every address, now and then another
		// protocol or one address.
		if p.Port = rapid.IntRange(0, 5).Draw(t, "port"); p.Port > 1 {
			p.Port = rapid.IntRange(2, len(propPorts)-1).Draw(t, "portKind")
		}
	}
	return p
}

// apply writes p into spec.
func (p consParams) apply(spec *api.Task) {
	if p.Kind == consNone {
		return
	}
	own, other := propApps[p.App], propApps[1-p.App]
	labels := map[string]string{"app": own}
	if p.Tenant {
		labels[api.MetaTenant] = propTenant
	}
	sel := func(app string) api.TaskSelector { return api.TaskSelector{Selector: map[string]string{"app": app}} }
	switch p.Kind {
	case consAntiSelf:
		spec.AntiAffinity = []api.AffinityTerm{{TaskSelector: sel(own), TopologyKey: NodeNameLabel, Required: true}}
	case consAntiOther:
		delete(labels, "app")
		spec.AntiAffinity = []api.AffinityTerm{{TaskSelector: sel(other), TopologyKey: NodeNameLabel, Required: true}}
	case consAffSelf:
		spec.Affinity = []api.AffinityTerm{{TaskSelector: sel(own), TopologyKey: zoneKey, Required: true}}
	case consAffOther:
		delete(labels, "app")
		spec.Affinity = []api.AffinityTerm{{TaskSelector: sel(other), TopologyKey: zoneKey, Required: true}}
	case consSpread:
		spec.Spread = []api.Spread{{TaskSelector: sel(own), TopologyKey: zoneKey, MaxSkew: 1, WhenUnsatisfiable: api.SpreadWait}}
	case consPort:
		spec.HostPorts = []api.HostPort{propPorts[p.Port]}
	case consPrefAnti:
		spec.AntiAffinity = []api.AffinityTerm{{TaskSelector: sel(own), TopologyKey: NodeNameLabel, Weight: 50}}
	}
	if len(labels) > 0 {
		spec.Metadata = labels
	}
}

// cloneConstraints deep-copies s's labels and constraints into c.
func cloneConstraints(c, s *api.Task) {
	c.Metadata = cloneLabels(s.Metadata)
	c.HostPorts = append([]api.HostPort(nil), s.HostPorts...)
	cloneSel := func(ts api.TaskSelector) api.TaskSelector {
		return api.TaskSelector{Selector: cloneLabels(ts.Selector), Match: ts.Match}
	}
	cloneTerms := func(l []api.AffinityTerm) []api.AffinityTerm {
		var out []api.AffinityTerm
		for _, a := range l {
			a.TaskSelector = cloneSel(a.TaskSelector)
			out = append(out, a)
		}
		return out
	}
	c.Affinity, c.AntiAffinity = cloneTerms(s.Affinity), cloneTerms(s.AntiAffinity)
	c.Spread = nil
	for _, sp := range s.Spread {
		sp.TaskSelector = cloneSel(sp.TaskSelector)
		c.Spread = append(c.Spread, sp)
	}
	c.PreferredNodeAffinity = append([]api.NodePreference(nil), s.PreferredNodeAffinity...)
}

func cloneLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

// The oracle.

// consEntry is a placed task as the oracle sees it: its spec, its node and
// the labels that node had.
type consEntry struct {
	id     string
	spec   *api.Task
	node   string
	labels map[string]string
}

// domain is the entry's domain of topology key key: the node itself for
// hetsched.io/node, else the node's label (none without it).
func (e *consEntry) domain(key string) (string, bool) {
	if key == NodeNameLabel {
		return e.node, true
	}
	v, ok := e.labels[key]
	return v, ok
}

// consSnapshot is what the oracle remembers of the state after an input.
type consSnapshot struct {
	where  map[string]string            // placed task -> node name
	labels map[string]map[string]string // node name -> labels
}

func nodeLabels(n *Node) map[string]string {
	m := map[string]string{}
	n.EachLabel(func(k, v string) { m[k] = v })
	return m
}

// selects reports whether the selector ts of owner's term matches task x:
// the same tenant, and every label of the selector.
func selects(owner *api.Task, ts api.TaskSelector, x *api.Task) bool {
	if owner.Metadata[api.MetaTenant] != x.Metadata[api.MetaTenant] {
		return false
	}
	for k, v := range ts.Selector {
		if got, ok := x.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// admits reports whether a node selector (values "a|b") admits labels.
func admits(sel map[string]string, labels map[string]string) bool {
	for k, v := range sel {
		got, ok := labels[k]
		if !ok || !strings.Contains("|"+v+"|", "|"+got+"|") {
			return false
		}
	}
	return true
}

// portsClash reports whether two tasks' host ports cannot share a node:
// the same port and protocol (TCP when none), and one of them on every
// address or both on the same.
func portsClash(a, b []api.HostPort) bool {
	proto := func(p api.HostPort) string {
		if p.Protocol == "" {
			return "TCP"
		}
		return p.Protocol
	}
	every := func(p api.HostPort) bool { return p.HostIP == "" || p.HostIP == "0.0.0.0" || p.HostIP == "::" }
	for _, p := range a {
		for _, q := range b {
			if p.Port == q.Port && proto(p) == proto(q) && (every(p) || every(q) || p.HostIP == q.HostIP) {
				return true
			}
		}
	}
	return false
}

// placedEntries lists the tasks placed now, in submission order.
func (k *checker) placedEntries() []consEntry {
	c := k.r.c
	labels := map[*Node]map[string]string{}
	var out []consEntry
	for _, id := range k.r.ids {
		tk, _ := c.Task(id)
		if s := tk.State(); (s != Scheduled && s != Running) || tk.Node() == nil {
			continue
		}
		n := tk.Node()
		if labels[n] == nil {
			labels[n] = nodeLabels(n)
		}
		out = append(out, consEntry{id: id, spec: k.r.specs[id], node: n.Name(), labels: labels[n]})
	}
	return out
}

// currentNodes lists the nodes as entries without a task.
func (k *checker) currentNodes() []consEntry {
	var out []consEntry
	for _, n := range k.r.c.Nodes() {
		out = append(out, consEntry{node: n.Name(), labels: nodeLabels(n)})
	}
	return out
}

// consAllows reports why the rules keep x off node at (with the labels
// it has), if they do. sure are the tasks certainly in place then, maybe
// those that may be (a superset of sure); nodes are the cluster's nodes.
func consAllows(x *api.Task, at consEntry, sure, maybe, nodes []consEntry) error {
	for i := range sure {
		e := &sure[i]
		if e.id == x.ID {
			continue
		}
		if e.node == at.node && portsClash(x.HostPorts, e.spec.HostPorts) {
			return fmt.Errorf("host port %v clashes with %s's %v", x.HostPorts, e.id, e.spec.HostPorts)
		}
		for _, a := range x.AntiAffinity {
			if d, ok := at.domain(a.TopologyKey); a.Required && ok && selects(x, a.TaskSelector, e.spec) {
				if ed, ok := e.domain(a.TopologyKey); ok && ed == d {
					return fmt.Errorf("anti-affinity with %v in %s: %s is in %s", a.Selector, a.TopologyKey, e.id, d)
				}
			}
		}
		for _, a := range e.spec.AntiAffinity {
			if d, ok := at.domain(a.TopologyKey); a.Required && ok && selects(e.spec, a.TaskSelector, x) {
				if ed, ok := e.domain(a.TopologyKey); ok && ed == d {
					return fmt.Errorf("%s's anti-affinity with %v in %s selects it (both in %s)", e.id, a.Selector, a.TopologyKey, d)
				}
			}
		}
	}
	if err := affinityAllows(x, at, sure, maybe); err != nil {
		return err
	}
	return spreadAllows(x, at, sure, maybe, nodes)
}

// affinityAllows: each required affinity term needs a task it selects in
// the node's domain; when none does, the task may still go if it
// matches all its terms and no task they select is placed on a node with
// the term's key (the first of a group, as kube-scheduler allows it). A
// node without a term's key never fits.
func affinityAllows(x *api.Task, at consEntry, sure, maybe []consEntry) error {
	var req []api.AffinityTerm
	for _, a := range x.Affinity {
		if a.Required {
			req = append(req, a)
		}
	}
	if len(req) == 0 {
		return nil
	}
	found, self := true, true
	for _, a := range req {
		d, ok := at.domain(a.TopologyKey)
		if !ok {
			return fmt.Errorf("affinity on %s, the node has no %s", a.TopologyKey, a.TopologyKey)
		}
		self = self && selects(x, a.TaskSelector, x)
		if !anyIn(maybe, x.ID, func(e *consEntry) bool {
			ed, ok := e.domain(a.TopologyKey)
			return ok && ed == d && selects(x, a.TaskSelector, e.spec)
		}) {
			found = false
		}
	}
	if found {
		return nil
	}
	if !self {
		return fmt.Errorf("affinity with %v: no task of it in the node's domain", req[0].Selector)
	}
	if anyIn(sure, x.ID, func(e *consEntry) bool {
		for _, a := range req {
			if _, ok := e.domain(a.TopologyKey); ok && selects(x, a.TaskSelector, e.spec) {
				return true
			}
		}
		return false
	}) {
		return fmt.Errorf("self-affinity with %v: none in the node's domain, but some elsewhere", req[0].Selector)
	}
	return nil
}

func anyIn(es []consEntry, skip string, f func(*consEntry) bool) bool {
	for i := range es {
		if es[i].id != skip && f(&es[i]) {
			return true
		}
	}
	return false
}

// spreadAllows: for each spread that waits, the tasks it selects in the
// node's domain, plus one if x matches itself, exceed the fewest in an
// eligible domain (one of a node x's node selector admits; 0 if one holds
// none) by at most maxSkew; only tasks on eligible nodes count. A node
// without the key never fits. With sure and maybe apart, the count is the
// least it can have been and the fewest the most.
func spreadAllows(x *api.Task, at consEntry, sure, maybe, nodes []consEntry) error {
	for _, sp := range x.Spread {
		if sp.WhenUnsatisfiable == api.SpreadPlace {
			continue
		}
		d, ok := at.domain(sp.TopologyKey)
		if !ok {
			return fmt.Errorf("spread on %s, the node has no %s", sp.TopologyKey, sp.TopologyKey)
		}
		eligible := map[string]bool{}
		for i := range nodes {
			if dom, ok := nodes[i].domain(sp.TopologyKey); ok && admits(x.NodeSelector, nodes[i].labels) {
				eligible[dom] = true
			}
		}
		count := func(es []consEntry) map[string]int {
			m := map[string]int{}
			for i := range es {
				e := &es[i]
				dom, ok := e.domain(sp.TopologyKey)
				if e.id != x.ID && ok && eligible[dom] && admits(x.NodeSelector, e.labels) && selects(x, sp.TaskSelector, e.spec) {
					m[dom]++
				}
			}
			return m
		}
		low, high := count(sure), count(maybe)
		fewest, first := 0, true
		for dom := range eligible {
			if n := high[dom]; first || n < fewest {
				fewest, first = n, false
			}
		}
		self := 0
		if selects(x, sp.TaskSelector, x) {
			self = 1
		}
		if low[d]+self-fewest > int(sp.MaxSkew) {
			return fmt.Errorf("spread of %v on %s: %d in %s (self %d), fewest %d, maxSkew %d (counts %v, eligible %v)",
				sp.Selector, sp.TopologyKey, low[d], d, self, fewest, sp.MaxSkew, high, sortedSet(eligible))
		}
	}
	return nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkConstraintRules checks the placements of out by the rules (at
// the time each was made), then the final state's host ports and
// anti-affinity on nodes, and remembers the state for the next input.
func (k *checker) checkConstraintRules(out *Output) error {
	if err := k.checkPlacementRules(out); err != nil {
		return err
	}
	placed := k.placedEntries()
	byNode := map[string][]consEntry{}
	for _, e := range placed {
		byNode[e.node] = append(byNode[e.node], e)
	}
	for _, n := range k.r.c.Nodes() {
		on := byNode[n.Name()]
		for i := range on {
			for j := i + 1; j < len(on); j++ {
				if err := sameNodeClash(&on[i], &on[j]); err != nil {
					return fmt.Errorf("node %s: %v", n.Name(), err)
				}
			}
		}
	}
	k.snap = consSnapshot{where: map[string]string{}, labels: map[string]map[string]string{}}
	for _, e := range placed {
		k.snap.where[e.id] = e.node
	}
	for _, n := range k.r.c.Nodes() {
		k.snap.labels[n.Name()] = nodeLabels(n)
	}
	return nil
}

// sameNodeClash reports why a and b may not share their node, if they may
// not: their host ports clash, or a required anti-affinity on
// hetsched.io/node of one selects the other.
func sameNodeClash(a, b *consEntry) error {
	if portsClash(a.spec.HostPorts, b.spec.HostPorts) {
		return fmt.Errorf("%s and %s hold host ports %v and %v", a.id, b.id, a.spec.HostPorts, b.spec.HostPorts)
	}
	for _, p := range [][2]*consEntry{{a, b}, {b, a}} {
		for _, t := range p[0].spec.AntiAffinity {
			if t.Required && t.TopologyKey == NodeNameLabel && selects(p[0].spec, t.TaskSelector, p[1].spec) {
				return fmt.Errorf("%s's anti-affinity with %v selects %s beside it", p[0].id, t.Selector, p[1].id)
			}
		}
	}
	return nil
}

// checkPlacementRules checks each placement of out by the rules as they
// stood when it was made: the tasks placed after the last input, less
// those that this input may have removed before it (maybe present, not
// sure), plus the placements before it in out. A task removed by this
// input (a transition from scheduled or running to anything but running)
// is only maybe present; a node relabelled by this input (before any
// placement) gives its tasks both its old and its new labels among the
// maybe present.
func (k *checker) checkPlacementRules(out *Output) error {
	if len(out.Placements) == 0 {
		return nil
	}
	c := k.r.c
	removed := map[string]bool{}
	for _, tr := range out.Transitions {
		if (tr.From == Scheduled || tr.From == Running) && tr.To != Running {
			removed[tr.Task] = true
		}
	}
	nodes := k.currentNodes()
	labelsNow := map[string]map[string]string{}
	for _, n := range nodes {
		labelsNow[n.node] = n.labels
	}
	var sure, maybe []consEntry
	for _, id := range k.r.ids {
		node, ok := k.snap.where[id]
		if !ok {
			continue
		}
		e := consEntry{id: id, spec: k.r.specs[id], node: node, labels: k.snap.labels[node]}
		maybe = append(maybe, e)
		now, exists := labelsNow[node]
		if exists && !maps.Equal(now, e.labels) {
			e.labels = now
			maybe = append(maybe, e)
		}
		if exists && !removed[id] {
			sure = append(sure, e)
		}
	}
	for _, p := range out.Placements {
		spec := k.r.specs[p.Task]
		e := consEntry{id: p.Task, spec: spec, node: p.Node, labels: labelsNow[p.Node]}
		if _, ok := c.Node(p.Node); !ok {
			e.labels = k.r.nodes[p.Node].Labels // checkPlacement reports the unknown node
		}
		if err := consAllows(spec, e, sure, maybe, nodes); err != nil {
			return fmt.Errorf("placement of %s on %s breaks a placement constraint: %v", p.Task, p.Node, err)
		}
		maybe = append(maybe, e)
		if !removed[p.Task] {
			sure = append(sure, e)
		}
	}
	return nil
}

// consFits reports whether the rules let spec onto n as things are (for
// fitsNow); placed and nodes are the state's entries.
func consFits(spec *api.Task, n *Node, placed, nodes []consEntry) bool {
	at := consEntry{id: spec.ID, node: n.Name(), labels: nodeLabels(n)}
	return consAllows(spec, at, placed, placed, nodes) == nil
}
