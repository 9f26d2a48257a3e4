package core

import (
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
}

// Option is one way to run a task: its own resources (index -1) or one of
// its alternatives.
type Option struct {
	Index int // -1 for the task's resources, else the alternative's index
	Speed float64
	req   resource.Vector
	devs  []devReq // device-backed (extended) dims of req
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

// class is a scheduling class: tasks with the same options, selector and
// tolerations are interchangeable for placement, so one failed attempt
// stands for all of them until capacity changes.
type class struct {
	key         string
	opts        []Option
	selector    []selTerm // all terms
	identity    []selTerm // the terms on identity labels (checked per node)
	tolerations []api.Toleration
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

// Task is a task as the core tracks it.
type Task struct {
	id          string
	cls         *class
	rt          *runtimeClass
	prio        int8 // native priority
	level       int8 // effective level (aging lowers it)
	raised      int8 // how many times aging raised it
	state       State
	preemptible bool
	noRequeue   bool // fail instead of re-queueing when evicted

	seq        uint64
	enqueued   int64
	levelSince int64
	sortKey    int64
	duration   int64 // estimate, ns (0 = unknown)
	timeout    int64
	queueTTL   int64
	lease      int64

	q     *classQueue
	qpos  int32
	lprev *Task
	lnext *Task

	deadline int64
	tpos     int32
	tkind    timerKind

	node      *Node
	npos      int32
	chosen    int8
	devs      []devShare
	started   int64 // placement time, then the executor's start time
	attempt   int32
	unmet     int32
	dependent []*Task
	reason    string

	job      *job
	gang     *gang
	queue    *queueNode // its class's leaf (never nil)
	gready   bool       // pending in its gang's ready list (in no class queue)
	backoff  bool       // pending, waiting out a retry backoff (in no queue)
	failures int32      // retries used
	// locality (locality.go): the class preferring the data's nodes, the
	// task's own class, the wait, and whether the preference is spent.
	locCls  *class
	baseCls *class
	locWait int64
	locDone bool
}

type devShare struct {
	dev   int32 // index in node.devices
	milli int32
}

// ID returns the task's id.
func (t *Task) ID() string { return t.id }

// Priority returns the native priority (0 urgent .. 3 low).
func (t *Task) Priority() int { return int(t.prio) }

// Level returns the effective level after aging.
func (t *Task) Level() int { return int(t.level) }

// State returns the task's state.
func (t *Task) State() State { return t.state }

// Options returns the ways the task can run (do not modify).
func (t *Task) Options() []Option { return t.cls.opts }

// Node returns the node the task is placed on, or nil.
func (t *Task) Node() *Node { return t.node }

// Reason returns why the task is in its state (unplaced, failed, ...).
// A pending task whose class could not be placed reports why, after the
// reason it went back to pending (if any).
func (t *Task) Reason() string {
	r := t.ownReason()
	if t.state == Pending && t.q != nil && t.q.blocked && t.q.lastReason != "" {
		if r != "" {
			r += "; " + t.q.lastReason
		} else {
			r = t.q.lastReason
		}
	}
	if t.state == Pending && t.locCls != nil && t.cls == t.locCls {
		w := "waiting up to " + durString(t.locWait) + " for the nodes holding its data (locality)"
		if r != "" {
			return w + ": " + r
		}
		return w
	}
	return r
}

// ownReason is the task's reason before its class's: a member waiting
// for its gang has the gang's (gangShow), which all its waiting members
// share; until the gang's first schedule pass (after a restore), its own.
func (t *Task) ownReason() string {
	if t.gready && t.gang.shown != "" {
		return t.gang.shown
	}
	return t.reason
}

// classKey builds the scheduling-class key of a validated spec. Options are
// keyed by their canonical lists, so equal requests share a class.
func classKey(spec *api.Task) string {
	var b strings.Builder
	b.WriteString(spec.Resources.String())
	for _, a := range spec.Alternatives {
		b.WriteString("|")
		b.WriteString(a.Resources.String())
		b.WriteString("@")
		b.WriteString(strconv.FormatFloat(a.Speed, 'g', -1, 64))
	}
	b.WriteString("#")
	writePairs(&b, spec.NodeSelector, nil)
	b.WriteString("#")
	tols := append([]string(nil), spec.Tolerations...)
	sort.Strings(tols)
	b.WriteString(strings.Join(tols, ";"))
	return b.String()
}

// unknownRes is a requested resource no node has ever offered: it is not
// given a dim (tasks must not use up the table of resource names), and the
// option cannot be placed until a node brings it.
type unknownRes struct {
	name resource.Name
	q    int64
}

// computeDevs lists the option's device-backed (extended) dims.
func (o *Option) computeDevs(dims *resource.Dims) {
	o.devs = o.devs[:0]
	for i := 2; i < dims.Len(); i++ {
		if o.req[i] > 0 && dims.Name(i).IsExtended() {
			o.devs = append(o.devs, devReq{dim: i, milli: o.req[i]})
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
	add := func(idx int, v resource.Vector, u []unknownRes, speed float64) {
		if speed == 0 {
			speed = 1
		}
		o := Option{Index: idx, Speed: speed, req: v, unknown: u}
		o.computeDevs(dims)
		cl.opts = append(cl.opts, o)
	}
	add(-1, vecs[0], unknown[0], 1)
	for i, a := range spec.Alternatives {
		add(i, vecs[i+1], unknown[i+1], a.Speed)
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
	return cl, nil
}

// runtimeKey names the runtime class of a spec.
func runtimeKey(spec *api.Task, cls string) string {
	if c := spec.Metadata["class"]; c != "" {
		return "c:" + c
	}
	if spec.Name != "" {
		return "n:" + spec.Name
	}
	return "k:" + cls
}
