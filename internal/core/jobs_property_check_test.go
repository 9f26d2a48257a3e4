package core

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Settling, liveness and minimizing for the jobs property tests
// (jobs_property_test.go).

// settle ticks at NextWakeup, as a driver sleeping until then does, until
// nothing is due within horizon.
func (k *pjCase) settle(horizon time.Duration) {
	end := k.now.Add(horizon)
	idle := 0
	for {
		next, ok := k.c.NextWakeup()
		if !ok || next.After(end) {
			k.now = end
			return
		}
		if next.After(k.now) {
			k.now = next
		}
		k.logf("Tick (NextWakeup)")
		k.c.Tick(k.now)
		k.check("Tick at NextWakeup")
		if k.outcome() {
			idle = 0
			continue
		}
		k.hist = k.hist[:len(k.hist)-1] // a tick that did nothing
		if idle++; idle == 2000 {
			k.fail("NextWakeup asked for 2000 Ticks in a row that changed nothing (now +%s, next %s)", k.now.Sub(k.start), next.Sub(k.start))
		}
	}
}

// liveness heals the cluster, runs every placed task to success until
// nothing is placed or due, and checks that what is left is left for a
// reason.
func (k *pjCase) liveness() {
	k.drawn = len(k.ops)
	k.hist = append(k.hist, "--- liveness: every node ready, devices healthy, no taints; placed tasks succeed")
	for _, n := range k.nodes {
		if n.taint {
			k.apply(pjOp{kind: pjTaint, id: n.name, taint: false})
		}
		if cur, _ := k.c.Node(n.name); cur.state != api.NodeReady {
			k.apply(pjOp{kind: pjState, id: n.name, state: api.NodeReady})
		}
		for d := 0; d < n.gpus; d++ {
			if cur, _ := k.c.Node(n.name); !cur.devices[findDevice(cur, gpuRes, fmt.Sprint(d))].Healthy {
				k.apply(pjOp{kind: pjHealth, id: n.name, dev: d, healthy: true})
			}
		}
	}
	k.settle(10 * time.Minute)
	for round := 0; ; round++ {
		var placed []string
		for _, id := range k.ids {
			if t, _ := k.c.Task(id); isPlaced(t.State()) {
				placed = append(placed, id)
			}
		}
		if len(placed) == 0 {
			break
		}
		if round == 500 {
			k.fail("tasks still placed after %d rounds of finishing them: %v", round, placed)
		}
		for _, id := range placed {
			if t, _ := k.c.Task(id); isPlaced(t.State()) { // a gang restart or fail-fast may have moved it
				k.apply(pjOp{kind: pjFinish, id: id})
			}
		}
		k.settle(10 * time.Minute)
	}
	// Nothing is due: a Tick now must change nothing.
	k.logf("Tick +0s (probe)")
	k.c.Tick(k.now)
	k.check("probe Tick")
	if k.outcome() {
		k.fail("NextWakeup asked for no Tick, yet a Tick at the same time changed something (last input above): a wakeup was missing")
	}
	k.checkLeftovers()
}

// gangFitsEmpty is how many of g's members (capped at most) fit together
// on the empty cluster inside one of its domains (gangdomain.go): a rack
// when it requires one, a GPU model unless it mixes them or asks no GPU.
func (k *pjCase) gangFitsEmpty(g *pjGang, most int) int {
	best := 0
	for _, rack := range []string{"r1", "r2"} {
		for _, model := range []string{"A", "B"} {
			best = max(best, k.fitsEmptyIf(g.cpu, g.gpu, most, func(n *pjNode) bool {
				return (g.required == "" || n.rack == rack) && (g.mixed || g.gpu == 0 || n.model == model)
			}))
		}
	}
	return best
}

// fitsEmpty is how many tasks of cpu milli-cores and gpu whole GPUs fit
// together on the empty cluster (capped at most).
func (k *pjCase) fitsEmpty(cpu int64, gpu, most int) int {
	return k.fitsEmptyIf(cpu, gpu, most, func(*pjNode) bool { return true })
}

// fitsEmptyIf is fitsEmpty on the nodes in.
func (k *pjCase) fitsEmptyIf(cpu int64, gpu, most int, in func(*pjNode) bool) int {
	total := 0
	for _, n := range k.nodes {
		if !in(n) {
			continue
		}
		per := most
		if cpu > 0 {
			per = int(n.cpu / cpu)
		}
		if gpu > 0 {
			per = min(per, n.gpus/gpu)
		}
		total += per
	}
	return min(total, most)
}

func (k *pjCase) checkLeftovers() {
	c := k.c
	seen := map[*pjGang]bool{}
	for _, id := range k.ids {
		t, _ := c.Task(id)
		spec := k.specs[id]
		switch st := t.State(); {
		case st.Terminal():
		case isPlaced(st):
			k.fail("task %s still %s after the cluster drained", id, st)
		case st == Blocked:
			waiting := false
			for _, d := range spec.Depends {
				if dt, ok := c.Task(d); ok && !dt.State().Terminal() {
					waiting = true
				}
			}
			if !waiting {
				k.fail("task %s stays blocked though every dependency finished", id)
			}
		case t.backoff:
			k.fail("task %s still in backoff (%q) long after its retry was due", id, t.reason)
		case k.gangOf[id] == nil:
			if k.fitsEmpty(spec.Resources[resource.CPU], int(spec.Resources[gpuRes]/1000), 1) > 0 {
				k.fail("task %s stays pending (%q) though it fits the empty cluster", id, t.reason)
			}
		default:
			g := k.gangOf[id]
			if seen[g] {
				continue
			}
			seen[g] = true
			pending, alive, succeeded := 0, 0, 0
			for _, m := range g.members {
				mt, ok := c.Task(m)
				if ok && mt.State() == Succeeded {
					succeeded++
				}
				if !ok || !mt.State().Terminal() {
					alive++ // not submitted yet counts: the gang waits for it
				}
				if ok && mt.State() == Pending {
					pending++
				}
			}
			if succeeded > 0 && !k.opts.gangSuccess {
				continue
			}
			if alive < g.min {
				k.fail("gang of job %s can never start (%d members not finished, minMember %d), yet member %s stays pending (%q)",
					g.job, alive, g.min, id, t.reason)
			}
			if fit := k.gangFitsEmpty(g, pending); pending >= g.min && fit >= g.min {
				k.fail("gang of job %s stays pending (%s: %q) though %d of its %d pending members fit the empty cluster together (minMember %d)",
					g.job, id, t.reason, fit, pending, g.min)
			}
		}
	}
}

// run runs body on k and returns the failure it raised (nil when none); a
// panic of the core is a failure too. rapid's own panics pass through.
func (k *pjCase) run(body func()) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if f, ok := r.(pjFailure); ok {
			err = errors.New(f.msg)
			return
		}
		switch fmt.Sprintf("%T", r) {
		case "rapid.invalidData", "rapid.stopTest":
			panic(r)
		}
		err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
	}()
	body()
	return nil
}

// replay applies ops (errors allowed: ops of a cut-down case may no longer
// apply) and the liveness phase to a fresh core.
func replayPJ(cfg Config, nodes []*pjNode, opts jobsOpts, ops []pjOp) (*pjCase, error) {
	k := newPJCase(cfg, nodes, opts)
	k.strict = false
	err := k.run(func() {
		for _, o := range ops {
			k.apply(o)
		}
		k.strict = true
		k.liveness()
	})
	return k, err
}

// minimizePJ deletes ops (ddmin) and nodes while the same kind of failure
// remains, until deadline.
func minimizePJ(cfg Config, nodes []*pjNode, opts jobsOpts, ops []pjOp, kind string, deadline time.Time) ([]*pjNode, []pjOp) {
	fails := func(nodes []*pjNode, ops []pjOp) bool {
		if time.Now().After(deadline) {
			return false
		}
		_, err := replayPJ(cfg, nodes, opts, ops)
		return err != nil && failureKind(err) == kind
	}
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
			for i := 0; i+chunk <= len(ops); {
				cand := append(append([]pjOp(nil), ops[:i]...), ops[i+chunk:]...)
				if fails(nodes, cand) {
					ops, changed = cand, true
				} else {
					i += chunk
				}
			}
		}
		for i := 0; i < len(nodes) && len(nodes) > 1; {
			cand := append(append([]*pjNode(nil), nodes[:i]...), nodes[i+1:]...)
			if fails(cand, ops) {
				nodes, changed = cand, true
			} else {
				i++
			}
		}
	}
	return nodes, ops
}
