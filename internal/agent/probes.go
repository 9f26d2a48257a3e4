package agent

import (
	"container/heap"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/probe"
)

// The probes of the service replicas an agent runs (issue 44 §1), with
// Kubernetes' semantics: a startup probe holds the others back until it
// passes, and restarts the command when it fails; a failed liveness probe
// restarts the command in place (executor.Restart: the shim stops it and
// runs it again, with CrashLoop backoff); a readiness probe says whether
// the replica is ready. The states go to the server in the heartbeats
// (agentapi.TaskBeat), at once when readiness changes.
//
// One goroutine owns the states and a heap of due checks; the checks run
// in goroutines, at most maxProbing at once.

// maxProbing bounds the checks in flight; maxReason a probe failure's
// reason in a heartbeat; probeTick is the precision of the checks'
// times (a check runs up to a tick late, with the others due then).
const (
	maxProbing = 64
	maxReason  = 512
	probeTick  = 100 * time.Millisecond
)

// probeKinds index a replica's trackers.
const (
	kStartup = iota
	kLiveness
	kReadiness
	nKinds
)

var probeKindNames = [nKinds]string{api.ProbeStartup, api.ProbeLiveness, api.ProbeReadiness}

// runsOf and restart are what the prober needs of the executor.
type runsSource interface {
	RunsOf(task string, attempt int) (executor.Runs, bool)
	Restart(task string, attempt int, reason string) error
}

// replicaProbes is one replica attempt's probe state.
type replicaProbes struct {
	k     key
	specs [nKinds]*api.Probe
	t     [nKinds]*probe.Tracker
	env   []string
	gen   int // bumped when the command (re)starts: older results are dropped
	runs  int // the restarts seen in the runs file
	// restarted is why the command last ran again (the runs file's).
	restarted string
	paused    bool // a restart was asked: no checks until the command runs again
	reason    string
	busy      [nKinds]bool
}

// started: the startup probe passed (or there is none).
func (r *replicaProbes) started() bool {
	return r.specs[kStartup] == nil || r.t[kStartup] != nil && r.t[kStartup].OK()
}

// ready: started and alive, and the readiness probe passes (or there is
// none).
func (r *replicaProbes) ready() bool {
	if r.paused || !r.started() {
		return false
	}
	if t := r.t[kLiveness]; t != nil && !t.OK() {
		return false
	}
	return r.specs[kReadiness] == nil || r.t[kReadiness] != nil && r.t[kReadiness].OK()
}

// reset starts the trackers over for a command that started at at.
func (r *replicaProbes) reset(at time.Time) {
	r.gen++
	r.paused = false
	r.busy = [nKinds]bool{}
	for i, p := range r.specs {
		r.t[i] = nil
		if p != nil && (i == kStartup || r.specs[kStartup] == nil) {
			r.t[i] = probe.NewTracker(p, probeKindNames[i], at)
		}
	}
}

type dueCheck struct {
	at   time.Time
	k    key
	kind int
	gen  int
}

type probeHeap []dueCheck

func (h probeHeap) Len() int           { return len(h) }
func (h probeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h probeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *probeHeap) Push(x any)        { *h = append(*h, x.(dueCheck)) }
func (h *probeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type checkResult struct {
	c   dueCheck
	at  time.Time
	err error
}

// prober runs the replicas' probes.
type prober struct {
	log   *slog.Logger
	runs  func() runsSource
	check func(ctx context.Context, p *api.Probe, host string, env []string) error
	now   func() time.Time
	nudge func() // readiness changed: heartbeat soon
	// tick batches the checks (probeTick; 0: each at its own time, the
	// plain path, twice the CPU: BENCHMARKS.md).
	tick time.Duration

	mu   sync.Mutex
	reps map[key]*replicaProbes
	due  probeHeap
	wake chan struct{}
	res  chan checkResult
	sem  chan struct{}
}

func newProber(log *slog.Logger, runs func() runsSource, nudge func()) *prober {
	return &prober{log: log, runs: runs, check: probe.NewChecker().Check, now: time.Now, nudge: nudge, tick: probeTick,
		reps: map[key]*replicaProbes{}, wake: make(chan struct{}, 1), res: make(chan checkResult, maxProbing), sem: make(chan struct{}, maxProbing)}
}

// add starts probing a replica's attempt (once; again is a no-op).
func (p *prober) add(as *agentapi.Assignment, env map[string]string) {
	if as.Service == "" {
		return
	}
	k := key{as.Task, as.Attempt}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reps[k] != nil {
		return
	}
	r := &replicaProbes{k: k, specs: [nKinds]*api.Probe{as.Startup, as.Liveness, as.Readiness}}
	for k, v := range env {
		r.env = append(r.env, k+"="+v)
	}
	r.reset(p.now())
	p.reps[k] = r
	p.schedule(r)
}

// remove stops probing an attempt (it ended).
func (p *prober) remove(task string, attempt int) {
	p.mu.Lock()
	delete(p.reps, key{task, attempt})
	p.mu.Unlock()
}

// state is a replica attempt's beat fields; ok false: not a replica.
func (p *prober) state(task string, attempt int) (b agentapi.TaskBeat, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reps[key{task, attempt}]
	if r == nil {
		return b, false
	}
	return agentapi.TaskBeat{Replica: true, Started: !r.paused && r.started(), Ready: r.ready(), Restarts: r.runs, Probe: r.reason, Restarted: r.restarted}, true
}

// schedule puts r's trackers' next checks on the heap; under mu.
func (p *prober) schedule(r *replicaProbes) {
	for i, t := range r.t {
		if t != nil && !r.busy[i] {
			heap.Push(&p.due, dueCheck{at: t.Next(), k: r.k, kind: i, gen: r.gen})
		}
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run checks what is due until ctx ends.
func (p *prober) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		// Checks due within probeTick of each other start together: one
		// wakeup for a batch rather than one for each.
		next := max(p.launchDue(ctx, &wg), p.tick)
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		case r := <-p.res:
			p.observe(r)
			p.drain()
		}
	}
}

// drain applies the results that arrived meanwhile.
func (p *prober) drain() {
	for {
		select {
		case r := <-p.res:
			p.observe(r)
		default:
			return
		}
	}
}

// launchDue starts the due checks and returns the wait for the next.
func (p *prober) launchDue(ctx context.Context, wg *sync.WaitGroup) time.Duration {
	for {
		p.mu.Lock()
		now := p.now()
		if len(p.due) == 0 {
			p.mu.Unlock()
			return time.Hour
		}
		c := p.due[0]
		if c.at.After(now) {
			p.mu.Unlock()
			return c.at.Sub(now)
		}
		heap.Pop(&p.due)
		r := p.reps[c.k]
		if r == nil || r.gen != c.gen || r.busy[c.kind] || r.t[c.kind] == nil {
			p.mu.Unlock()
			continue
		}
		if p.restarted(r, now) || r.paused {
			p.mu.Unlock()
			continue
		}
		r.busy[c.kind] = true
		spec, env := r.specs[c.kind], r.env
		p.mu.Unlock()
		select {
		case p.sem <- struct{}{}:
		case r := <-p.res: // a full pool: take a result to free a slot's owner
			p.observe(r)
			p.sem <- struct{}{}
		case <-ctx.Done():
			return 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.check(ctx, spec, "127.0.0.1", env)
			<-p.sem
			select {
			case p.res <- checkResult{c: c, at: p.now(), err: err}:
			case <-ctx.Done():
			}
		}()
	}
}

// restarted reads the runs file: a command that ran again since the last
// look starts its trackers over (and a paused replica resumes); under mu.
// It reports whether r's trackers were reset (the due check is stale).
func (p *prober) restarted(r *replicaProbes, now time.Time) bool {
	src := p.runs()
	if src == nil {
		return false
	}
	runs, ok := src.RunsOf(r.k.task, r.k.attempt)
	if !ok || runs.Restarts == r.runs && !r.paused {
		return false
	}
	if runs.Started.IsZero() || runs.Restarts == r.runs {
		// Waiting to run again (or the asked restart not begun): look
		// again a second later.
		heap.Push(&p.due, dueCheck{at: now.Add(time.Second), k: r.k, kind: firstKind(r), gen: r.gen})
		r.paused = true
		return true
	}
	r.runs, r.restarted = runs.Restarts, errs.ClipTo(runs.Reason, maxReason)
	r.reset(runs.Started)
	p.schedule(r)
	return true
}

// firstKind is a kind r has a tracker for.
func firstKind(r *replicaProbes) int {
	for i, t := range r.t {
		if t != nil {
			return i
		}
	}
	return kStartup
}

// observe applies a check's result.
func (p *prober) observe(res checkResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reps[res.c.k]
	if r == nil || r.gen != res.c.gen {
		return
	}
	r.busy[res.c.kind] = false
	t := r.t[res.c.kind]
	wasReady := r.ready()
	t.Observe(res.at, res.err)
	name := probeKindNames[res.c.kind]
	switch {
	case res.err != nil:
		r.reason = errs.ClipTo(name+" probe failed: "+res.err.Error(), maxReason)
	case strings.HasPrefix(r.reason, name+" "):
		r.reason = "" // the failing probe passes again
	}
	switch {
	case res.c.kind == kStartup && t.OK():
		// Started: liveness and readiness begin.
		for _, i := range []int{kLiveness, kReadiness} {
			if s := r.specs[i]; s != nil {
				r.t[i] = probe.NewTracker(s, probeKindNames[i], res.at)
			}
		}
		r.t[kStartup] = nil
		r.specs[kStartup] = nil
	case (res.c.kind == kStartup || res.c.kind == kLiveness) && t.Failed():
		p.restart(r, probeKindNames[res.c.kind]+" probe failed: "+t.Reason())
	}
	if r.ready() != wasReady {
		p.nudge()
	}
	if !r.paused {
		p.schedule(r)
	}
}

// restart asks the shim to run r's command again; under mu.
func (p *prober) restart(r *replicaProbes, why string) {
	src := p.runs()
	if src == nil {
		return
	}
	p.log.Info("restarting a replica's command", "task", r.k.task, "attempt", r.k.attempt, "reason", why)
	if err := src.Restart(r.k.task, r.k.attempt, why); err != nil {
		p.log.Warn("restart", "task", r.k.task, "err", err)
		return
	}
	r.paused = true
	r.gen++
	heap.Push(&p.due, dueCheck{at: p.now().Add(200 * time.Millisecond), k: r.k, kind: firstKind(r), gen: r.gen})
}
