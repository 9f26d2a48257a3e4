package engine

import (
	"cmp"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/store"
)

// Config configures an engine.
type Config struct {
	Core core.Config
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxBatch bounds the commands applied in one step (default 4096).
	MaxBatch int
	Logger   *slog.Logger
	// Metrics, when set, is updated by the loop.
	Metrics *metrics.Metrics
	// HeartbeatInterval is how often agents heartbeat (default 2s);
	// MissedHeartbeats how many may be missed before their node is
	// notready (default 3).
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	// PauseCredit forgives agents the time the loop could not run (the
	// process paused, a step that took long): measured on the real
	// clock between steps, it is added to every node's last heartbeat
	// before the liveness check (agents.go). Off for a loop driven by a
	// fake Now, whose real gaps mean nothing.
	PauseCredit bool
	// DefaultLease is the lease of a task without a command that names
	// none (0: such a lease never expires); "never" (api.NoExpiry) asks
	// for no expiry explicitly.
	DefaultLease time.Duration
	// RetainFinished is how long finished tasks and jobs are kept (0:
	// for ever), RetainFinishedMax how many at most (0: no limit); see
	// retention.go.
	RetainFinished    time.Duration
	RetainFinishedMax int
	// RetainAccounting is how long the accounting records of finished
	// tasks are kept (0: DefaultRetainAccounting; negative: for ever); see
	// accounting.go.
	RetainAccounting time.Duration
	// Tracer, when set, traces the tasks submitted within a sampled span
	// (tracing.go); nil traces nothing.
	Tracer trace.Tracer
}

// ErrStopped is returned once the engine has stopped.
var ErrStopped = errs.New(errs.Unavailable, "", "the scheduler is stopped")

// Engine runs a core for a server. See the package doc for its contracts
// and a map of its files.
type Engine struct {
	cfg Config
	st  store.Store
	// volatile: st keeps nothing (store.Discard), so commits carry no
	// records of tasks, nodes, jobs and queues (events still count).
	volatile bool
	log      *slog.Logger
	cmds     chan command
	quit     chan struct{}

	// published is the read model: what readers see, changed only by
	// publish after a durable commit (published.go).
	published
	// events is the ring of recent events (its own lock, events.go).
	events eventLog
	// agents is the engine's side of the agent protocol (agents.go).
	agents
	// The commands and loop reads, by noun; each reaches the loop
	// through the Engine.
	taskCommands
	jobCommands
	serviceCommands
	poolCommands
	loopViews
	cluster string // the store's cluster id (meta cluster.id), set by recover

	// lastSummary is the summary the loop computed last (Summarize).
	lastSummary atomic.Pointer[Summary]
	// Loop-owned.
	c      *core.Core
	seq    uint64
	staged staging     // the step's changes, not yet committed (staging.go)
	batch  commitBatch // the commit path's buffers (commit.go)
	// owner is the durable holder of each agent node (NodeRecord.Agent);
	// admin the admin state (cordoned, draining) of each notready node
	// to restore when its heartbeats resume (NodeRecord.Admin).
	owner, admin map[string]string
	// jobLast is each job's state as its last event said.
	jobLast map[string]string
	// waiting counts the published waiting tasks (gauges.go).
	waiting waitCounts
	gauges  gauges
	// ret is the finished work waiting for retention (retention.go).
	ret retention
	// acct keeps the accounting records (accounting.go).
	acct *Accounting
	// tracing is the loop's task tracing (tracing.go); submitTrace the
	// traceparent of the submission the loop is running (submitCmd).
	tracing     taskTracing
	submitTrace string
	// gaugesDone is closed when gaugeDiskLoop ended (at once without one).
	gaugesDone chan struct{}
}

// New opens an engine on st, rebuilding the core from what st holds, and
// starts its loop. Stop it with Close.
func New(cfg Config, st store.Store) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := core.New(cfg.Core)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, st: st, log: cfg.Logger, c: c,
		volatile: isVolatile(st),
		cmds:     make(chan command, cfg.MaxBatch), quit: make(chan struct{}),
		published: newPublished(),
		agents:    agents{sessions: newSessions(cfg.HeartbeatInterval, cfg.MissedHeartbeats), live: newLiveness(), nudge: make(chan struct{}, 1)},
		staged:    newStaging(), owner: map[string]string{}, admin: map[string]string{}, jobLast: map[string]string{},
		waiting: newWaitCounts(), gauges: gauges{m: cfg.Metrics},
		ret:  retention{after: cfg.RetainFinished, max: cfg.RetainFinishedMax},
		acct: &Accounting{retain: cmp.Or(cfg.RetainAccounting, DefaultRetainAccounting)},
	}
	e.agents.e = e
	e.staged.e = e
	e.taskCommands.e, e.jobCommands.e, e.serviceCommands.e, e.poolCommands.e, e.loopViews.e = e, e, e, e, e
	e.acct.st, e.acct.volatile, e.acct.now, e.acct.log, e.acct.placed = st, e.volatile, cfg.Now, cfg.Logger, e.eachPlaced
	if cfg.Tracer != nil {
		e.tracing = taskTracing{tr: cfg.Tracer, policy: cfg.Core.Policy, reasons: map[string][]reasonEvent{}}
	}
	e.events.reset(1)
	if err := e.recover(); err != nil {
		return nil, err
	}
	go e.loop()
	e.gaugesDone = make(chan struct{})
	if _, ok := st.(diskReporter); ok && cfg.Metrics != nil {
		go e.gaugeDiskLoop()
	} else {
		close(e.gaugesDone)
	}
	return e, nil
}

// Done is closed when the loop has stopped: by Close, or after a failed
// commit (then Err says why).
func (e *Engine) Done() <-chan struct{} { return e.done }

// Close stops the loop; commands after it fail with ErrStopped.
func (e *Engine) Close() {
	select {
	case <-e.quit:
	default:
		close(e.quit)
	}
	<-e.done
	<-e.gaugesDone
}

// isVolatile reports whether st says it keeps nothing.
func isVolatile(st store.Store) bool {
	v, ok := st.(interface{ Volatile() bool })
	return ok && v.Volatile()
}
