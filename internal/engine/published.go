package engine

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// published is the engine's read model: the durable records as the last
// commit published them, with the listing orders, and the waiters on a
// task's next change. The loop changes it only when it publishes a
// durable commit (publishRecords, commit.go), under mu; readers (the
// HTTP front end, watches, the Kubernetes front end) read it under mu's
// read lock and never enter the loop. A published record is never
// changed: a change publishes a new record, so a reader may keep one
// after the lock is released.
//
// The reads that need the core's state (Summarize, NodePage, QueueInfo,
// queue views) are loop commands instead (views.go): the core is
// loop-owned.
type published struct {
	mu     sync.RWMutex // guards tasks, order, nodes, queues, jobs, jobOrder, svc, pools and fatal
	tasks  map[string]*TaskRecord
	order  []string // task ids in submission order (for listing)
	nodes  map[string]*api.Node
	queues map[string]*api.Queue
	jobs   map[string]*JobRecord
	// jobOrder is the job ids in submission order (for listing).
	jobOrder []string
	// svc is the services (services.go), pools the node pools (pools.go):
	// published under mu, staged by the loop.
	svc   serviceState
	pools poolState
	fatal error // why the engine stopped (a failed commit)
	// done is closed once the engine has stopped.
	done chan struct{}
	// waitMu guards waiters: for each task someone waits on, one channel
	// that the commit publishing the task's next change closes. It is not
	// mu, so that registering a waiter never blocks the readers or the
	// loop's publication.
	waitMu  sync.Mutex
	waiters map[string]chan struct{}
}

func newPublished() published {
	return published{done: make(chan struct{}), tasks: map[string]*TaskRecord{}, nodes: map[string]*api.Node{},
		queues: map[string]*api.Queue{}, jobs: map[string]*JobRecord{}, waiters: map[string]chan struct{}{},
		svc: newServiceState(), pools: newPoolState()}
}

// wakeWaiters closes the channels of those waiting on the changed tasks.
// A waiter registers before it reads the record, so it either reads the
// new record or is woken here.
func (p *published) wakeWaiters(changes []change) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	if len(p.waiters) == 0 {
		return
	}
	for _, c := range changes {
		if ch, ok := p.waiters[c.id]; ok {
			close(ch)
			delete(p.waiters, c.id)
		}
	}
}

// ListJobs returns up to limit jobs matching f in submission order from
// position cursor, and the cursor of the next page (0: no more). One call
// looks at no more than maxListScan tasks in all.
func (p *published) ListJobs(f JobFilter, cursor, limit int) (out []JobEntry, next int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if cursor < 0 || cursor > len(p.jobOrder) {
		cursor = len(p.jobOrder)
	}
	i, scanned := cursor, 0
	for ; i < len(p.jobOrder) && len(out) < limit && scanned < maxListScan; i++ {
		j := p.jobs[p.jobOrder[i]]
		if j == nil || (f.Tenant != "" && j.Tenant != f.Tenant) || (f.Queue != "" && j.Spec.Queue != f.Queue) {
			continue
		}
		tasks := make([]*TaskRecord, 0, len(j.TaskIDs))
		states := make([]string, 0, len(j.TaskIDs))
		for _, tid := range j.TaskIDs {
			if r := p.tasks[tid]; r != nil {
				tasks = append(tasks, r)
				states = append(states, r.State)
			}
		}
		scanned += 1 + len(j.TaskIDs)
		st := j.State(states)
		if f.State != "" && st != f.State {
			continue
		}
		out = append(out, JobEntry{Job: j, Tasks: tasks, State: st})
	}
	if i < len(p.jobOrder) {
		return out, i
	}
	return out, 0
}

// Job returns a job and its tasks' records (do not modify them).
func (p *published) Job(id string) (*JobRecord, []*TaskRecord, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	j, ok := p.jobs[id]
	if !ok {
		return nil, nil, false
	}
	tasks := make([]*TaskRecord, 0, len(j.TaskIDs))
	for _, tid := range j.TaskIDs {
		if r := p.tasks[tid]; r != nil {
			tasks = append(tasks, r)
		}
	}
	return j, tasks, true
}

// NodePools lists the pools by name.
func (p *published) NodePools() []api.NodePool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]api.NodePool, 0, len(p.pools.recs))
	for _, p := range p.pools.recs {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b api.NodePool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Services lists the services of tenant ("" for all), by id.
func (p *published) Services(tenant string) []*ServiceRecord {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*ServiceRecord, 0, len(p.svc.recs))
	for _, r := range p.svc.recs {
		if tenant == "" || r.Tenant == tenant {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *ServiceRecord) int {
		if a.ID() < b.ID() {
			return -1
		}
		return 1
	})
	return out
}

// Service is the published record of service id.
func (p *published) Service(id string) (*ServiceRecord, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.svc.recs[id]
	return r, ok
}

// Replicas lists service id's replica tasks (live, and finished ones not
// yet forgotten) in submission order.
func (p *published) Replicas(id string) []*TaskRecord {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ids := p.replicaOrder(id)
	out := make([]*TaskRecord, len(ids))
	for i, tid := range ids {
		out[i] = p.tasks[tid]
	}
	return out
}

// replicaOrder is service id's replica ids in submission order; under mu.
func (p *published) replicaOrder(id string) []string {
	set := p.svc.replicas[id]
	recs := make([]*TaskRecord, 0, len(set))
	for tid := range set {
		if r := p.tasks[tid]; r != nil {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b *TaskRecord) int { return cmp.Compare(a.Seq, b.Seq) })
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Spec.ID
	}
	return out
}

// Task returns the durable record of a task (do not modify it).
func (p *published) Task(id string) (*TaskRecord, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.tasks[id]
	return r, ok
}

// NumTasks returns how many task records the engine holds.
func (p *published) NumTasks() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.tasks)
}

// WaitChange returns a channel closed at the next durable change of task
// id (or at once if the task is unknown). Every caller waiting on the same
// task shares one channel.
func (p *published) WaitChange(id string) <-chan struct{} {
	p.mu.RLock()
	_, ok := p.tasks[id]
	fatal := p.fatal
	p.mu.RUnlock()
	if !ok || fatal != nil {
		return closedCh
	}
	return p.waitChange(id)
}

// waitChange registers interest in task id's next published change.
func (p *published) waitChange(id string) <-chan struct{} {
	p.waitMu.Lock()
	ch, ok := p.waiters[id]
	if !ok {
		ch = make(chan struct{})
		p.waiters[id] = ch
	}
	p.waitMu.Unlock()
	return ch
}

// WaitPlaced waits until task id is no longer pending or blocked, or ctx
// ends, and returns its latest record.
func (p *published) WaitPlaced(ctx context.Context, id string) (*TaskRecord, error) {
	r, ok := p.Task(id)
	for {
		if !ok {
			return nil, errs.New(errs.NotFound, "id", "no task %q", id)
		}
		if !r.Waiting() {
			return r, nil
		}
		// Register, then read again: the commit that changes the task
		// publishes it before it wakes the registered waiters.
		ch := p.waitChange(id)
		if r, ok = p.Task(id); !ok || !r.Waiting() {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r, nil
		case <-p.done:
			return r, ErrStopped
		}
		r, ok = p.Task(id)
	}
}

// Stopped returns a channel closed once the engine has stopped.
func (p *published) Stopped() <-chan struct{} { return p.done }

// Nodes returns the durable node specs, by name.
func (p *published) Nodes() []api.Node {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]api.Node, 0, len(p.nodes))
	for _, n := range p.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// List returns up to limit tasks matching f in submission order, starting
// after position cursor; next is the cursor of the following page (0 when
// the listing is complete).
func (p *published) List(f Filter, cursor, limit int) (out []*TaskRecord, next int) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	order := p.order
	if f.Job != "" {
		order = nil
		if j := p.jobs[f.Job]; j != nil {
			order = j.TaskIDs
		}
	}
	if f.Service != "" {
		order = p.replicaOrder(f.Service)
	}
	if f.Newest {
		return p.listNewest(f, order, cursor, limit)
	}
	if cursor < 0 || cursor > len(order) {
		cursor = len(order)
	}
	i := cursor
	for scanned := 0; i < len(order) && len(out) < limit && scanned < maxListScan; i++ {
		scanned++
		if r := p.tasks[order[i]]; r != nil && f.match(r) {
			out = append(out, r)
		}
	}
	if i < len(order) {
		return out, i
	}
	return out, 0
}

// listNewest is List newest first. Its cursor is one more than the
// index of the next task to look at (0: start at the newest), so tasks
// submitted while a client pages do not shift its pages.
func (p *published) listNewest(f Filter, order []string, cursor, limit int) (out []*TaskRecord, next int) {
	i := len(order) - 1
	switch {
	case cursor < 0 || cursor > len(order):
		return nil, 0 // not a cursor of this listing
	case cursor > 0:
		i = cursor - 1
	}
	for scanned := 0; i >= 0 && len(out) < limit && scanned < maxListScan; i-- {
		scanned++
		if r := p.tasks[order[i]]; r != nil && f.match(r) {
			out = append(out, r)
		}
	}
	if i >= 0 {
		return out, i + 1
	}
	return out, 0
}

// Queues returns the queues (by name) a tenant may see ("" or "default":
// all).
func (p *published) Queues(tenant string) []api.Queue {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]api.Queue, 0, len(p.queues))
	for name, q := range p.queues {
		if tenant == "" || tenant == DefaultTenant || api.QueueOwner(name, p.queues) == tenant {
			out = append(out, *q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Err returns why the engine stopped (a failed store commit), or nil while
// it runs.
func (p *published) Err() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.fatal
}
