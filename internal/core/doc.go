// Package core is hetsched's scheduler: a pure state machine in the manner of
// etcd's raft package. Inputs are method calls (Submit, Cancel, UpsertNode,
// RemoveNode, SetNodeState, SetDeviceHealth, TaskStarted, TaskFinished,
// Renew, ObserveNode, Tick), each carrying the current time; decisions are
// collected in an Output taken with TakeOutput.
//
// Contracts:
//   - No I/O, no goroutines, no wall clock, no randomness: time is an input
//     and ties are broken by order, so the same inputs give the same outputs.
//   - A Core is not safe for concurrent use; its owner serialises inputs.
//   - Inputs return *errs.Error for bad input (unknown ids, wrong state)
//     and change nothing when they fail.
//   - Time never goes backwards: an input older than the last one is taken
//     to happen at the last one's time.
//   - Nothing is ever over-allocated: a node's allocation never exceeds its
//     healthy capacity at placement time, and a device's share never exceeds
//     1000 milli.
//
// # Glossary
//
// Work and its classes:
//   - option: one way to run a task: its own resources (Option.Index -1)
//     or one of its alternatives. chosen (Task.chosen, Placement.Chosen)
//     is the Index of the option a placed task uses; optIndex maps it to
//     the option's position in class.opts.
//   - class: a scheduling class (class.go): tasks with the same options,
//     node selector, tolerations and tenant queue leaf are interchangeable
//     for placement, so one failed attempt stands for all of them until
//     capacity changes.
//   - runtimeClass: tasks whose runtimes predict each other (metadata
//     "class", else the task's name, else its scheduling class): what
//     runtime learning (learn.go) is keyed by. Unrelated to placement.
//   - level: a pending task's effective priority, 0 (urgent) to 3 (low):
//     its native priority until aging raises it. raised: how many times
//     aging raised it (0 or 1: a task is raised at most once, one level).
//   - tier: one level's configuration (TierConfig: target, batch, aging)
//     and its pending tasks in entry order for aging (tier, queue.go).
//   - band: a slot of the serving order (queue.go): a level's native work
//     and the work aging raised into it wait in separate bands, six in
//     all, served in band order.
//   - classQueue: the pending tasks of one class in one band (Task.cq):
//     the unit that is served, blocked when its head fits nowhere, and
//     woken when capacity it could use appears.
//
// Tenant queues (queues.go):
//   - queueNode: a node of the tenant queue tree: the root, a queue, or a
//     queue's own-task leaf, where the tasks that name the queue wait
//     (Task.leaf, class.leaf); used, max and guarantees are per queueNode.
//   - lane: the pending work of one queueNode in one band: for a leaf its
//     active class queues, otherwise its children with work, each in fair
//     order; serving a band walks the lanes from the root to a leaf.
//
// Nodes (index.go):
//   - group: nodes alike for static filters (labels, taints, resource
//     types, device models; capacities may differ), checked once per
//     group instead of once per node.
//   - bucket: a group's schedulable nodes sorted by their free amount of
//     the group's primary resource, four buckets per power of two, so that
//     a search starts where a fit is possible.
//
// Gangs (jobs.go, gangpreempt.go, gangdomain.go, gangreserve.go):
//   - try: one all-or-nothing attempt to place the members a gang needs,
//     rolled back unless they all fit.
//   - domain: a set of nodes a gang's members must share (one value of
//     its required topology label, one device model).
//   - reservation: nodes held for a gang that waited GangReserveAfter,
//     while the tasks it waits for end; a hold is its share of one node,
//     and backfill is other work that ends before its expected start.
//
// A placement attempt (placement.go) walks the buckets of its options'
// groups with a search context (searchCtx: its flags and reused buffers,
// passed explicitly to every step); a placement is a commit. A try that
// may be undone (a gang's; preemption's and reclaim's what-if evictions)
// runs between a journal checkpoint and its rollback or keep
// (journal.go).
//
// # Parts
//
// The Core is a coordinator: it takes the inputs, keeps the tasks, the
// nodes' index and the output, and calls its parts at named points. Each
// part is a type with its own state and a back reference to the Core for
// what it needs of the rest; none changes tentative state but through
// the journal.
//
//	ct    classTable  the scheduling and runtime classes (class.go)
//	lv    levels      the tiers' pending tasks, the bands' batches and
//	                  bypass counts (queue.go)
//	qs    queues      the tenant queue tree: quotas, usage, fair order
//	                  (queues.go)
//	pl    placer      the placement search (placement.go, strand.go,
//	                  reasons.go)
//	pe    preemptor   priority preemption, reclaim and time-sharing's
//	                  swaps (preempt.go)
//	wk    waker       the blocked class queues and what wakes them; the
//	                  retry lists (schedule.go)
//	jb    jobBook     the jobs, retries and dependencies (jobs.go,
//	                  depends.go)
//	gs    gangs       the gangs' tries, reservations and preemption
//	                  (gangs.go, gangdomain.go, gangreserve.go,
//	                  gangpreempt.go)
//	jr    journal     checkpoints, rollback, what-if evictions (journal.go)
//	lr    learner     learned runtimes and speeds, the request mix
//	                  (learn.go)
//	loc   locality    the locality waits (locality.go)
//	promo promoter    starvation deadlines: las's promotions, the
//	                  starvation bound (promote.go)
//	eta   estimator   where a pending task stands (eta.go)
//
// The policy's research parts are plugins behind small interfaces
// (plugins.go): QueueSortPlugin (the pending order), TimeSharePlugin (a
// time-sharing rank: las, srtf) and RoundPolicy (gavel-rounds: Next,
// Round, Gate), each holding its own state.
package core
