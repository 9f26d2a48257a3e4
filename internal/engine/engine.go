package engine

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/api"
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
	// DefaultLease is the lease of a task without a command that names
	// none (0: such a lease never expires); "never" (api.NoExpiry) asks
	// for no expiry explicitly.
	DefaultLease time.Duration
}

// ErrStopped is returned once the engine has stopped.
var ErrStopped = errs.New(errs.Unavailable, "", "the scheduler is stopped")

// Engine runs a core for a server. See the package doc for its contracts.
type Engine struct {
	cfg  Config
	st   store.Store
	log  *slog.Logger
	cmds chan command
	quit chan struct{}
	done chan struct{}

	mu     sync.RWMutex // guards tasks, order, nodes and fatal for readers
	tasks  map[string]*TaskRecord
	order  []string // task ids in submission order (for listing)
	nodes  map[string]*api.Node
	queues map[string]*api.Queue
	jobs   map[string]*JobRecord
	// jobOrder is the job ids in submission order (for listing).
	jobOrder []string
	// jobLast is each job's state as its last event said (loop-owned).
	jobLast map[string]string
	fatal   error
	// waitMu guards waiters: for each task someone waits on, one channel
	// that the commit publishing the task's next change closes. It is not
	// mu, so that registering a waiter never blocks the readers or the
	// loop's publication (it used to be mu held exclusively).
	waitMu  sync.Mutex
	waiters map[string]chan struct{}
	// events is the ring of recent events (its own lock, events.go).
	events eventLog
	// sessions is the agents' state (its own lock, sessions.go).
	sessions sessions
	cluster  string // the store's cluster id (meta cluster.id), set by recover

	// loop-owned
	c      *core.Core
	seq    uint64
	staged map[string]*TaskRecord
	stNode map[string]*api.Node
	stQ    map[string]*api.Queue
	stJob  map[string]*JobRecord
	// owner is the durable agent of each agent node; stAgent the staged
	// changes to it.
	owner, stAgent map[string]string
	// admin is the admin state (cordoned, draining) of each notready node
	// to restore when its heartbeats resume; stAdmin the staged changes.
	admin, stAdmin map[string]string
	// waiting counts the published waiting tasks; gauges are the
	// metrics (gauges.go).
	waiting waitCounts
	gauges  gauges
	// Buffers of commitStaged, reused from step to step.
	recsBuf []store.Record
	arena   []byte
	changes []change
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
		cmds: make(chan command, cfg.MaxBatch), quit: make(chan struct{}), done: make(chan struct{}),
		tasks: map[string]*TaskRecord{}, nodes: map[string]*api.Node{}, queues: map[string]*api.Queue{}, waiters: map[string]chan struct{}{},
		jobs: map[string]*JobRecord{}, stJob: map[string]*JobRecord{}, jobLast: map[string]string{}, waiting: newWaitCounts(), gauges: gauges{m: cfg.Metrics},
		staged: map[string]*TaskRecord{}, stNode: map[string]*api.Node{}, stQ: map[string]*api.Queue{},
		sessions: newSessions(cfg.HeartbeatInterval, cfg.MissedHeartbeats),
		owner:    map[string]string{}, stAgent: map[string]string{},
		admin: map[string]string{}, stAdmin: map[string]string{},
	}
	e.events.reset(1)
	if err := e.recover(); err != nil {
		return nil, err
	}
	go e.loop()
	return e, nil
}

// Close stops the loop; commands after it fail with ErrStopped.
func (e *Engine) Close() {
	select {
	case <-e.quit:
	default:
		close(e.quit)
	}
	<-e.done
}

func (e *Engine) loop() {
	defer close(e.done)
	timer := time.NewTimer(0) // a first step at once: liveness and the core's timers after a restart
	defer timer.Stop()
	batch := make([]command, 0, e.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case cmd := <-e.cmds:
			batch = append(batch, cmd)
		case <-timer.C:
		case <-e.quit:
			e.failPending(ErrStopped)
			return
		}
	drain:
		for len(batch) < e.cfg.MaxBatch {
			select {
			case cmd := <-e.cmds:
				batch = append(batch, cmd)
			default:
				break drain
			}
		}
		if err := e.step(batch); err != nil {
			e.log.Error("engine stopped: store commit failed", "err", err)
			e.mu.Lock()
			e.fatal = err
			e.mu.Unlock()
			failed := err // the store's own class (507 for a full disk) when it has one
			if errs.CodeOf(err) == errs.Internal {
				failed = errs.Wrap(errs.Unavailable, "", err)
			}
			for _, cmd := range batch {
				a := cmd.base()
				a.err = failed
				close(a.done)
			}
			e.failPending(ErrStopped)
			return
		}
		for _, cmd := range batch {
			close(cmd.base().done)
		}
		e.gauge(e.cfg.Now())
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		d := time.Hour
		now := e.cfg.Now()
		if next, ok := e.c.NextWakeup(); ok {
			d = next.Sub(now)
		}
		if next, ok := e.sessions.nextLiveness(); ok {
			d = min(d, next.Sub(now))
		}
		if next, ok := e.gauges.next(); ok {
			d = min(d, next.Sub(now))
		}
		d = max(d, 0)
		timer.Reset(d)
	}
}

// failPending answers every queued command with err.
func (e *Engine) failPending(err error) {
	for {
		select {
		case cmd := <-e.cmds:
			a := cmd.base()
			a.err = err
			close(a.done)
		default:
			return
		}
	}
}

// step applies a batch, lets the core decide, and commits all changes in
// one durable commit before anyone is answered.
func (e *Engine) step(batch []command) error {
	now := e.cfg.Now()
	for _, cmd := range batch {
		cmd.run(e, now)
	}
	e.checkLiveness(now)
	e.c.Tick(now)
	return e.commitStaged(now)
}
