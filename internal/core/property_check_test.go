package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// The property tests' driver and checks (property_test.go): the runner
// applies ops to one core, the checker verifies the properties after each.

// runner applies ops to one core and keeps what the resolution needs.
type runner struct {
	c     *Core
	now   time.Time
	nsub  int
	ids   []string // accepted task ids in submission order
	specs map[string]*api.Task
	nodes map[string]*api.Node // the last accepted spec of every node name
	fresh int

	// filled by apply for the checks
	lastSpec  *api.Task
	lastClone *api.Task
}

func newRunner(cfg Config, cluster []nodeParams) (*runner, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("New: %v", err)
	}
	r := &runner{c: c, now: epoch, specs: map[string]*api.Task{}, nodes: map[string]*api.Node{}}
	for i, p := range cluster {
		spec := buildNodeSpec(p, "n"+strconv.Itoa(i))
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("generated node does not validate: %v", err)
		}
		if err := c.UpsertNode(r.now, cloneNodeSpec(spec)); err != nil {
			return nil, fmt.Errorf("UpsertNode %s: %v", spec.Name, err)
		}
		r.nodes[spec.Name] = spec
	}
	r.c.TakeOutput()
	return r, nil
}

func (r *runner) clusterDesc() string {
	var b strings.Builder
	for _, n := range r.c.Nodes() {
		js, _ := json.Marshal(r.nodes[n.Name()])
		fmt.Fprintf(&b, "  node %s\n", js)
	}
	return b.String()
}

// pickTask resolves a task id: sel chooses the subset (by current state),
// pick the member.
func (r *runner) pickTask(sel, pick int) string {
	var want func(State) bool
	switch {
	case sel == 0:
		if r.nsub == 0 {
			return "t0"
		}
		return "t" + strconv.Itoa(pick%(r.nsub+1))
	case sel <= 3:
		want = func(s State) bool { return s == Scheduled }
	case sel <= 7:
		want = func(s State) bool { return s == Scheduled || s == Running }
	default:
		want = func(s State) bool { return !s.Terminal() }
	}
	var cands []string
	for _, id := range r.ids {
		if tk, ok := r.c.Task(id); ok && want(tk.State()) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		if len(r.ids) == 0 {
			return "t0"
		}
		return r.ids[pick%len(r.ids)]
	}
	return cands[pick%len(cands)]
}

func (r *runner) pickNode(pick int) string {
	ns := r.c.Nodes()
	if len(ns) == 0 || pick%16 == 15 {
		return "ghost"
	}
	return ns[pick%len(ns)].Name()
}

// apply runs o; skipped reports an op that made no call.
func (r *runner) apply(o op) (desc string, err error, skipped bool) {
	r.now = r.now.Add(o.Adv)
	r.lastSpec, r.lastClone = nil, nil
	at := "@" + r.now.Sub(epoch).String() + " "
	switch o.Kind {
	case opSubmit:
		id := "t" + strconv.Itoa(r.nsub)
		r.nsub++
		spec := buildTaskSpec(o.Task, id, r.ids)
		if err := spec.Validate(); err != nil {
			return "", nil, true
		}
		js, _ := json.Marshal(spec)
		r.lastSpec, r.lastClone = spec, cloneTaskSpec(spec)
		err = r.c.Submit(r.now, spec)
		if err == nil {
			r.ids = append(r.ids, id)
			r.specs[id] = spec
		}
		return at + "submit " + string(js), err, false
	case opCancel:
		id := r.pickTask(o.Sel, o.Pick)
		return at + "cancel " + id, r.c.Cancel(r.now, id, ""), false
	case opStarted:
		id := r.pickTask(o.Sel, o.Pick)
		return at + "started " + id, r.c.TaskStarted(r.now, id), false
	case opFinished:
		id := r.pickTask(o.Sel, o.Pick)
		res := Result{ExitCode: propExits[o.Exit], TimedOut: o.Timeout}
		return fmt.Sprintf("%sfinished %s exit=%d timedOut=%v", at, id, res.ExitCode, res.TimedOut), r.c.TaskFinished(r.now, id, res), false
	case opRenew:
		id := r.pickTask(o.Sel, o.Pick)
		return at + "renew " + id, r.c.Renew(r.now, id), false
	case opTick:
		r.c.Tick(r.now)
		return at + "tick", nil, false
	case opNodeState:
		name := r.pickNode(o.Pick)
		st := propStates[o.State]
		return at + "state " + name + " " + st, r.c.SetNodeState(r.now, name, st), false
	case opDeviceHealth:
		name := r.pickNode(o.Pick)
		typ, id, healthy := gpuRes, "nodev", false
		if n, ok := r.c.Node(name); ok && len(n.Devices()) > 0 && o.Pick2%8 != 7 {
			d := n.Devices()[o.Pick2%len(n.Devices())]
			typ, id, healthy = d.Type, d.ID, !d.Healthy
			if o.Pick2%8 == 6 {
				healthy = d.Healthy // a no-op
			}
		}
		return fmt.Sprintf("%shealth %s %s/%s healthy=%v", at, name, typ, id, healthy), r.c.SetDeviceHealth(r.now, name, typ, id, healthy), false
	case opUpsertNode:
		return r.upsertNode(o, at)
	case opRemoveNode:
		name := r.pickNode(o.Pick)
		return at + "remove " + name, r.c.RemoveNode(r.now, name), false
	case opAddNode:
		return r.addNode(o, at)
	case opObserve:
		name := r.pickNode(o.Pick)
		u := NodeUsage{CPU: float64(o.Util) / 100}
		if n, ok := r.c.Node(name); ok && len(n.Devices()) > 0 && o.Pick2%2 == 0 {
			u.Devices = map[string]float64{}
			for i, d := range n.Devices() {
				u.Devices[d.ID] = float64((o.Pick2/2+i*37)%101) / 100
			}
		}
		return fmt.Sprintf("%sobserve %s cpu=%.2f devs=%v", at, name, u.CPU, u.Devices), r.c.ObserveNode(r.now, name, u), false
	}
	panic("unknown op")
}

// upsertNode applies an opUpsertNode: a mutation of a known node's spec.
func (r *runner) upsertNode(o op, at string) (desc string, err error, skipped bool) {
	name := r.pickNode(o.Pick)
	old, ok := r.nodes[name]
	if !ok {
		return "", nil, true
	}
	spec := cloneNodeSpec(old)
	mutateNode(spec, o.Mut, o.Pick2)
	if spec.Validate() != nil {
		return "", nil, true
	}
	js, _ := json.Marshal(spec)
	err = r.c.UpsertNode(r.now, cloneNodeSpec(spec))
	if err == nil {
		r.nodes[name] = spec
	}
	return at + "upsert " + string(js), err, false
}

// addNode applies an opAddNode: a node removed before comes back, or a new
// one (up to 8 nodes).
func (r *runner) addNode(o op, at string) (desc string, err error, skipped bool) {
	var absent []string
	for name := range r.nodes {
		if _, ok := r.c.Node(name); !ok {
			absent = append(absent, name)
		}
	}
	sort.Strings(absent)
	var spec *api.Node
	switch {
	case len(absent) > 0 && o.Pick%2 == 0:
		spec = cloneNodeSpec(r.nodes[absent[o.Pick%len(absent)]])
	case len(r.c.Nodes()) < 8:
		spec = buildNodeSpec(o.Node, "m"+strconv.Itoa(r.fresh))
		r.fresh++
	default:
		return "", nil, true
	}
	if spec.Validate() != nil {
		return "", nil, true
	}
	js, _ := json.Marshal(spec)
	err = r.c.UpsertNode(r.now, cloneNodeSpec(spec))
	if err == nil {
		r.nodes[spec.Name] = spec
	}
	return at + "add " + string(js), err, false
}

// checker holds what the properties remember between ops.
type checker struct {
	r        *runner
	placed   map[string]bool  // the outputs say the task holds a placement
	chosen   map[string]int   // option index of the last placement
	terminal map[string]State // terminal state once seen
	// notReadyCheck also requires that no task stays placed on a node that is
	// notready or draining.
	notReadyCheck bool
	snap          consSnapshot // the placements after the last input (property_constraints_test.go)
}

func newChecker(r *runner) *checker {
	return &checker{r: r, placed: map[string]bool{}, chosen: map[string]int{}, terminal: map[string]State{}}
}

func errCode(err error) (errs.Code, string, bool) {
	var e *errs.Error
	if !errors.As(err, &e) {
		return "", "", false
	}
	return e.Code, e.Field, true
}

// check verifies everything after one applied op whose output is out.
func (k *checker) check(o op, err error, out *Output) error {
	c := k.r.c
	if err != nil {
		code, field, ok := errCode(err)
		if !ok {
			return fmt.Errorf("error is not an *errs.Error: %v", err)
		}
		allowed := code == errs.NotFound || code == errs.Conflict ||
			(o.Kind == opRenew && code == errs.InvalidArgument && field == "lease") ||
			(o.Kind == opSubmit && code == errs.InvalidArgument && strings.HasPrefix(field, "depends"))
		if !allowed {
			return fmt.Errorf("unexpected error: %v", err)
		}
		if o.Kind == opSubmit && code == errs.InvalidArgument {
			for _, d := range k.r.lastSpec.Depends {
				if _, known := c.Task(d); known {
					return fmt.Errorf("submit rejected a known dependency %s: %v", d, err)
				}
			}
		}
		if !out.Empty() {
			return fmt.Errorf("a failed input produced output:\n%s", formatOutput(*out))
		}
	}
	if k.r.lastSpec != nil {
		if d := cmp.Diff(k.r.lastClone, k.r.lastSpec); d != "" {
			return fmt.Errorf("Submit modified its spec (-before +after):\n%s", d)
		}
	}
	if err := checkInvariants(c); err != nil {
		return fmt.Errorf("invariant: %v", err)
	}
	if err := k.checkOutput(out); err != nil {
		return err
	}
	if err := k.checkTasks(); err != nil {
		return err
	}
	return k.checkConstraintRules(out)
}

func (k *checker) checkOutput(out *Output) error {
	c := k.r.c
	P := map[string]int{}
	R := map[string]int{}
	T := map[string]int{}
	touched := map[string]bool{}
	for _, p := range out.Placements {
		touched[p.Task] = true
		P[p.Task]++
		if err := k.checkPlacement(&p); err != nil {
			return fmt.Errorf("placement of %s on %s: %v", p.Task, p.Node, err)
		}
	}
	for _, tr := range out.Transitions {
		touched[tr.Task] = true
		if s, ok := k.terminal[tr.Task]; ok {
			return fmt.Errorf("transition %s -> %s of %s, already %s", tr.From, tr.To, tr.Task, s)
		}
		if tr.From.Terminal() || tr.From == Preempted {
			return fmt.Errorf("transition of %s from %s", tr.Task, tr.From)
		}
		if tr.From == Scheduled || tr.From == Running {
			switch {
			case tr.To == Pending || tr.To == Preempted:
				R[tr.Task]++
			case tr.To.Terminal():
				T[tr.Task]++
			case tr.To == Running && tr.From == Scheduled:
			default:
				return fmt.Errorf("transition of %s from %s to %s", tr.Task, tr.From, tr.To)
			}
		}
	}
	for _, pr := range out.Preemptions {
		if pr.By == "" {
			// A gavel round swapped it out: no preemptor; never urgent or
			// high work, never a non-preemptible task.
			v, ok := c.Task(pr.Victim)
			switch {
			case !ok:
				return fmt.Errorf("preemption names unknown tasks: %+v", pr)
			case c.policy.Rounds == nil || pr.Reason != PreemptShare:
				return fmt.Errorf("preemption of %s by no task under %s (reason %s)", pr.Victim, c.policy.Name, pr.Reason)
			case v.Priority() <= api.PriorityHigh || !k.r.specs[pr.Victim].IsPreemptible():
				return fmt.Errorf("a round swapped out %s (priority %d, preemptible %v)", pr.Victim, v.Priority(), k.r.specs[pr.Victim].IsPreemptible())
			case R[pr.Victim] == 0:
				return fmt.Errorf("preemption of %s without its transition", pr.Victim)
			}
			continue
		}
		v, ok1 := c.Task(pr.Victim)
		by, ok2 := c.Task(pr.By)
		if !ok1 || !ok2 {
			return fmt.Errorf("preemption names unknown tasks: %+v", pr)
		}
		if pr.Reason == PreemptShare {
			// Time-sharing swaps out a task of the same tier or a less
			// important one, never a more important one.
			if c.policy.TimeShare == nil || v.Priority() < by.Priority() {
				return fmt.Errorf("time-share preemption of %s (priority %d) by %s (priority %d) under %s", pr.Victim, v.Priority(), pr.By, by.Priority(), c.policy.Name)
			}
		} else if v.Priority() <= by.Priority() || by.Priority() > api.PriorityHigh {
			return fmt.Errorf("preemption of %s (priority %d) by %s (priority %d)", pr.Victim, v.Priority(), pr.By, by.Priority())
		}
		if !k.r.specs[pr.Victim].IsPreemptible() {
			return fmt.Errorf("preemption of non-preemptible %s", pr.Victim)
		}
		if by.gang != nil && P[pr.By] == 0 && !by.state.Terminal() {
			// A gang preempts as one (gangpreempt.go): all its members it
			// needs placed in the same input, or nothing evicted.
			return fmt.Errorf("preemption of %s for gang member %s, which was not placed (its gang: %d placed, %d done, minMember %d)",
				pr.Victim, pr.By, by.gang.placed, by.gang.done, by.gang.min)
		}
		if v.gang != nil && v.gang == by.gang {
			return fmt.Errorf("gang member %s preempted by %s of its own gang", pr.Victim, pr.By)
		}
		if R[pr.Victim] == 0 {
			return fmt.Errorf("preemption of %s without its transition", pr.Victim)
		}
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		tk, ok := c.Task(id)
		if !ok {
			return fmt.Errorf("output names unknown task %s", id)
		}
		if P[id] > 0 {
			if s, ok := k.terminal[id]; ok {
				return fmt.Errorf("placement of %s, already %s", id, s)
			}
		}
		before := 0
		if k.placed[id] {
			before = 1
		}
		if P[id] > R[id]+1-before {
			return fmt.Errorf("task %s placed %d times with %d re-queues in between (placed before: %v)", id, P[id], R[id], before == 1)
		}
		net := before + P[id] - R[id] - T[id]
		holds := tk.State() == Scheduled || tk.State() == Running
		if net < 0 || net > 1 || (net == 1) != holds {
			return fmt.Errorf("task %s: placed before %v, %d placements, %d re-queues, %d ends, now %s", id, before == 1, P[id], R[id], T[id], tk.State())
		}
		k.placed[id] = net == 1
	}
	for _, p := range out.Placements {
		k.chosen[p.Task] = p.Chosen
	}
	return nil
}

// checkPlacement: the node exists and is ready, the devices are its own,
// healthy and match the request of the chosen option, and the static
// filters (selector, taints) hold.
func (k *checker) checkPlacement(p *Placement) error {
	c := k.r.c
	tk, ok := c.Task(p.Task)
	if !ok {
		return errors.New("unknown task")
	}
	spec := k.r.specs[p.Task]
	n, ok := c.Node(p.Node)
	if !ok {
		return errors.New("unknown node")
	}
	if !n.Schedulable() {
		return errors.New("node not ready")
	}
	if p.Chosen < -1 || p.Chosen >= len(spec.Alternatives) {
		return fmt.Errorf("chosen %d out of range", p.Chosen)
	}
	if p.Priority != spec.PriorityOrDefault() || p.Level > p.Priority || p.Level < 0 {
		return fmt.Errorf("priority %d level %d, spec priority %d", p.Priority, p.Level, spec.PriorityOrDefault())
	}
	req := spec.Resources
	if p.Chosen >= 0 {
		req = spec.Alternatives[p.Chosen].Resources
	}
	o := &tk.Options()[optIndex(int8(p.Chosen))]
	for name, q := range req {
		i, ok := c.Dims().Lookup(name)
		if !ok || o.Request()[i] != q {
			return fmt.Errorf("option %d request of %s is not the spec's %d", p.Chosen, name, q)
		}
	}
	shares := map[string]int64{}
	seen := map[string]bool{}
	for _, d := range p.Devices {
		key := d.Type + "/" + d.ID
		if seen[key] {
			return fmt.Errorf("device %s named twice", key)
		}
		seen[key] = true
		var dev *Device
		for i := range n.Devices() {
			if n.Devices()[i].Type == d.Type && n.Devices()[i].ID == d.ID {
				dev = &n.Devices()[i]
			}
		}
		if dev == nil {
			return fmt.Errorf("device %s is not on the node", key)
		}
		if !dev.Healthy {
			return fmt.Errorf("device %s is unhealthy", key)
		}
		if dev.Model != d.Model {
			return fmt.Errorf("device %s model %q, placement says %q", key, dev.Model, d.Model)
		}
		if d.Share <= 0 || d.Share > 1000 || (len(req) > 0 && req[resource.Name(d.Type)] >= 1000 && d.Share != 1000) {
			return fmt.Errorf("device %s share %d", key, d.Share)
		}
		shares[d.Type] += int64(d.Share)
	}
	for name, q := range req {
		if !name.IsExtended() || q == 0 {
			continue
		}
		has := false
		for _, d := range n.Devices() {
			if d.Type == string(name) {
				has = true
			}
		}
		if has && shares[string(name)] != q {
			return fmt.Errorf("holds %d milli of %s devices, requested %d", shares[string(name)], name, q)
		}
	}
	for typ, s := range shares {
		if req[resource.Name(typ)] != s {
			return fmt.Errorf("holds %d milli of %s, requested %d", s, typ, req[resource.Name(typ)])
		}
	}
	return k.staticOK(spec, n)
}

// staticOK reports why spec's selector or tolerations refuse n, if they do.
func (k *checker) staticOK(spec *api.Task, n *Node) error {
	for key, v := range spec.NodeSelector {
		got, ok := n.Label(key)
		if !ok || !strings.Contains("|"+v+"|", "|"+got+"|") {
			return fmt.Errorf("selector %s=%s, node has %q", key, v, got)
		}
	}
	for _, ts := range k.r.nodes[n.Name()].Taints {
		taint, _ := api.ParseTaint(ts)
		if taint.Effect == api.PreferNoSchedule {
			continue
		}
		tolerated := false
		for _, s := range spec.Tolerations {
			tol, _ := api.ParseToleration(s)
			if tol.Tolerates(taint) {
				tolerated = true
			}
		}
		if !tolerated {
			return fmt.Errorf("untolerated taint %s", ts)
		}
	}
	return nil
}

// checkTasks: no accepted task disappears, states are valid, terminal
// states stick, and a placed task sits on a known node.
func (k *checker) checkTasks() error {
	c := k.r.c
	for _, id := range k.r.ids {
		tk, ok := c.Task(id)
		if !ok {
			return fmt.Errorf("task %s disappeared", id)
		}
		s := tk.State()
		if s >= numStates || s == Preempted || s.String() == "unknown" {
			return fmt.Errorf("task %s in state %d (%s)", id, s, s)
		}
		if ts, ok := k.terminal[id]; ok && ts != s {
			return fmt.Errorf("task %s left terminal state %s for %s", id, ts, s)
		}
		if s.Terminal() {
			k.terminal[id] = s
		}
		holds := s == Scheduled || s == Running
		if holds != k.placed[id] {
			return fmt.Errorf("task %s is %s but the outputs say placed=%v", id, s, k.placed[id])
		}
		if holds {
			n := tk.Node()
			if n == nil {
				return fmt.Errorf("%s task %s has no node", s, id)
			}
			if m, ok := c.Node(n.Name()); !ok || m != n {
				return fmt.Errorf("task %s is on node %s that the core does not list", id, n.Name())
			}
			if k.notReadyCheck {
				if st := n.state; st == api.NodeNotReady || st == api.NodeDraining {
					return fmt.Errorf("task %s stays on node %s that is %s", id, n.Name(), st)
				}
			}
		} else if tk.Node() != nil {
			return fmt.Errorf("%s task %s still on node %s", s, id, tk.Node().Name())
		}
	}
	return nil
}

// checkAllocation asserts explicitly, from the outside, that each node's
// allocation is the sum of its placed tasks' requests and within capacity,
// and that no device is shared beyond 1000 milli.
func (k *checker) checkAllocation() error {
	c := k.r.c
	nd := c.Dims().Len()
	sums := map[*Node]*resource.Vector{}
	for _, n := range c.Nodes() {
		sums[n] = &resource.Vector{}
	}
	for _, id := range k.r.ids {
		tk, _ := c.Task(id)
		if s := tk.State(); s != Scheduled && s != Running {
			continue
		}
		sum, ok := sums[tk.Node()]
		if !ok {
			return fmt.Errorf("task %s on an unknown node", id)
		}
		sum.Add(tk.Options()[optIndex(int8(k.chosen[id]))].Request())
	}
	for _, n := range c.Nodes() {
		sum, alloc, capacity := sums[n], n.Allocated(), n.Capacity()
		for i := 0; i < nd; i++ {
			name := c.Dims().Name(i)
			if sum[i] > capacity[i] {
				return fmt.Errorf("node %s: placed tasks request %d of %s, capacity %d", n.Name(), sum[i], name, capacity[i])
			}
			if alloc[i] != sum[i] {
				return fmt.Errorf("node %s: allocated %d of %s, placed tasks request %d", n.Name(), alloc[i], name, sum[i])
			}
			if alloc[i] > capacity[i] || alloc[i] < 0 {
				return fmt.Errorf("node %s: allocated %d of %s, capacity %d", n.Name(), alloc[i], name, capacity[i])
			}
		}
		used := map[string]int64{}
		for _, d := range n.Devices() {
			if d.Used < 0 || d.Used > 1000 || (!d.Healthy && d.Used != 0) {
				return fmt.Errorf("node %s device %s/%s used %d (healthy %v)", n.Name(), d.Type, d.ID, d.Used, d.Healthy)
			}
			used[d.Type] += int64(d.Used)
		}
		for typ, u := range used {
			i, _ := c.Dims().Lookup(resource.Name(typ))
			if u != alloc[i] {
				return fmt.Errorf("node %s: devices of %s hold %d, allocated %d", n.Name(), typ, u, alloc[i])
			}
		}
	}
	return nil
}

// fitsNow reports whether req (of spec) fits on n as n is now: n is ready,
// its selector and taints admit spec, every requested amount is free, and a
// device request finds free devices (whole ones unused, a share on one
// device with room), and the placement constraints allow it there as the
// oracle sees them (consFits; placed and nodes are the state's entries). A
// pooled extended resource (capacity, no devices) needs only the free
// amount.
func (k *checker) fitsNow(spec *api.Task, req resource.List, n *Node, placed, nodes []consEntry) bool {
	c := k.r.c
	if !n.Schedulable() || k.staticOK(spec, n) != nil {
		return false
	}
	if c.Config().Policy == "load-predict" && n.load.forecast.n > 0 {
		return false // its load filter depends on heartbeat samples: not modelled
	}
	for name, q := range req {
		if q == 0 {
			continue
		}
		i, ok := c.Dims().Lookup(name)
		if !ok || q > n.Capacity()[i]-n.Allocated()[i] {
			return false
		}
		if !name.IsExtended() {
			continue
		}
		typed, share := false, false
		whole := int64(0)
		for _, d := range n.Devices() {
			if d.Type != string(name) {
				continue
			}
			typed = true
			if d.Healthy && d.Used == 0 {
				whole++
			}
			if d.Healthy && int64(d.Free()) >= q {
				share = true
			}
		}
		if typed && ((q >= 1000 && whole < q/1000) || (q < 1000 && !share)) {
			return false
		}
	}
	return consFits(spec, n, placed, nodes)
}

// stranded reports a pending task that fits on a ready node as things are.
// With pooled false, options asking for the pooled license resource are
// not considered.
func (k *checker) stranded(pooled bool) error {
	c := k.r.c
	placed, nodes := k.placedEntries(), k.currentNodes()
	for _, id := range k.r.ids {
		tk, _ := c.Task(id)
		if tk.State() != Pending {
			continue
		}
		spec := k.r.specs[id]
		reqs := []resource.List{spec.Resources}
		for _, a := range spec.Alternatives {
			reqs = append(reqs, a.Resources)
		}
		for oi, req := range reqs {
			if _, lic := req[licRes]; lic && !pooled {
				continue
			}
			for _, n := range c.Nodes() {
				if k.fitsNow(spec, req, n, placed, nodes) {
					return fmt.Errorf("task %s stays pending (%q) though option %d fits on node %s (allocated %s of %s)",
						id, tk.Reason(), oi-1, n.Name(), c.Dims().Format(n.Allocated()), c.Dims().Format(n.Capacity()))
				}
			}
		}
	}
	return nil
}
