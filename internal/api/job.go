package api

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// Job is a set of tasks with dependencies among them (API.md "POST
// /api/v1/jobs"). The server stores and returns jobs and runs their DAG
// through task dependencies; gang placement, failure policies and retries
// are stored as given and act from the jobs issue on.
type Job struct {
	ID            string   `json:"id,omitempty"`
	Name          string   `json:"name,omitempty"`
	Queue         string   `json:"queue,omitempty"`
	Priority      *int     `json:"priority,omitempty"`
	Tasks         []Task   `json:"tasks"`
	Gang          *Gang    `json:"gang,omitempty"`
	FailurePolicy string   `json:"failurePolicy,omitempty"`
	Retries       *Retries `json:"retries,omitempty"`
	// Depends are the job's dependencies on other tasks and jobs (typed
	// as Task.Depends): no task of the job starts before they are met,
	// and every task of it is skipped when one can no longer be.
	Depends []string `json:"depends,omitempty"`
	// User is who submitted it (Task.User); its tasks carry it.
	User string `json:"user,omitempty"`
}

// Gang asks for all-or-nothing placement: at least MinMember of its tasks
// are placed at once or none is; a gang that cannot start within Timeout
// fails with the shortfall. Tasks names the members (default: every task of
// the job); Topology the node label keys whose shared value makes a domain
// the gang prefers to fit in, best first (default nvlink, ici, rack).
// RequiredTopology is a node label key whose value all members must share
// (a rack, an NVLink domain, a zone, a TPU slice): nodes without it hold
// no member. SameModel (default true) places every member on devices of
// one model: data-parallel training runs at its slowest member's pace.
// Disruption says how a running gang is evicted: "gang" (the default:
// evicting one member evicts them all, and a member that stops restarts
// the gang) or "member" (a member is preempted alone, and the others run
// on while it waits to be placed again).
type Gang struct {
	MinMember        int      `json:"minMember"`
	Timeout          Duration `json:"timeout,omitempty"`
	Tasks            []string `json:"tasks,omitempty"`
	Topology         []string `json:"topology,omitempty"`
	RequiredTopology string   `json:"requiredTopology,omitempty"`
	SameModel        *bool    `json:"sameModel,omitempty"`
	Disruption       string   `json:"disruption,omitempty"`
}

// Gang disruption modes.
const (
	DisruptGang   = "gang"
	DisruptMember = "member"
)

// DefaultGangTopology is the label keys a gang prefers to share.
var DefaultGangTopology = []string{"nvlink", "ici", "rack"}

// Retries is a job's retry policy.
type Retries struct {
	Limit   int      `json:"limit"`
	Backoff Duration `json:"backoff,omitempty"`
}

// Failure policies.
const (
	FailFast = "failFast"
	Continue = "continue"
)

// MaxJobTasks bounds one job.
const MaxJobTasks = 100_000

// Validate checks a job: its fields, every task, unique task ids,
// dependencies only on tasks of the same job, and no cycle (the error
// names it: "a → b → c → a"). Tasks without an id are not allowed in a
// job (their dependents could not name them).
func (j *Job) Validate() error {
	if j.ID != "" {
		if err := ValidateID("id", j.ID); err != nil {
			return err
		}
	}
	if len(j.Name) > MaxIDLen {
		return errs.Invalid("name", "at most %d characters", MaxIDLen)
	}
	if err := ValidateText("name", j.Name); err != nil {
		return err
	}
	if j.Queue != "" {
		if err := ValidateID("queue", j.Queue); err != nil {
			return err
		}
	}
	if err := validateDepends("depends", j.Depends, j.ID, j.ID+"."); err != nil {
		return err
	}
	if err := ValidateUser("user", j.User); err != nil {
		return err
	}
	if j.Priority != nil && (*j.Priority < 0 || *j.Priority > 3) {
		return errs.Invalid("priority", "must be 0..3, got %d", *j.Priority)
	}
	if len(j.Tasks) == 0 || len(j.Tasks) > MaxJobTasks {
		return errs.Invalid("tasks", "a job holds 1 to %d tasks, got %d", MaxJobTasks, len(j.Tasks))
	}
	switch j.FailurePolicy {
	case "", FailFast, Continue:
	default:
		return errs.Invalid("failurePolicy", "must be failFast or continue, got %q", truncate(j.FailurePolicy))
	}
	if g := j.Gang; g != nil {
		members := len(j.Tasks)
		if g.Tasks != nil {
			members = len(g.Tasks)
		}
		if g.MinMember < 1 || g.MinMember > members {
			return errs.Invalid("gang.minMember", "must be 1..%d (the gang's tasks), got %d", members, g.MinMember)
		}
		if g.Timeout < 0 {
			return errs.Invalid("gang.timeout", "must not be negative")
		}
		if len(g.Topology) > 8 {
			return errs.Invalid("gang.topology", "at most 8 label keys")
		}
		for i, k := range g.Topology {
			if err := ValidateLabelKey(k); err != nil {
				return errs.Invalid(fmt.Sprintf("gang.topology[%d]", i), "%v", err)
			}
		}
		switch g.Disruption {
		case "", DisruptGang, DisruptMember:
		default:
			return errs.Invalid("gang.disruption", "must be gang or member, got %q", truncate(g.Disruption))
		}
		if k := g.RequiredTopology; k != "" {
			if err := ValidateLabelKey(k); err != nil {
				return errs.Invalid("gang.requiredTopology", "%v", err)
			}
		}
	}
	if j.Retries != nil && (j.Retries.Limit < 0 || j.Retries.Limit > 100 || j.Retries.Backoff < 0) {
		return errs.Invalid("retries.limit", "must be 0..100, with a non-negative backoff")
	}
	index := make(map[string]int, len(j.Tasks))
	for i := range j.Tasks {
		f := fmt.Sprintf("tasks[%d]", i)
		t := &j.Tasks[i]
		if t.ID == "" {
			return errs.Invalid(f+".id", "every task of a job needs an id")
		}
		if err := t.Validate(); err != nil {
			return errs.Prefix(f, err)
		}
		if _, dup := index[t.ID]; dup {
			return errs.Invalid(f+".id", "duplicate task id %q in the job", t.ID)
		}
		index[t.ID] = i
	}
	if j.Gang != nil {
		seen := make(map[string]bool, len(j.Gang.Tasks))
		for i, id := range j.Gang.Tasks {
			if _, ok := index[id]; !ok {
				return errs.Invalid(fmt.Sprintf("gang.tasks[%d]", i), "%q is not a task of this job", id)
			}
			if seen[id] {
				return errs.Invalid(fmt.Sprintf("gang.tasks[%d]", i), "%q is listed twice", id)
			}
			seen[id] = true
		}
	}
	for i := range j.Tasks {
		for k, d := range j.Tasks[i].Depends {
			if _, ok := index[DependencyID(d)]; !ok {
				return errs.Invalid(fmt.Sprintf("tasks[%d].depends[%d]", i, k), "%q is not a task of this job (the job's own depends names other tasks and jobs)", DependencyID(d))
			}
		}
	}
	if cycle := findCycle(j.Tasks, index); cycle != nil {
		return errs.Invalid("tasks", "dependency cycle %s", strings.Join(cycle, " → "))
	}
	return nil
}

// findCycle returns one dependency cycle as a path that ends where it
// starts, or nil. Iterative depth-first search: O(tasks + edges).
func findCycle(tasks []Task, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(tasks))
	parent := make([]int, len(tasks))
	type frame struct{ node, next int }
	for start := range tasks {
		if color[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		parent[start] = -1
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := tasks[top.node].Depends
			if top.next == len(deps) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			d := index[DependencyID(deps[top.next])]
			top.next++
			switch color[d] {
			case white:
				color[d] = grey
				parent[d] = top.node
				stack = append(stack, frame{d, 0})
			case grey:
				// top.node depends on d, which is on the stack: the cycle
				// runs d → ... → top.node → d along dependencies.
				path := []string{tasks[d].ID}
				for n := top.node; n != d && n >= 0; n = parent[n] {
					path = append(path, tasks[n].ID)
				}
				path = append(path, tasks[d].ID)
				// path is d, top, ..., d: reverse the middle so it reads as
				// "a depends on b depends on ... on a".
				for l, r := 1, len(path)-2; l < r; l, r = l+1, r-1 {
					path[l], path[r] = path[r], path[l]
				}
				return path
			}
		}
	}
	return nil
}

// Expand replaces every sharded task (shards: N, or inputs) by its shards
// <id>-0 … <id>-(N-1), each with HETSCHED_SHARD, HETSCHED_SHARDS (and
// HETSCHED_INPUT, plus the input's locality) in its env; dependencies on
// the sharded task, and gang members naming it, become every shard. Call
// it before Validate; a job without sharded tasks is left as it is.
func (j *Job) Expand() error {
	sharded := false
	for i := range j.Tasks {
		sharded = sharded || j.Tasks[i].Shards != 0 || j.Tasks[i].Inputs != nil
	}
	if !sharded {
		return nil
	}
	shards := map[string][]string{}
	out := make([]Task, 0, len(j.Tasks))
	for i, t := range j.Tasks {
		f := fmt.Sprintf("tasks[%d]", i)
		if t.Shards == 0 && t.Inputs == nil {
			out = append(out, t)
			continue
		}
		n := t.Shards
		switch {
		case t.Shards != 0 && t.Inputs != nil:
			return errs.Invalid(f+".shards", "give shards or inputs, not both")
		case t.Inputs != nil:
			n = len(t.Inputs)
		}
		if n < 1 || n > MaxShards {
			return errs.Invalid(f+".shards", "a task fans out into 1 to %d shards, got %d", MaxShards, n)
		}
		if t.ID == "" {
			return errs.Invalid(f+".id", "a sharded task needs an id")
		}
		if len(out)+n > MaxJobTasks {
			return errs.Invalid("tasks", "a job holds at most %d tasks once its shards are counted", MaxJobTasks)
		}
		for k := 0; k < n; k++ {
			s := t
			s.Shards, s.Inputs = 0, nil
			s.ID = t.ID + "-" + strconv.Itoa(k)
			s.Env = make(map[string]string, len(t.Env)+3)
			for kk, v := range t.Env {
				s.Env[kk] = v
			}
			s.Env["HETSCHED_SHARD"] = strconv.Itoa(k)
			s.Env["HETSCHED_SHARDS"] = strconv.Itoa(n)
			if t.Inputs != nil {
				in := t.Inputs[k]
				if in.Name == "" {
					return errs.Invalid(fmt.Sprintf("%s.inputs[%d].name", f, k), "required")
				}
				s.Env["HETSCHED_INPUT"] = in.Name
				if in.Locality != nil {
					s.Locality = in.Locality
				}
			}
			out = append(out, s)
			shards[t.ID] = append(shards[t.ID], s.ID)
		}
	}
	expand := func(ids []string) []string {
		grow := false
		for _, d := range ids {
			grow = grow || shards[DependencyID(d)] != nil
		}
		if !grow {
			return ids
		}
		res := make([]string, 0, len(ids))
		for _, d := range ids {
			if s := shards[DependencyID(d)]; s != nil {
				for _, id := range s {
					res = append(res, WithDependencyID(d, id))
				}
			} else {
				res = append(res, d)
			}
		}
		return res
	}
	for i := range out {
		out[i].Depends = expand(out[i].Depends)
	}
	if j.Gang != nil && j.Gang.Tasks != nil {
		g := *j.Gang
		g.Tasks = expand(g.Tasks)
		j.Gang = &g
	}
	j.Tasks = out
	return nil
}
