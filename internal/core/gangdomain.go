package core

import (
	"cmp"
	"slices"
	"strings"
)

// Gang domains: a gang may require that all its members share one value of
// a node label (GangSpec.RequiredTopology: a rack, an NVLink domain, a
// zone, a TPU slice), and its members share one device model unless the
// gang allows a mix (GangSpec.MixedModels: data-parallel training runs at
// its slowest member's pace). A domain is one label value and one model
// signature (the models of the device types the members ask for); nodes
// without the label are in none.
//
// Both are properties of a node's group (index.go: a group's nodes share
// their non-identity labels and their devices' models), so a domain is a
// set of groups and restricting a search to it skips whole groups; a
// required identity label (one a group does not share, such as a node's
// name) is checked per node instead.
//
// A try places the members inside one domain at a time, in this order:
//  1. the domain of a member placed already (a started gang grows only
//     there);
//  2. the domain an unrestricted search puts the first ready member in:
//     the policy's own choice (under hetero-aware, the model expected to
//     finish it first);
//  3. the others, the fewest nodes with room for a member first (read from
//     the groups' buckets, never per node), then by name: a gang fills a
//     partly used domain before it opens an empty one, which leaves the
//     fewest partly used domains.
//
// At most maxGangDomains domains are tried per try; for a required
// identity label, only the first two (its domains are single nodes, too
// many to list per try).

// maxGangDomains bounds the domains one gang try places in.
const maxGangDomains = 16

// gangDomain restricts a gang try's placements (searchCtx.dom).
type gangDomain struct {
	key      string // the required label key ("": any)
	identity bool   // key is an identity label: checked per node
	value    string
	models   string // the model signature ("": any)
	slots    int    // nodes with room for a member (the order of step 3)
	// groups says, by group id, which groups' nodes are in d (made once
	// per try: the searches look it up per group and per node).
	groups []bool
}

// holdsGroup reports whether g's nodes may be in d (for an identity key,
// holdsNode decides per node).
func (d *gangDomain) holdsGroup(g *group) bool { return g.id < len(d.groups) && d.groups[g.id] }

// holdsNode reports whether n is in d, its group being in it.
func (d *gangDomain) holdsNode(n *Node) bool {
	return !d.identity || d.key == "" || n.labels[d.key] == d.value
}

// groupModels is the sorted distinct models of g's devices of dims (a
// group's devices never change: each dim's part is made once).
func groupModels(g *group, dims []int) string {
	if len(dims) == 1 {
		return g.dimModels(dims[0])
	}
	parts := make([]string, 0, len(dims))
	for _, dim := range dims {
		parts = append(parts, g.dimModels(dim))
	}
	return strings.Join(parts, ";")
}

// dimModels is the sorted distinct "type=model" of g's devices of dim.
func (g *group) dimModels(dim int) string {
	if m, ok := g.models[dim]; ok {
		return m
	}
	var ms []string
	for _, i := range g.tmpl.byDim[dim] {
		ms = append(ms, g.tmpl.devices[i].Type+"="+g.tmpl.devices[i].Model)
	}
	slices.Sort(ms)
	m := strings.Join(slices.Compact(ms), ",")
	if g.models == nil {
		g.models = map[int]string{}
	}
	g.models[dim] = m
	return m
}

// gangDeviceDims are the device dims any option of the ready members asks
// for, sorted.
func gangDeviceDims(ready []*Task) []int {
	var dims []int
	for _, t := range ready {
		for oi := range t.cls.opts {
			for _, d := range t.cls.opts[oi].devs {
				if !slices.Contains(dims, d.dim) {
					dims = append(dims, d.dim)
				}
			}
		}
	}
	slices.Sort(dims)
	return dims
}

// inGangDomains runs try once when g has no domains (no required label,
// and mixed models or no device asked), else once per domain of
// gangDomains (sc.dom set, the affinity's anchor as it was) until a try
// reports true; it reports whether one did.
func (gs *gangs) inGangDomains(g *gang, sc *searchCtx, ready []*Task, aff *gangAffinity, try func() bool) bool {
	var dims []int
	if !g.mixed {
		dims = gangDeviceDims(ready)
	}
	if g.required == "" && len(dims) == 0 {
		return try()
	}
	anchor := aff.anchor
	doms := gs.gangDomains(g, sc, ready, dims)
	for i := range doms {
		sc.dom, aff.anchor = &doms[i], anchor
		ok := try()
		sc.dom = nil
		if ok {
			return true
		}
	}
	return false
}

// gangDomains lists the domains a try of g places in, in order (see the
// file's comment); dims are the device dims its model signatures are made
// of (none: any model).
func (gs *gangs) gangDomains(g *gang, sc *searchCtx, ready []*Task, dims []int) []gangDomain {
	c := gs.c
	key := g.required
	identity := key != "" && c.idx.identity[key]
	// Each group's domain (label value, model signature), once per try.
	glist := c.idx.glist
	values, sigs := make([]string, len(glist)), make([]string, len(glist))
	labelled := make([]bool, len(glist))
	for _, grp := range glist {
		values[grp.id], labelled[grp.id] = grp.labels[key], key == "" || identity
		if !labelled[grp.id] {
			_, labelled[grp.id] = grp.labels[key]
		}
		if len(dims) > 0 {
			sigs[grp.id] = groupModels(grp, dims)
		}
	}
	if key == "" || identity {
		clear(values)
	}
	mk := func(value, models string) gangDomain {
		d := gangDomain{key: key, identity: identity, value: value, models: models, groups: make([]bool, len(glist))}
		for id := range glist {
			d.groups[id] = labelled[id] && values[id] == value && sigs[id] == models
		}
		return d
	}
	of := func(n *Node) gangDomain {
		d := mk(values[n.group.id], sigs[n.group.id])
		if identity {
			d.value = n.labels[key]
		}
		return d
	}
	// 1. Where a member runs already: nowhere else.
	for _, m := range g.members {
		if m.node != nil && m.node.group != nil && (m.state == Scheduled || m.state == Running) {
			if !labelled[m.node.group.id] || identity && m.node.labels[key] == "" {
				return nil
			}
			return []gangDomain{of(m.node)}
		}
	}
	// 3. Every domain of the groups the first member could use, the fewest
	// nodes with room for a member first.
	t := ready[0]
	var out []gangDomain
	if !identity {
		for oi := range t.cls.opts {
			o := &t.cls.opts[oi]
			c.pl.refreshGroups(t, o)
			for _, grp := range o.groups {
				if grp.indexed == 0 || !labelled[grp.id] {
					continue
				}
				slots := 0
				for b := grp.needBucket(o.req[grp.primary]); b <= grp.max; b++ {
					slots += len(grp.buckets[b])
				}
				v, m := values[grp.id], sigs[grp.id]
				if i := slices.IndexFunc(out, func(x gangDomain) bool { return x.value == v && x.models == m }); i >= 0 {
					out[i].slots += slots
				} else {
					d := mk(v, m)
					d.slots = slots
					out = append(out, d)
				}
			}
		}
		slices.SortFunc(out, func(a, b gangDomain) int {
			return cmp.Or(cmp.Compare(a.slots, b.slots), cmp.Compare(a.value, b.value), cmp.Compare(a.models, b.models))
		})
		if len(out) <= 1 {
			return out
		}
	}
	// 2. First, the policy's choice for the first member, searched
	// unrestricted (only where there is a choice).
	cp := c.jr.checkpoint()
	gs.saved.save(t.cls)
	if c.pl.tryPlace(sc, t) == placed && labelled[t.node.group.id] && (!identity || t.node.labels[key] != "") {
		first := of(t.node)
		if i := slices.IndexFunc(out, func(x gangDomain) bool { return x.value == first.value && x.models == first.models }); i >= 0 {
			out = slices.Insert(slices.Delete(out, i, i+1), 0, first)
		} else {
			out = slices.Insert(out, 0, first)
		}
	}
	gs.saved.restore(t.cls)
	c.jr.rollback(cp)
	return out[:min(len(out), maxGangDomains)]
}

// placeGangMembers places as many of g's ready members as fit, under a
// checkpoint kept only if g then has MinMember placed (else rolled back):
// once, or once per domain until one holds the gang (inGangDomains).
// newly is what the kept try placed, or the most any try placed.
func (gs *gangs) placeGangMembers(g *gang, sc *searchCtx, ready []*Task, aff *gangAffinity) (newly int, deferredTry, kept bool) {
	kept = gs.inGangDomains(g, sc, ready, aff, func() bool {
		n, def, ok := gs.attemptGang(g, sc, ready, aff)
		if ok {
			newly, deferredTry = n, def
		} else {
			newly, deferredTry = max(newly, n), deferredTry || def
		}
		return ok
	})
	return newly, deferredTry, kept
}

// attemptGang is one try of g's ready members in the search sc (its
// domain, if any): kept when g then has MinMember placed, else rolled
// back.
func (gs *gangs) attemptGang(g *gang, sc *searchCtx, ready []*Task, aff *gangAffinity) (newly int, deferredTry, kept bool) {
	c := gs.c
	cp := c.jr.checkpoint()
	for _, t := range ready {
		gs.saved.save(t.cls)
		res := c.pl.tryPlace(sc, t)
		gs.saved.restore(t.cls)
		switch res {
		case placed:
			newly++
			if aff.anchor == nil {
				aff.anchor = t.node
			}
		case deferred:
			deferredTry = true
		}
	}
	if g.placed+g.done+newly >= g.min || g.byMember && g.started && newly > 0 {
		// Started with disruption "member": a member placed back is
		// progress, the others run already.
		c.jr.keep(cp)
		return newly, deferredTry, true
	}
	c.jr.rollback(cp)
	return newly, deferredTry, false
}
