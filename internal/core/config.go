package core

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// TierConfig is the behaviour of one priority tier.
type TierConfig struct {
	// Target is the tier's scheduling-delay target.
	Target time.Duration
	// BatchSize and Window: a batched tier is dispatched when BatchSize tasks
	// are waiting or the oldest has waited Window. Window 0 means immediate.
	// The window must sit well below Target: a task's delay is the window
	// plus the dispatch plus the wait for capacity, and the window is only
	// the first part. The defaults take half the target (DefaultConfig).
	BatchSize int
	Window    time.Duration
	// AgingAfter is how long a task waits at its native level before it is
	// raised one level (0 = never). Levels 0 and 1 never age, and a task is
	// raised at most once (queue.go).
	AgingAfter time.Duration
}

// Config is the core's configuration. The zero value is not valid; start
// from DefaultConfig.
type Config struct {
	Policy string
	Tiers  [4]TierConfig
	// AgingHysteresis was the extra fraction of AgingAfter a task waited
	// before each raise after its first. Aging now raises a task at most
	// once, so it is ignored; it is kept (and still validated) so that
	// configurations that set it still load.
	AgingHysteresis float64
	// AgedBypass bounds how often the work that aging raised may be passed
	// over: while a raised band has active work, at most AgedBypass
	// placements in a row from the bands ahead of it (urgent excepted) go
	// first, then its head is placed (queue.go). Raised work thus gets at
	// least 1/(AgedBypass+1) of the placements at levels 1 and 2 while it
	// waits, and natively more important work at least AgedBypass/(AgedBypass+1).
	// 0 serves raised work ahead of all but urgent work.
	AgedBypass int
	// SampleSize is how many fitting nodes of one node group are scored for
	// a placement; MaxVisit bounds the nodes looked at per group per attempt.
	SampleSize int
	MaxVisit   int
	// RetryInterval is how soon a search that hit MaxVisit is resumed.
	RetryInterval time.Duration
	// PreemptMinRuntime protects a task that started less than this ago.
	PreemptMinRuntime time.Duration
	// PreemptRetry is how often blocked urgent and high tasks try preemption
	// again without a capacity change (victims may have become eligible).
	PreemptRetry time.Duration
	// TimeShareRound is how often, under a time-sharing policy (srtf),
	// blocked tasks try again to take a running task's place: the
	// round of the time-sharing.
	TimeShareRound time.Duration
	// TimeShareMinRun protects, under a time-sharing policy, a task that
	// started less than this ago from being swapped out, so that tasks do
	// not thrash.
	TimeShareMinRun time.Duration
	// LASThresholds split las's queues by the device-service a task
	// attained (devices held × time; a task without devices counts as
	// one): queue 0 below the first threshold, queue 1 below the second,
	// and so on; ascending, 1 to 8 of them.
	LASThresholds []time.Duration
	// LASPromote is las's starvation knob (Tiresias' STARVELIMIT): a
	// pending task that ran before and has waited LASPromote times its
	// last run since it went back to pending is promoted to queue 0, its
	// attained service counted from there. 0: never; 2 by default (the
	// best mean JCT on Philly, docs/evaluation.md §5).
	LASPromote int
	// StarveFactor and StarveLimit bound the wait of a task under a policy
	// that orders pending tasks itself (sjf, srtf): once a task has waited
	// StarveFactor times its expected runtime, or StarveLimit, whichever
	// is less, it goes ahead of every task of its class queues that has
	// not (the longest waiting first) and, under srtf, ranks first until
	// it ends (nothing swaps it out). 0: no bound of that kind. las bounds
	// waits with LASPromote; the FIFO policies serve in arrival order.
	StarveFactor int
	StarveLimit  time.Duration
	// GangReserveAfter is how long a gang waits, unable to start, before
	// it gets a reservation: nodes held for it while the tasks there end,
	// with backfill around it (gangreserve.go); 0 (the default): never.
	// Off by default: on Philly-derived traces reservations lengthened
	// the mean completion time (docs/evaluation.md §6, §7).
	// GangReservations bounds the reservations held at once.
	GangReserveAfter time.Duration
	GangReservations int
	// GavelRound is gavel-rounds' round length (gavel.go); GavelObjective
	// its allocation's objective: "fairness" (heterogeneity-aware max-min
	// fairness, the default), "throughput" (the total normalised
	// throughput), or "agnostic" (max-min fairness that takes every model
	// for equally fast: Gavel's heterogeneity-agnostic baseline).
	GavelRound     time.Duration
	GavelObjective string
	// PreemptMaxVisit bounds the nodes examined for one preemption;
	// PreemptCandidates stops the walk once this many nodes offer a plan
	// (as kube-scheduler's minCandidateNodesAbsolute), the best of them
	// taken.
	PreemptMaxVisit   int
	PreemptCandidates int
	// DefaultDuration is the runtime assumed for a task with no estimate and
	// no history (shortest-job-first, expected completion).
	DefaultDuration time.Duration
	// LoadTarget is the utilization load-predict packs nodes towards.
	LoadTarget float64
	// MaxPlacementsPerCall bounds the placements one input makes, so that no
	// call holds the core for long; the rest follow at the next Tick (see
	// NextWakeup, which then answers "now").
	MaxPlacementsPerCall int
	// IdentityLabels are node labels whose values identify single nodes
	// (hostnames). They are left out of node groups, which would otherwise
	// shrink to one node each, and a selector on them is answered from an
	// index of their values. hetsched.io/node (the node's name) is always
	// one of them.
	IdentityLabels []string
	// PreemptAllTiers lets a task of any priority evict less important
	// tasks (a lower priority, or a smaller priority value of its own),
	// as any Kubernetes pod may evict pods of a smaller priority; without
	// it only urgent and high tasks do. Tiers still set latency targets
	// and batching either way.
	PreemptAllTiers bool
	// KeepOnNoExecute makes a NoExecute taint repel new tasks only: the
	// tasks already on the node stay. On Kubernetes the taint manager,
	// not the scheduler, evicts what does not tolerate such a taint
	// (after the toleration's tolerationSeconds); the front end sets it.
	// Without it a node upsert whose NoExecute taint a running task does
	// not tolerate sends that task back to pending.
	KeepOnNoExecute bool
	// TaskCapacityHint pre-sizes the task index for this many tasks (0: grow
	// as needed). Growing a million-entry index costs about a third of the
	// submission path; a server that knows its scale sets this.
	TaskCapacityHint int
}

// DefaultConfig returns the documented defaults (DESIGN.md tiers).
func DefaultConfig() Config {
	return Config{
		Policy: "least-allocated",
		Tiers: [4]TierConfig{
			{Target: time.Millisecond},
			{Target: time.Millisecond},
			// Windows are half the target: the other half is the budget
			// for the dispatch and for capacity to free up.
			{Target: 5 * time.Millisecond, BatchSize: 8, Window: 2500 * time.Microsecond, AgingAfter: 5 * time.Millisecond},
			{Target: 20 * time.Millisecond, BatchSize: 8, Window: 10 * time.Millisecond, AgingAfter: 20 * time.Millisecond},
		},
		AgingHysteresis:   0.5,
		AgedBypass:        3,
		SampleSize:        4,
		MaxVisit:          256,
		RetryInterval:     time.Millisecond,
		PreemptMinRuntime: 0,
		PreemptMaxVisit:   2048,
		PreemptCandidates: 100,
		PreemptRetry:      time.Second,
		TimeShareRound:    time.Minute,
		TimeShareMinRun:   time.Minute,
		LASThresholds:     []time.Duration{time.Hour},
		LASPromote:        2,
		StarveFactor:      10,
		StarveLimit:       7 * 24 * time.Hour,
		GangReserveAfter:  0,
		GangReservations:  1,
		GavelRound:        6 * time.Minute,
		GavelObjective:    "fairness",
		DefaultDuration:   time.Hour,
		LoadTarget:        0.8,

		MaxPlacementsPerCall: 8192,
		IdentityLabels:       []string{"kubernetes.io/hostname"},
	}
}

// Validate checks the configuration, naming the bad field.
func (c *Config) Validate() error {
	if _, ok := lookupPolicy(c.Policy); !ok {
		return errs.Invalid("policy", "unknown policy %q (known: %s)", c.Policy, PolicyNames())
	}
	for i, t := range c.Tiers {
		f := fmt.Sprintf("tiers[%d]", i)
		if t.Target < 0 || t.Window < 0 || t.AgingAfter < 0 {
			return errs.Invalid(f, "durations must not be negative")
		}
		if t.BatchSize < 0 || t.BatchSize > 1<<20 {
			return errs.Invalid(f+".batchSize", "must be 0..%d", 1<<20)
		}
		if i < 2 && (t.BatchSize > 1 || t.Window > 0) {
			return errs.Invalid(f, "urgent and high tasks are never batched")
		}
	}
	if c.AgingHysteresis < 0 || c.AgingHysteresis > 100 {
		return errs.Invalid("agingHysteresis", "must be 0..100")
	}
	if c.AgedBypass < 0 || c.AgedBypass > 1<<20 {
		return errs.Invalid("agedBypass", "must be 0..%d", 1<<20)
	}
	if c.SampleSize < 1 || c.SampleSize > 1024 {
		return errs.Invalid("sampleSize", "must be 1..1024")
	}
	if c.MaxVisit < c.SampleSize || c.MaxVisit > 1<<20 {
		return errs.Invalid("maxVisit", "must be sampleSize..%d", 1<<20)
	}
	if c.RetryInterval <= 0 {
		return errs.Invalid("retryInterval", "must be positive")
	}
	if c.PreemptRetry <= 0 {
		return errs.Invalid("preemptRetry", "must be positive")
	}
	if c.TimeShareRound <= 0 {
		return errs.Invalid("timeShareRound", "must be positive")
	}
	if c.TimeShareMinRun < 0 {
		return errs.Invalid("timeShareMinRun", "must not be negative")
	}
	if len(c.LASThresholds) < 1 || len(c.LASThresholds) > 8 {
		return errs.Invalid("lasThresholds", "want 1 to 8 thresholds, got %d", len(c.LASThresholds))
	}
	for i, th := range c.LASThresholds {
		if th <= 0 || i > 0 && th <= c.LASThresholds[i-1] {
			return errs.Invalid("lasThresholds", "must be positive and ascending, got %v", c.LASThresholds)
		}
	}
	if c.GavelRound <= 0 {
		return errs.Invalid("gavelRound", "must be positive")
	}
	if c.GavelObjective != "fairness" && c.GavelObjective != "throughput" && c.GavelObjective != "agnostic" {
		return errs.Invalid("gavelObjective", "must be fairness, throughput or agnostic, got %q", c.GavelObjective)
	}
	if c.StarveFactor < 0 || c.StarveFactor > 1000 {
		return errs.Invalid("starveFactor", "must be 0 (no bound) to 1000, got %d", c.StarveFactor)
	}
	if c.StarveLimit < 0 {
		return errs.Invalid("starveLimit", "must not be negative, got %s", c.StarveLimit)
	}
	if c.GangReserveAfter < 0 {
		return errs.Invalid("gangReserveAfter", "must not be negative (0: no reservations), got %s", c.GangReserveAfter)
	}
	if c.GangReservations < 0 || c.GangReservations > 64 {
		return errs.Invalid("gangReservations", "must be 0 to 64, got %d", c.GangReservations)
	}
	if c.LASPromote < 0 || c.LASPromote > 1000 {
		return errs.Invalid("lasPromote", "must be 0 (never) to 1000, got %d", c.LASPromote)
	}
	if c.PreemptMaxVisit < 1 {
		return errs.Invalid("preemptMaxVisit", "must be positive")
	}
	if c.PreemptCandidates < 1 {
		return errs.Invalid("preemptCandidates", "must be positive")
	}
	if c.DefaultDuration <= 0 {
		return errs.Invalid("defaultDuration", "must be positive")
	}
	if len(c.IdentityLabels) > 16 {
		return errs.Invalid("identityLabels", "at most 16")
	}
	for i, k := range c.IdentityLabels {
		if err := api.ValidateLabelKey(k); err != nil {
			return errs.Invalid("identityLabels["+strconv.Itoa(i)+"]", "%v", err)
		}
	}
	if c.TaskCapacityHint < 0 || c.TaskCapacityHint > 1<<26 {
		return errs.Invalid("taskCapacityHint", "must be 0..%d", 1<<26)
	}
	if c.MaxPlacementsPerCall < 1 {
		return errs.Invalid("maxPlacementsPerCall", "must be positive")
	}
	if c.LoadTarget <= 0 || c.LoadTarget > 1 {
		return errs.Invalid("loadTarget", "must be in (0, 1]")
	}
	return nil
}
