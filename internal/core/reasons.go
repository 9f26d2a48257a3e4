package core

import (
	"sort"
	"strconv"
	"strings"
)

// explainVisit bounds the nodes examined one by one for a reason summary;
// nodes beyond it are counted by their bucket alone.
const explainVisit = 512

// explain summarises why t fits nowhere: "0/10000 nodes fit: 6000
// insufficient nvidia.com/gpu, 4000 nodeSelector mismatch". Static reasons
// are counted per group and capacity shortfalls per bucket, so the cost is
// O(groups × buckets) plus at most explainVisit node checks.
func (pl *placer) explain(t *Task) string {
	sc := pl.beginSearch(false, nil)
	var parts []string
	for oi := range t.cls.opts {
		o := &t.cls.opts[oi]
		s := pl.explainOption(sc, t, o)
		if len(t.cls.opts) > 1 {
			name := "resources"
			if o.Index >= 0 {
				name = "alternatives[" + strconv.Itoa(o.Index) + "]"
			}
			s = name + ": " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (pl *placer) explainOption(sc *searchCtx, t *Task, o *Option) string {
	c := pl.c
	if t.leaf != nil {
		// Over its queue's max, no node can take it: say that alone.
		if st := c.qs.queueCheck(t, o); st != nil {
			return st.Reason
		}
	}
	counts := map[string]int{}
	budget := explainVisit
	if len(t.cls.identity) > 0 {
		// Only the nodes the identity index names can fit; the rest do not
		// match the selector.
		term := t.cls.identity[0]
		seen := 0
		for _, v := range term.values {
			for _, n := range c.idx.byIdentity[term.key][v] {
				seen++
				switch {
				case n.bucket < 0:
					counts["node not ready, cordoned or draining"]++
				case pl.staticCheck(t, o, n.group) != nil:
					counts[pl.staticCheck(t, o, n.group).Reason]++
				default:
					if st := pl.checkNode(sc, t, o, n); st != nil {
						counts[st.Reason]++
					} else {
						counts["fits now (retry pending)"]++
					}
				}
			}
		}
		if rest := len(c.idx.nodes) - seen; rest > 0 {
			counts[selectorMismatch.Reason] += rest
		}
		return formatCounts(counts, len(c.idx.nodes))
	}
	for _, g := range c.idx.glist {
		if g.members == 0 {
			continue
		}
		if st := pl.staticCheck(t, o, g); st != nil {
			counts[st.Reason] += g.members
			continue
		}
		if i := o.req.FirstShort(&g.maxCap); i >= 0 {
			counts[tooSmallReason(c.dims, i)] += g.members
			continue
		}
		if off := g.members - g.indexed; off > 0 {
			counts["node not ready, cordoned or draining"] += off
		}
		nb := g.needBucket(o.req[g.primary])
		for b := 0; b < numBuckets; b++ {
			bk := g.buckets[b]
			if len(bk) == 0 {
				continue
			}
			if b < nb {
				counts["insufficient "+string(c.dims.Name(g.primary))] += len(bk)
				continue
			}
			for i, n := range bk {
				if budget == 0 {
					counts["not examined"] += len(bk) - i
					break
				}
				budget--
				if st := pl.checkNode(sc, t, o, n); st != nil {
					counts[st.Reason]++
				} else {
					counts["fits now (retry pending)"]++
				}
			}
		}
	}
	return formatCounts(counts, len(c.idx.nodes))
}

// formatCounts renders "fit/total nodes fit: n reason, ..." with the
// largest counts first.
func formatCounts(counts map[string]int, total int) string {
	type kv struct {
		k string
		v int
	}
	list := make([]kv, 0, len(counts))
	fit := 0
	for k, v := range counts {
		if k == "fits now (retry pending)" {
			fit = v
		}
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].v != list[j].v {
			return list[i].v > list[j].v
		}
		return list[i].k < list[j].k
	})
	items := make([]string, 0, len(list))
	for _, e := range list {
		if e.k != "fits now (retry pending)" {
			items = append(items, strconv.Itoa(e.v)+" "+e.k)
		}
	}
	s := strconv.Itoa(fit) + "/" + strconv.Itoa(total) + " nodes fit"
	if len(items) > 0 {
		s += ": " + strings.Join(items, ", ")
	}
	return s
}
