package core

import (
	"strconv"

	"github.com/hetsched/hetsched/internal/api"
)

// The placement constraints as a filter and a preference (constraints.go
// holds their state). The filter's verdicts, as kube-scheduler's plugins
// give them: a host port taken, another task's anti-affinity, one's own
// anti-affinity and a spread's skew "do not fit now" (evicting tasks may
// help); a node without a topology key a required affinity or a spread
// reads, and an affinity no task satisfies, "can never fit" there.

// Reasons (short, groupable).
var (
	missingKeyReason = "node lacks topology key "
	symReason        = NewUnschedulable("anti-affinity of tasks running there")
)

// filter runs the placement constraints of t's class, and the
// anti-affinity of placed tasks that t's labels match, on n.
func (ci *constraintIndex) filter(t *Task, n *Node) *Status {
	a := ci.attemptFor(t)
	cc := t.cls.cons
	if cc != nil && len(cc.ports) > 0 {
		for _, p := range cc.ports {
			for _, h := range ci.ports[n] {
				if p.Conflicts(h) {
					return NewUnschedulable("host port " + strconv.Itoa(int(p.Port)) + "/" + p.ProtocolOrDefault() + " taken")
				}
			}
		}
	}
	if cc != nil {
		if st := ci.affinityFilter(cc, n); st != nil {
			return st
		}
		for _, ct := range cc.anti {
			if dom, ok := n.labels[ct.t.key]; ok && ct.t.count[dom] > 0 {
				return NewUnschedulable("anti-affinity with " + ct.t.describe())
			}
		}
	}
	for _, tm := range a.sym {
		if dom, ok := n.labels[tm.key]; ok && tm.owners[dom] > 0 {
			return symReason
		}
	}
	if cc != nil {
		for i, sp := range cc.spread {
			if !sp.wait {
				continue
			}
			dom, ok := n.labels[sp.t.key]
			if !ok {
				return NewUnresolvable(missingKeyReason + sp.t.key)
			}
			sc := &a.spread[i]
			self := int32(0)
			if sp.self {
				self = 1
			}
			if sc.count[dom]+self-sc.min > sp.maxSkew {
				return NewUnschedulable("spread of " + sp.t.describe() + " past maxSkew " + strconv.Itoa(int(sp.maxSkew)))
			}
		}
	}
	return nil
}

// affinityFilter checks the required affinity terms on n: each needs a
// task it matches in n's domain, unless no task matches any of them in
// any domain yet and the class's tasks match them all (the first of a
// group that must run together, as kube-scheduler allows it: a task on a
// node without the key is in no domain and does not count).
func (ci *constraintIndex) affinityFilter(cc *classCons, n *Node) *Status {
	if len(cc.affinity) == 0 {
		return nil
	}
	first := cc.selfAffinity
	for _, ct := range cc.affinity {
		first = first && len(ct.t.count) == 0
	}
	for _, ct := range cc.affinity {
		dom, ok := n.labels[ct.t.key]
		if !ok {
			return NewUnresolvable(missingKeyReason + ct.t.key)
		}
		if !first && ct.t.count[dom] == 0 {
			return NewUnresolvable("no affinity with " + ct.t.describe())
		}
	}
	return nil
}

// describe is a term for a reason: its selector and its topology key
// ("app=web in zone").
func (tm *term) describe() string { return tm.desc + " in " + tm.key }

// attemptFor is the view of the counts for t's attempt, made once per
// task and change of counts (not per node checked).
func (ci *constraintIndex) attemptFor(t *Task) *attempt {
	a := &ci.att
	if a.t == t && a.gen == ci.gen && a.ver == ci.c.idx.members {
		return a
	}
	a.t, a.gen, a.ver = t, ci.gen, ci.c.idx.members
	a.sym = a.sym[:0]
	if ci.owned > 0 {
		scope := t.labels[api.MetaTenant]
		seen := func(tm *term) bool {
			for _, x := range a.sym {
				if x == tm {
					return true
				}
			}
			return false
		}
		for k, v := range t.labels {
			for _, tm := range ci.byPair[scopedPair{scope, k, v}] {
				if tm.nOwners > 0 && !seen(tm) && tm.sel.MatchesMap(t.labels) {
					a.sym = append(a.sym, tm)
				}
			}
		}
		for _, tm := range ci.scan[scope] {
			if tm.nOwners > 0 && tm.sel.MatchesMap(t.labels) {
				a.sym = append(a.sym, tm)
			}
		}
	}
	a.spread = a.spread[:0]
	if cc := t.cls.cons; cc != nil {
		for _, sp := range cc.spread {
			a.spread = append(a.spread, ci.spreadCounts(t.cls, sp))
		}
	}
	return a
}

// spreadCounts counts sp's matching tasks per eligible domain, and the
// smallest count: 0 when fewer domains than minDomains are eligible, or
// when an eligible domain holds none.
func (ci *constraintIndex) spreadCounts(cls *class, sp *spreadTerm) spreadCounts {
	if !sp.domOK || sp.domVer != ci.c.idx.members {
		sp.domains = map[string]int32{}
		for _, n := range ci.c.idx.order {
			if dom, ok := n.labels[sp.t.key]; ok && spreadEligible(cls, sp, n) {
				sp.domains[dom]++
			}
		}
		sp.domVer, sp.domOK = ci.c.idx.members, true
	}
	sc := spreadCounts{count: map[string]int32{}}
	for n, k := range sp.t.byNode {
		if dom, ok := n.labels[sp.t.key]; ok && sp.domains[dom] > 0 && spreadEligible(cls, sp, n) {
			sc.count[dom] += k
		}
	}
	if len(sp.domains) < int(sp.minDomains) || len(sc.count) < len(sp.domains) {
		return sc
	}
	first := true
	for _, v := range sc.count {
		if first || v < sc.min {
			sc.min, first = v, false
		}
	}
	return sc
}

// spreadEligible reports whether n's domain counts for sp: the class's
// node selector and affinity admit it (honored by default), and its
// taints are tolerated (when honored).
func spreadEligible(cls *class, sp *spreadTerm, n *Node) bool {
	if sp.honorAff {
		if !termsMatch(cls.selector, n.labels, nil) || len(cls.affinity) > 0 && !affinityMatch(cls, n) {
			return false
		}
	}
	if sp.honorTaint {
		for _, taint := range n.taints {
			if taint.Effect != api.PreferNoSchedule && !tolerates(cls.tolerations, taint) {
				return false
			}
		}
	}
	return true
}

// preference rates n for t, above every policy score: preferred node
// affinity (its weights), preferred affinity and anti-affinity (weight
// times the matching tasks in n's domain), spreads that prefer (the
// matching tasks in n's domain count against it), and untolerated
// PreferNoSchedule taints (100 each). Larger is better; 0 for a task and
// node without any of them.
func (ci *constraintIndex) preference(t *Task, n *Node) int64 {
	var p int64
	for _, taint := range n.taints {
		if taint.Effect == api.PreferNoSchedule && !tolerates(t.cls.tolerations, taint) {
			p -= 300 // kube-scheduler weighs TaintToleration 3, the others 2
		}
	}
	cc := t.cls.cons
	if cc == nil {
		return p
	}
	for _, np := range cc.prefs {
		if np.sel.MatchesMap(n.labels) {
			p += 2 * int64(np.weight)
		}
	}
	for _, l := range []struct {
		terms []consTerm
		sign  int64
	}{{cc.prefAff, 2}, {cc.prefAnti, -2}} {
		for _, ct := range l.terms {
			if dom, ok := n.labels[ct.t.key]; ok {
				p += l.sign * int64(ct.weight) * int64(ct.t.count[dom])
			}
		}
	}
	if len(cc.spread) > 0 {
		a := ci.attemptFor(t)
		for i, sp := range cc.spread {
			if dom, ok := n.labels[sp.t.key]; ok && !sp.wait {
				p -= 20 * int64(a.spread[i].count[dom])
			}
		}
	}
	return p
}

// prefers reports whether preference can rate nodes apart for t on n.
func prefers(t *Task, n *Node) bool { return t.cls.cons != nil || len(n.taints) > 0 }
