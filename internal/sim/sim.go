package sim

import (
	"container/heap"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

// Config is one run.
type Config struct {
	Policy   string
	Seed     int64
	Cluster  trace.Cluster
	Workload trace.Workload
	// Protocol FGD (ATC'23): the jobs are shuffled with the seed and
	// submitted one after another (1 ms apart, as high-priority tasks
	// placed at once), never depart, and submission stops once the arrived
	// GPU demand reaches StopAt of the GPU capacity.
	FGD    bool
	StopAt float64 // FGD: e.g. 1.3 (default)
	// AllocAt lists arrived-demand fractions at which the GPU allocation
	// ratio is recorded (FGD default: 0.9, 1.0, 1.1, 1.2, 1.3).
	AllocAt []float64
	// SampleSize and MaxVisit override the core's (0: the policy's own).
	SampleSize, MaxVisit int
	// MaxSamples bounds the time series (default 600).
	MaxSamples int
	// ArrivalScale multiplies arrival times (0.5: arrivals twice as
	// dense); 0 means 1.
	ArrivalScale float64
	// NoObserve turns off the utilization feedback: by default each node
	// whose allocation changed reports its allocated fraction (CPU and per
	// device) as utilization, as agents' heartbeats would, for the
	// policies that learn from load.
	NoObserve bool
	// KnownWorkload declares every job's request to the core before the
	// run (core.ObserveRequest), as the FGD reference knows its pod list;
	// otherwise fragmentation-aware scoring learns the mix from arrivals.
	KnownWorkload bool
	// Profile declares each job's run time on each device model it lists
	// (trace.Job.ByModel) to the core before the run (core.ObserveRuntime,
	// per job class), as Gavel's profiled throughputs are known to its
	// policies; otherwise run times are learned from finished jobs.
	Profile bool
	// Resume makes a preempted job resume from its checkpoint: its next
	// attempt runs only the work left (progress is kept as a fraction,
	// so it carries across device models), after RestartCost (the
	// checkpoint's save and restore), and its tasks declare a checkpoint
	// (which gavel-rounds needs to swap a running task out). Without it a
	// preempted job runs again in full.
	Resume      bool
	RestartCost time.Duration
	// ShareRound, ShareMinRun and LASThresholds override the core's
	// TimeShareRound, TimeShareMinRun and LASThresholds (zero or nil: the
	// core's defaults).
	ShareRound, ShareMinRun time.Duration
	LASThresholds           []time.Duration
	// LASPromote is the core's LASPromote (0: never).
	LASPromote int
	// StarveFactor and StarveLimit are the core's starvation bound under
	// sjf and srtf (0, 0: none).
	StarveFactor int
	StarveLimit  time.Duration
	// GangReserveAfter is the core's GangReserveAfter (0: no gang
	// reservations).
	GangReserveAfter time.Duration
	// GavelRound and GavelObjective override the core's (zero or "": its
	// defaults).
	GavelRound     time.Duration
	GavelObjective string
	// KnownDurations tells the core each job's true run time
	// (api.Task.Duration = trace.Job.Duration), as SRTF papers assume;
	// otherwise policies learn run times from finished jobs.
	KnownDurations bool
	// Progress, when set, is called now and then with the jobs submitted
	// so far and the total.
	Progress func(done, total int)
}

// job is a workload job as the run tracks it. A job asking for more GPUs
// than the largest node has runs as a gang of tasks of a node's worth each
// (all placed at once); it is placed with its first task and done with its
// last.
type job struct {
	j         *trace.Arrival
	id        string
	arrival   int64 // ns of simulated time
	placed    int64 // -1 until placed
	done      int64 // -1 until completed
	tasks     []*task
	left      int // tasks not finished
	queue     int // index into run.queues
	prio      int
	gpuMilli  int64
	submitted bool
}

// task is one core task of a job.
type task struct {
	id   string
	j    *job
	spec api.Task
	gen  int // bumps at each placement and eviction, voiding old completions
	vec  resource.Vector
	node string
	on   bool // placed now
	// progress is the share of its work done (Config.Resume), from the
	// attempts that ended; the current attempt began its work at workAt
	// (after its restart cost) and runs dur for the whole work.
	progress    float64
	workAt, dur int64
	preemptions int
}

type completion struct {
	at  int64
	t   *task
	gen int
}

type completions []completion

func (h completions) Len() int { return len(h) }
func (h completions) Less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].t.id < h[b].t.id
}
func (h completions) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *completions) Push(x any)   { *h = append(*h, x.(completion)) }
func (h *completions) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// maxIdleWakeups ends a run whose core keeps waking (retries, aging) with
// nothing left to arrive or complete and nothing changing.
const maxIdleWakeups = 64

// tracked resource types of the series, in this order.
var seriesTypes = []string{string(trace.GPU), string(trace.TPU), string(resource.CPU), string(resource.Memory)}

type run struct {
	cfg   Config
	c     *core.Core
	epoch time.Time
	now   int64
	jobs  []*job
	byID  map[string]*task
	done  completions

	capVec   resource.Vector
	alloc    resource.Vector
	gpuDim   int // -1 when the cluster has no GPUs
	dimIndex []int
	// integrals of alloc over time, per dim
	integ    [resource.MaxDims]float64
	lastT    int64
	startT   int64
	arrivedG int64 // GPU milli of arrived jobs
	nextAt   int   // next AllocAt index

	queues    []string
	qAlloc    []resource.Vector
	qInteg    []float64
	series    []Sample
	res       Result
	events    int
	running   int
	delays    [4][]float64
	touched   map[string]bool
	submitted int
	finishedG int64 // GPU milli of completed jobs
	// the allocation integrals when the last job arrived
	arrInteg [resource.MaxDims]float64
	arrT     int64
}

// Run simulates cfg and measures it.
func Run(cfg Config) (Result, error) {
	if cfg.Policy == IdealSRTF {
		return runIdeal(cfg)
	}
	start := time.Now()
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = 600
	}
	if cfg.FGD {
		if cfg.StopAt == 0 {
			cfg.StopAt = 1.3
		}
		if cfg.AllocAt == nil {
			cfg.AllocAt = []float64{0.9, 1.0, 1.1, 1.2, 1.3}
		}
	}
	ccfg := core.DefaultConfig()
	if cfg.Policy != "" {
		ccfg.Policy = cfg.Policy
	}
	if cfg.SampleSize > 0 {
		ccfg.SampleSize = cfg.SampleSize
	}
	if cfg.MaxVisit > 0 {
		ccfg.MaxVisit = cfg.MaxVisit
	}
	if cfg.ShareRound > 0 {
		ccfg.TimeShareRound = cfg.ShareRound
	}
	if cfg.ShareMinRun > 0 {
		ccfg.TimeShareMinRun = cfg.ShareMinRun
	}
	if cfg.LASThresholds != nil {
		ccfg.LASThresholds = cfg.LASThresholds
	}
	ccfg.LASPromote = cfg.LASPromote
	ccfg.StarveFactor, ccfg.StarveLimit = cfg.StarveFactor, cfg.StarveLimit
	ccfg.GangReserveAfter = cfg.GangReserveAfter
	if cfg.GavelRound > 0 {
		ccfg.GavelRound = cfg.GavelRound
	}
	if cfg.GavelObjective != "" {
		ccfg.GavelObjective = cfg.GavelObjective
	}
	if ccfg.MaxVisit < ccfg.SampleSize {
		ccfg.MaxVisit = ccfg.SampleSize
	}
	c, err := core.New(ccfg)
	if err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, c: c, epoch: time.Unix(1_600_000_000, 0), byID: map[string]*task{}, gpuDim: -1, touched: map[string]bool{}}
	r.res = Result{Policy: ccfg.Policy, Seed: cfg.Seed, Cluster: cfg.Cluster.Name, Workload: cfg.Workload.Name, Nodes: len(cfg.Cluster.Nodes)}
	if err := r.setup(); err != nil {
		return Result{}, err
	}
	if err := r.loop(); err != nil {
		return Result{}, err
	}
	r.finish()
	r.res.WallSeconds = time.Since(start).Seconds()
	r.res.Events = r.events
	if r.res.WallSeconds > 0 {
		r.res.EventsPerSec = float64(r.events) / r.res.WallSeconds
	}
	return r.res, nil
}

func (r *run) at(ns int64) time.Time { return r.epoch.Add(time.Duration(ns)) }

func (r *run) setup() error {
	for i := range r.cfg.Cluster.Nodes {
		n := &r.cfg.Cluster.Nodes[i]
		if err := r.c.UpsertNode(r.epoch, n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, d := range n.Devices {
			switch d.Type {
			case string(trace.GPU):
				r.res.GPUs++
			case string(trace.TPU):
				r.res.TPUs++
			}
		}
	}
	r.c.TakeOutput()
	dims := r.c.Dims()
	for _, n := range r.c.Nodes() {
		r.capVec.Add(n.Capacity())
	}
	if d, ok := dims.Lookup(trace.GPU); ok {
		r.gpuDim = d
	}
	r.dimIndex = make([]int, len(seriesTypes))
	for i, name := range seriesTypes {
		r.dimIndex[i] = -1
		if d, ok := dims.Lookup(resource.Name(name)); ok {
			r.dimIndex[i] = d
		}
	}
	order := make([]int, len(r.cfg.Workload.Arrivals))
	for i := range order {
		order[i] = i
	}
	if r.cfg.FGD {
		// The reference's protocol: the pods shuffled, then pods drawn at
		// random from the list (with replacement) until the arrived GPU
		// demand would pass StopAt of the capacity.
		rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0x5eed))
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		if r.gpuDim >= 0 && len(order) > 0 {
			limit := int64(r.cfg.StopAt * float64(r.capVec[r.gpuDim]))
			var sum int64
			for _, oi := range order {
				sum += r.cfg.Workload.Arrivals[oi].Task.Resources[trace.GPU]
			}
			for extra := 0; sum < limit && extra < 4*len(r.cfg.Workload.Arrivals); extra++ {
				oi := rng.IntN(len(r.cfg.Workload.Arrivals))
				order = append(order, oi)
				sum += r.cfg.Workload.Arrivals[oi].Task.Resources[trace.GPU]
			}
		}
	}
	qidx := map[string]int{}
	var maxGPUs int64 // the most GPUs one node has
	for _, n := range r.c.Nodes() {
		if r.gpuDim >= 0 {
			maxGPUs = max(maxGPUs, n.Capacity()[r.gpuDim])
		}
	}
	for k, oi := range order {
		tj := &r.cfg.Workload.Arrivals[oi]
		j := &job{j: tj, id: "j" + strconv.Itoa(oi), placed: -1, done: -1, arrival: int64(tj.At)}
		if tj.ID != "" {
			j.id = tj.ID
		}
		if k >= len(r.cfg.Workload.Arrivals) {
			j.id += "~" + strconv.Itoa(k) // a drawn copy
		}
		if r.cfg.FGD {
			j.arrival = int64(k) * int64(time.Millisecond)
		} else if sc := r.cfg.ArrivalScale; sc > 0 && sc != 1 {
			j.arrival = int64(float64(j.arrival) * sc)
		}
		q := tj.Task.Queue
		if _, ok := qidx[q]; !ok {
			qidx[q] = len(r.queues)
			r.queues = append(r.queues, q)
		}
		j.queue = qidx[q]
		j.prio = tj.Task.PriorityOrDefault()
		if r.cfg.FGD {
			j.prio = api.PriorityHigh
		}
		j.gpuMilli = tj.Task.Resources[trace.GPU]
		parts := int64(1)
		if maxGPUs > 0 && j.gpuMilli > maxGPUs && len(tj.Task.Alternatives) == 0 {
			parts = (j.gpuMilli + maxGPUs - 1) / maxGPUs
		}
		for p := int64(0); p < parts; p++ {
			t := &task{id: j.id, j: j, spec: tj.Task}
			if parts > 1 {
				t.id = j.id + "." + strconv.FormatInt(p, 10)
				t.spec.Resources = maps.Clone(tj.Task.Resources)
				for name, v := range tj.Task.Resources {
					t.spec.Resources[name] = (v + parts - 1) / parts
				}
				t.spec.Resources[trace.GPU] = maxGPUs
			}
			t.spec.ID = t.id
			if r.cfg.KnownDurations && tj.Duration > 0 {
				t.spec.Duration = api.Duration(tj.Duration)
			}
			prio := j.prio
			t.spec.Priority = &prio
			if r.cfg.Resume && t.spec.Checkpoint == nil {
				// It resumes: the core may stop it to run later (what
				// gavel-rounds' swaps need). Only a command is
				// checkpointed; the simulated job's stands for it.
				t.spec.Checkpoint = &api.Checkpoint{Signal: "SIGUSR1"}
				if len(t.spec.Command) == 0 {
					t.spec.Command = []string{"simulated"}
				}
			}
			if _, dup := r.byID[t.id]; dup {
				return fmt.Errorf("workload %s: job id %q twice", r.cfg.Workload.Name, t.id)
			}
			r.byID[t.id] = t
			j.tasks = append(j.tasks, t)
		}
		j.left = len(j.tasks)
		r.jobs = append(r.jobs, j)
	}
	if !r.cfg.FGD {
		sort.SliceStable(r.jobs, func(a, b int) bool { return r.jobs[a].arrival < r.jobs[b].arrival })
	}
	for _, q := range r.queues {
		if q == "" {
			continue
		}
		if err := r.c.SetQueue(r.epoch, &api.Queue{Name: q}); err != nil {
			return fmt.Errorf("queue %s: %w", q, err)
		}
	}
	if r.cfg.KnownWorkload {
		for i := range r.cfg.Workload.Arrivals {
			if err := r.c.ObserveRequest(r.epoch, &r.cfg.Workload.Arrivals[i].Task); err != nil {
				return fmt.Errorf("workload %s: %w", r.cfg.Workload.Name, err)
			}
		}
	}
	if r.cfg.Profile {
		for i := range r.cfg.Workload.Arrivals {
			j := &r.cfg.Workload.Arrivals[i]
			class := j.Task.Metadata["class"]
			if class == "" {
				continue
			}
			models := make([]string, 0, len(j.ByModel))
			for m := range j.ByModel {
				models = append(models, m)
			}
			slices.Sort(models)
			for _, m := range models {
				if err := r.c.ObserveRuntime(r.epoch, class, m, j.ByModel[m]); err != nil {
					return fmt.Errorf("workload %s: %w", r.cfg.Workload.Name, err)
				}
			}
		}
	}
	r.qAlloc = make([]resource.Vector, len(r.queues))
	r.qInteg = make([]float64, len(r.queues))
	r.res.Queues = len(r.queues)
	if len(r.jobs) > 0 {
		r.startT = r.jobs[0].arrival
		r.lastT, r.now = r.startT, r.startT
	}
	return nil
}

// advance integrates the allocation up to t.
func (r *run) advance(t int64) {
	if t <= r.lastT {
		return
	}
	dt := float64(t - r.lastT)
	for i := range r.alloc {
		if r.alloc[i] != 0 {
			r.integ[i] += float64(r.alloc[i]) * dt
		}
	}
	if len(r.queues) > 1 {
		for qi := range r.qAlloc {
			r.qInteg[qi] += r.dominant(&r.qAlloc[qi]) * dt
		}
	}
	r.lastT = t
	r.now = t
}

func (r *run) dominant(v *resource.Vector) float64 {
	var m float64
	for i := range v {
		if v[i] > 0 && r.capVec[i] > 0 {
			m = max(m, float64(v[i])/float64(r.capVec[i]))
		}
	}
	return m
}

func (r *run) gpuRatio() float64 {
	if r.gpuDim < 0 || r.capVec[r.gpuDim] == 0 {
		return 0
	}
	return float64(r.alloc[r.gpuDim]) / float64(r.capVec[r.gpuDim])
}

func (r *run) sample() {
	s := Sample{T: float64(r.now-r.startT) / 1e9, Alloc: map[string]float64{}, Running: r.running}
	for i, d := range r.dimIndex {
		if d >= 0 && r.capVec[d] > 0 {
			s.Alloc[seriesTypes[i]] = float64(r.alloc[d]) / float64(r.capVec[d])
		}
	}
	if r.gpuDim >= 0 && r.capVec[r.gpuDim] > 0 {
		s.Arrived = float64(r.arrivedG) / float64(r.capVec[r.gpuDim])
		s.Demand = float64(r.arrivedG-r.finishedG) / float64(r.capVec[r.gpuDim])
	}
	p := r.c.Pending()
	s.Pending = p[0] + p[1] + p[2] + p[3]
	r.series = append(r.series, s)
}

func (r *run) loop() error {
	next := 0 // next job to arrive
	total := len(r.jobs)
	lastSample, sampled := int64(0), false
	span := int64(0)
	if total > 0 {
		span = r.jobs[total-1].arrival - r.jobs[0].arrival
	}
	interval := max(span/int64(4*r.cfg.MaxSamples), 1)
	stopped := false
	idle := 0 // consecutive wakeups that changed nothing
	for {
		more := next < total && !stopped
		t := int64(math.MaxInt64)
		if more {
			t = r.jobs[next].arrival
		}
		if len(r.done) > 0 {
			t = min(t, r.done[0].at)
		}
		// The core's own wakeups (batch windows, aging, retries) are
		// followed until they stop changing anything with no arrival or
		// completion left to come.
		if w, ok := r.c.NextWakeup(); ok && (more || len(r.done) > 0 || idle < maxIdleWakeups) {
			t = min(t, max(w.Sub(r.epoch).Nanoseconds(), r.now))
		}
		if t == math.MaxInt64 {
			break
		}
		r.advance(t)
		changed := false
		for len(r.done) > 0 && r.done[0].at <= t {
			cp := heap.Pop(&r.done).(completion)
			tk := cp.t
			if cp.gen != tk.gen || !tk.on {
				continue
			}
			r.events++
			if err := r.c.TaskFinished(r.at(t), tk.id, core.Result{}); err != nil {
				return fmt.Errorf("finish %s: %w", tk.id, err)
			}
			r.release(tk)
			if tk.j.left--; tk.j.left == 0 {
				tk.j.done = t
				r.res.Completed++
				r.finishedG += tk.j.gpuMilli
			}
			r.apply()
			changed = true
		}
		for next < total && !stopped && r.jobs[next].arrival <= t {
			j := r.jobs[next]
			if r.cfg.FGD && r.gpuDim >= 0 && float64(r.arrivedG+j.gpuMilli) > r.cfg.StopAt*float64(r.capVec[r.gpuDim]) {
				// The next pod would pass the stop point: the protocol
				// ends here, at StopAt.
				stopped = true
				r.arrInteg, r.arrT = r.integ, t
				r.arrivedG = int64(r.cfg.StopAt * float64(r.capVec[r.gpuDim]))
				r.recordAllocAt()
				break
			}
			next++
			r.events++
			r.submitted++
			j.submitted = true
			r.arrivedG += j.gpuMilli
			if err := r.submit(t, j); err != nil { // takes the core's output
				return err
			}
			changed = true
			r.recordAllocAt()
			if next == total {
				r.arrInteg, r.arrT = r.integ, t
			}
			if r.cfg.Progress != nil && next%1000 == 0 {
				r.cfg.Progress(next, total)
			}
		}
		if w, ok := r.c.NextWakeup(); ok && w.Sub(r.epoch).Nanoseconds() <= t {
			r.events++
			r.c.Tick(r.at(t))
			if r.apply() {
				changed = true
			}
		}
		if changed {
			idle = 0
			r.observe(t)
			r.apply()
		} else {
			idle++
		}
		if !sampled || t-lastSample >= interval {
			r.sample()
			lastSample, sampled = t, true
		}
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(next, total)
	}
	r.sample()
	return nil
}

// recordAllocAt records the GPU allocation ratio at the arrived-demand
// points crossed.
func (r *run) recordAllocAt() {
	if r.gpuDim < 0 || r.capVec[r.gpuDim] == 0 {
		return
	}
	arrived := float64(r.arrivedG) / float64(r.capVec[r.gpuDim])
	for r.nextAt < len(r.cfg.AllocAt) && arrived >= r.cfg.AllocAt[r.nextAt] {
		r.res.AllocAt = append(r.res.AllocAt, AllocPoint{Arrived: r.cfg.AllocAt[r.nextAt], Alloc: r.gpuRatio(), FragRatio: r.fragRatio()})
		r.nextAt++
	}
}

// apply takes the core's output: preemptions and re-queues stop jobs,
// then placements start them (their completion scheduled from the run
// time on the chosen device model). One output may evict a task and place
// it again (or place and evict it): the stops go first, and of a task's
// placements only the last counts, if the core still has it placed.
func (r *run) apply() bool {
	out := r.c.TakeOutput()
	changed := len(out.Placements) > 0 || len(out.Transitions) > 0
	dims := r.c.Dims()
	for _, tr := range out.Transitions {
		tk := r.byID[tr.Task]
		if tk == nil || !tk.on {
			continue
		}
		if (tr.From == core.Scheduled || tr.From == core.Running) && tr.To != core.Succeeded {
			// Evicted or stopped: it holds nothing now; its completion
			// is void. A re-placement runs it again in full, or with
			// Resume the work left.
			if tr.To == core.Preempted {
				tk.preemptions++
				r.res.Preemptions++
				if r.cfg.Resume && tk.dur > 0 && r.now > tk.workAt {
					tk.progress = min(0.999999, tk.progress+float64(r.now-tk.workAt)/float64(tk.dur))
				}
			}
			r.release(tk)
			tk.gen++
		}
	}
	var last map[string]int
	if len(out.Transitions) > 0 {
		last = make(map[string]int, len(out.Placements))
		for i, p := range out.Placements {
			last[p.Task] = i
		}
	}
	for i, p := range out.Placements {
		tk := r.byID[p.Task]
		if tk == nil {
			continue
		}
		if last != nil {
			if last[p.Task] != i {
				continue
			}
			if ct, ok := r.c.Task(p.Task); !ok || (ct.State() != core.Scheduled && ct.State() != core.Running) {
				continue
			}
		}
		j := tk.j
		req := tk.spec.Resources
		if p.Chosen >= 0 && p.Chosen < len(tk.spec.Alternatives) {
			req = tk.spec.Alternatives[p.Chosen].Resources
		}
		v, err := dims.Vector(req)
		if err != nil {
			continue
		}
		if j.placed < 0 {
			j.placed = r.now
			r.res.Placed++
			d := float64(r.now-j.arrival) / 1e9
			r.delays[j.prio] = append(r.delays[j.prio], d)
		}
		tk.vec = v
		tk.on = true
		tk.node = p.Node
		r.touched[p.Node] = true
		r.alloc.Add(&v)
		r.qAlloc[j.queue].Add(&v)
		r.running++
		tk.gen++
		if r.cfg.FGD {
			continue // no departures
		}
		dur := j.j.Duration
		if len(p.Devices) > 0 && j.j.ByModel != nil {
			if d, ok := j.j.ByModel[p.Devices[0].Model]; ok {
				dur = d
			}
		}
		if dur > 0 {
			tk.dur, tk.workAt = int64(dur), r.now
			left := int64(dur)
			if r.cfg.Resume && tk.preemptions > 0 {
				tk.workAt += int64(r.cfg.RestartCost)
				left = int64(float64(dur) * (1 - tk.progress))
			}
			heap.Push(&r.done, completion{at: tk.workAt + left, t: tk, gen: tk.gen})
		}
	}
	return changed
}

func (r *run) release(tk *task) {
	r.alloc.Sub(&tk.vec)
	r.qAlloc[tk.j.queue].Sub(&tk.vec)
	tk.vec = resource.Vector{}
	tk.on = false
	r.touched[tk.node] = true
	r.running--
}

// observe feeds the touched nodes' allocated fractions to the core as
// their utilization.
func (r *run) observe(t int64) {
	if r.cfg.NoObserve || r.cfg.FGD || len(r.touched) == 0 {
		clear(r.touched)
		return
	}
	names := make([]string, 0, len(r.touched))
	for n := range r.touched {
		names = append(names, n)
	}
	slices.Sort(names) // deterministic order
	clear(r.touched)
	for _, name := range names {
		n, ok := r.c.Node(name)
		if !ok {
			continue
		}
		u := core.NodeUsage{}
		if c := n.Capacity()[resource.DimCPU]; c > 0 {
			u.CPU = float64(n.Allocated()[resource.DimCPU]) / float64(c)
		}
		if devs := n.Devices(); len(devs) > 0 {
			u.Devices = make(map[string]float64, len(devs))
			for _, d := range devs {
				u.Devices[d.ID] = float64(d.Used) / 1000
			}
		}
		r.c.ObserveNode(r.at(t), name, u)
	}
}

// submit hands a job's tasks to the core (a gang job first).
func (r *run) submit(t int64, j *job) error {
	if len(j.tasks) == 1 {
		spec := j.tasks[0].spec
		if err := r.c.Submit(r.at(t), &spec); err != nil {
			return fmt.Errorf("submit %s: %w", j.id, err)
		}
		r.apply()
		return nil
	}
	members := make([]string, len(j.tasks))
	for i, tk := range j.tasks {
		members[i] = tk.id
	}
	if err := r.c.AddJob(r.at(t), core.JobSpec{ID: j.id, Gang: &core.GangSpec{Members: members, MinMember: len(members)}}); err != nil {
		return fmt.Errorf("job %s: %w", j.id, err)
	}
	for _, tk := range j.tasks {
		spec := tk.spec
		if err := r.c.SubmitJobTask(r.at(t), j.id, &spec); err != nil {
			return fmt.Errorf("submit %s: %w", tk.id, err)
		}
	}
	r.apply()
	return nil
}
