// Package elastic is the simulator's elastic run (issue 44 §4): a diurnal
// inference service that autoscales on a GPU utilization target, training
// jobs beside it, and a node pool that grows and shrinks under a cost per
// GPU-hour, all through the same scheduling core as the server, the
// server's autoscaler (package autoscale) and its node pool planner
// (package nodepool). It compares the run with a static fleet sized for
// the run's peak.
//
// The load (documented in docs/evaluation.md §8): requests per second
// follow a sinusoid over a day, from Trough at 04:00 to Peak at 16:00,
// with a seeded ±5 % noise per minute; a replica holds one GPU and serves
// ReplicaRPS at full utilization; a new replica serves once its model
// loaded (Startup after placement). Training jobs arrive as a Poisson
// process (TrainPerHour), each 1, 2, 4 or 8 GPUs for 30 minutes to 4
// hours, at low priority: an inference replica preempts them, and a
// preempted job starts over.
//
// Glossary:
//
//	demand      requests per second at a time
//	capacity    ready replicas × ReplicaRPS
//	SLO minute  a minute whose mean demand exceeded its mean capacity
//	queueing    a task's wait from its submission (or re-queue) to its
//	            placement
//	GPU-hours   every node's GPUs × the time it was held, a pool node
//	            from when it was asked for (its provisioning is paid)
package elastic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/autoscale"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/nodepool"
	"github.com/hetsched/hetsched/internal/resource"
)

// Config is one run.
type Config struct {
	Days          int
	Seed          int64
	Target        int // the GPU utilization target, percent
	Peak, Trough  float64
	ReplicaRPS    float64
	Startup       time.Duration
	TrainPerHour  float64
	BaseNodes     int // static 8-GPU nodes, always held
	PoolMax       int // the pool's 8-GPU nodes at most (0: no pool: a static run)
	Provision     time.Duration
	CostPerGPUH   float64
	ScaleOutAfter time.Duration
	ScaleInAfter  time.Duration
	Step          time.Duration
}

// Defaults is the documented run at target.
func Defaults(target int) Config {
	return Config{Days: 2, Seed: 1, Target: target, Peak: 4000, Trough: 800, ReplicaRPS: 100, Startup: time.Minute,
		TrainPerHour: 1.5, BaseNodes: 4, PoolMax: 12, Provision: 2 * time.Minute, CostPerGPUH: 2,
		ScaleOutAfter: 30 * time.Second, ScaleInAfter: 10 * time.Minute, Step: 10 * time.Second}
}

// Result is one run's measures.
type Result struct {
	Target        int     `json:"target"`
	Static        bool    `json:"static"`
	Nodes         int     `json:"nodes"`    // the most nodes held at once
	GPUHours      float64 `json:"gpuHours"` // held
	Cost          float64 `json:"cost"`     // GPU-hours × the price
	ReplicaP99    float64 `json:"replicaP99Seconds"`
	TrainP99      float64 `json:"trainP99Seconds"`
	AllP99        float64 `json:"allP99Seconds"`
	SLOMinutes    int     `json:"sloViolatingMinutes"`
	Minutes       int     `json:"minutes"`
	MeanUtil      float64 `json:"meanReplicaUtilization"`
	TrainDone     int     `json:"trainingJobsDone"`
	TrainPreempts int     `json:"trainingPreemptions"`
	MaxReplicas   int     `json:"maxReplicas"`
}

const gpusPerNode = 8

// task is one task of the run.
type task struct {
	id      string
	replica bool
	gpus    int
	dur     time.Duration
	queued  time.Time // submitted or re-queued
	placed  bool
	readyAt time.Time // a replica: serves from
	endAt   time.Time // a training job: its end, if it runs
}

// run is one run's state.
type run struct {
	cfg      Config
	c        *core.Core
	auto     *autoscale.Autoscaler
	planner  *nodepool.Planner
	pool     api.NodePool
	rng      *rand.Rand
	now      time.Time
	tasks    map[string]*task
	replicas []*task // live replicas, oldest first
	seq      int
	nodes    map[string]time.Time // node -> held since
	idle     map[string]time.Time
	draining map[string]bool
	arriving map[string]time.Time // pool node -> registers at
	poolSeq  int
	res      Result
	waits    struct{ replica, train []float64 }
	gpuSec   float64
	utilSum  float64
	utilN    int
	minute   struct{ demand, capacity float64 }
	desired  int
	nextEval time.Time
}

// Run simulates cfg.
func Run(cfg Config) (Result, error) {
	ccfg := core.DefaultConfig()
	c, err := core.New(ccfg)
	if err != nil {
		return Result{}, err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{cfg: cfg, c: c, planner: nodepool.New(ccfg), rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 44)), now: t0,
		tasks: map[string]*task{}, nodes: map[string]time.Time{}, idle: map[string]time.Time{}, draining: map[string]bool{},
		arriving: map[string]time.Time{}, desired: 2}
	r.res.Target, r.res.Static = cfg.Target, cfg.PoolMax == 0
	target := strconv.Itoa(cfg.Target) + "%"
	if r.auto, err = autoscale.New(api.Autoscale{Min: 2, Max: 200, Metrics: []api.AutoscaleMetric{{Resource: "nvidia.com/gpu", Target: target}}}); err != nil {
		return Result{}, err
	}
	r.pool = poolSpec(cfg)
	for i := range cfg.BaseNodes {
		if err := r.addNode(fmt.Sprintf("base-%d", i)); err != nil {
			return Result{}, err
		}
	}
	end := t0.Add(time.Duration(cfg.Days) * 24 * time.Hour)
	nextTrain := t0.Add(r.expo(time.Hour / time.Duration(max(cfg.TrainPerHour, 0.01))))
	for ; r.now.Before(end); r.now = r.now.Add(cfg.Step) {
		for !nextTrain.After(r.now) {
			r.submitTraining()
			nextTrain = nextTrain.Add(r.expo(time.Duration(float64(time.Hour) / cfg.TrainPerHour)))
		}
		r.finishTraining()
		r.serve()
		if err := r.pools(); err != nil {
			return Result{}, err
		}
		r.c.Tick(r.now)
		r.apply()
		r.account()
	}
	return r.result(), nil
}

// poolSpec is the run's pool: 8-GPU nodes under the price.
func poolSpec(cfg Config) api.NodePool {
	devs := make([]api.Device, gpusPerNode)
	for i := range devs {
		devs[i] = api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(i), Model: "A100"}
	}
	return api.NodePool{Name: "pool", Max: max(cfg.PoolMax, 1), CostPerHour: cfg.CostPerGPUH * gpusPerNode,
		ScaleOutAfter: api.Duration(cfg.ScaleOutAfter), ScaleInAfter: api.Duration(cfg.ScaleInAfter),
		Template: api.Node{Capacity: resource.List{resource.CPU: 96000, resource.Memory: 1 << 40}, Devices: devs},
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: []string{"simulated"}}}}
}

func (r *run) addNode(name string) error {
	n := nodepool.Template(&r.pool, name)
	if err := r.c.UpsertNode(r.now, &n); err != nil {
		return err
	}
	if _, ok := r.nodes[name]; !ok {
		r.nodes[name] = r.now
	}
	return nil
}

// expo is an exponential wait of mean m.
func (r *run) expo(m time.Duration) time.Duration {
	return time.Duration(r.rng.ExpFloat64() * float64(m))
}

// demand is the requests per second at now: the day's sinusoid (trough
// at 04:00, peak at 16:00) with a ±5 % noise drawn per minute.
func (r *run) demand() float64 {
	h := float64(r.now.Sub(r.now.Truncate(24*time.Hour))) / float64(time.Hour)
	mid, amp := (r.cfg.Peak+r.cfg.Trough)/2, (r.cfg.Peak-r.cfg.Trough)/2
	base := mid - amp*math.Cos(2*math.Pi*(h-4)/24)
	minute := r.now.Unix() / 60
	noise := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(minute))).Float64()*0.1 - 0.05
	return base * (1 + noise)
}

func (r *run) submitTraining() {
	gpus := []int{1, 2, 4, 8}[r.rng.IntN(4)]
	dur := 30*time.Minute + time.Duration(r.rng.Float64()*float64(210*time.Minute))
	r.seq++
	t := &task{id: "train-" + strconv.Itoa(r.seq), gpus: gpus, dur: dur, queued: r.now}
	low := api.PriorityLow
	spec := api.Task{ID: t.id, Priority: &low, Resources: resource.List{resource.CPU: int64(gpus) * 4000, "nvidia.com/gpu": int64(gpus) * 1000},
		Duration: api.Duration(dur), Command: []string{"train"}}
	if r.c.Submit(r.now, &spec) == nil {
		r.tasks[t.id] = t
	}
}

func (r *run) finishTraining() {
	for id, t := range r.tasks {
		if !t.replica && t.placed && !t.endAt.After(r.now) {
			if err := r.c.TaskFinished(r.now, id, core.Result{}); err == nil {
				r.res.TrainDone++
			}
			delete(r.tasks, id)
		}
	}
}

// serve measures the minute's demand against capacity, feeds the
// autoscaler every 15 s (the HPA's period) and makes or stops replicas.
func (r *run) serve() {
	demand := r.demand()
	ready := 0
	for _, t := range r.replicas {
		if t.placed && !t.readyAt.After(r.now) {
			ready++
		}
	}
	capacity := float64(ready) * r.cfg.ReplicaRPS
	r.minute.demand += demand
	r.minute.capacity += capacity
	if r.now.Second() == 0 && r.now.Sub(r.now.Truncate(time.Minute)) < r.cfg.Step {
		r.res.Minutes++
		if r.minute.demand > r.minute.capacity {
			r.res.SLOMinutes++
		}
		r.minute.demand, r.minute.capacity = 0, 0
	}
	util := 1.0
	if ready > 0 {
		util = min(1, demand/capacity)
		r.utilSum += util
		r.utilN++
	}
	if r.now.Before(r.nextEval) {
		return
	}
	r.nextEval = r.now.Add(15 * time.Second)
	samples := make([]autoscale.Sample, 0, len(r.replicas))
	for _, t := range r.replicas {
		s := autoscale.Sample{Ready: t.placed && !t.readyAt.After(r.now), Value: util, Request: 1}
		if !s.Ready {
			s.Missing = true
		}
		samples = append(samples, s)
	}
	d := r.auto.Evaluate(r.now, r.desired, [][]autoscale.Sample{samples})
	r.desired = d.Replicas
	r.res.MaxReplicas = max(r.res.MaxReplicas, r.desired)
	for len(r.replicas) < r.desired {
		r.seq++
		t := &task{id: "replica-" + strconv.Itoa(r.seq), replica: true, gpus: 1, queued: r.now}
		high := api.PriorityHigh
		spec := api.Task{ID: t.id, Priority: &high, Resources: resource.List{resource.CPU: 4000, "nvidia.com/gpu": 1000}, Command: []string{"serve"}}
		if r.c.Submit(r.now, &spec) != nil {
			break
		}
		r.tasks[t.id] = t
		r.replicas = append(r.replicas, t)
	}
	for len(r.replicas) > r.desired {
		// The newest first, as a ReplicaSet picks the not-ready and
		// youngest.
		t := r.replicas[len(r.replicas)-1]
		r.replicas = r.replicas[:len(r.replicas)-1]
		_ = r.c.Cancel(r.now, t.id, "scaled down")
		delete(r.tasks, t.id)
	}
}

// pools runs the planner every minute: registers the nodes whose
// provisioning is over, adds, drains and removes.
func (r *run) pools() error {
	for name, at := range r.arriving {
		if !at.After(r.now) {
			delete(r.arriving, name)
			if err := r.addNode(name); err != nil {
				return err
			}
		}
	}
	if r.cfg.PoolMax == 0 || r.now.Unix()%60 != 0 {
		return nil
	}
	var nodes []nodepool.Node
	for name := range r.nodes {
		n, ok := r.c.Node(name)
		if !ok || !isPool(name) {
			continue
		}
		busy := n.TaskCount() > 0
		if busy {
			delete(r.idle, name)
		} else if _, ok := r.idle[name]; !ok {
			r.idle[name] = r.now
		}
		state := api.NodeReady
		if r.draining[name] {
			state = api.NodeDraining
		}
		nodes = append(nodes, nodepool.Node{Name: name, State: state, Tasks: n.TaskCount(), Idle: r.idle[name]})
	}
	slices.SortFunc(nodes, func(a, b nodepool.Node) int { return strings.Compare(a.Name, b.Name) })
	var waiting []nodepool.Waiting
	for _, t := range r.tasks {
		if !t.placed {
			waiting = append(waiting, nodepool.Waiting{Task: api.Task{ID: t.id, Resources: resource.List{resource.CPU: int64(t.gpus) * 4000, "nvidia.com/gpu": int64(t.gpus) * 1000}}, Since: t.queued})
		}
	}
	slices.SortFunc(waiting, func(a, b nodepool.Waiting) int { return a.Since.Compare(b.Since) })
	d := r.planner.Plan(r.now, []nodepool.Pool{{Spec: r.pool, Nodes: nodes, Launching: len(r.arriving)}}, waiting)
	for range d.Add["pool"] {
		r.poolSeq++
		name := "pool-" + strconv.Itoa(r.poolSeq)
		r.arriving[name] = r.now.Add(r.cfg.Provision)
		r.nodes[name] = r.now // paid from the request
	}
	for _, name := range d.Drain {
		if err := r.c.SetNodeState(r.now, name, api.NodeDraining); err == nil {
			r.draining[name] = true
		}
	}
	for _, name := range d.Remove {
		if err := r.c.RemoveNode(r.now, name); err == nil {
			delete(r.nodes, name)
			delete(r.draining, name)
			delete(r.idle, name)
		}
	}
	return nil
}

func isPool(name string) bool { return len(name) > 5 && name[:5] == "pool-" }

// apply takes the core's placements and evictions.
func (r *run) apply() {
	out := r.c.TakeOutput()
	for _, tr := range out.Transitions {
		t := r.tasks[tr.Task]
		if t == nil || !t.placed || tr.To == core.Succeeded || tr.To == core.Running {
			continue // started (TaskStarted's own report) or done
		}
		if tr.From == core.Scheduled || tr.From == core.Running {
			t.placed = false
			t.queued = r.now
			if tr.To == core.Preempted && !t.replica {
				r.res.TrainPreempts++
			}
		}
	}
	for _, p := range out.Placements {
		t := r.tasks[p.Task]
		if t == nil {
			continue
		}
		if ct, ok := r.c.Task(p.Task); !ok || ct.State() != core.Scheduled {
			continue
		}
		wait := r.now.Sub(t.queued).Seconds()
		if t.replica {
			r.waits.replica = append(r.waits.replica, wait)
			t.readyAt = r.now.Add(r.cfg.Startup)
		} else {
			r.waits.train = append(r.waits.train, wait)
			t.endAt = r.now.Add(t.dur)
		}
		t.placed = true
		_ = r.c.TaskStarted(r.now, p.Task)
	}
}

// account adds the step's GPU-seconds held and the peak node count.
func (r *run) account() {
	r.gpuSec += float64(len(r.nodes)*gpusPerNode) * r.cfg.Step.Seconds()
	r.res.Nodes = max(r.res.Nodes, len(r.nodes))
}

func (r *run) result() Result {
	res := r.res
	res.GPUHours = r.gpuSec / 3600
	res.Cost = res.GPUHours * r.cfg.CostPerGPUH
	res.ReplicaP99 = p99(r.waits.replica)
	res.TrainP99 = p99(r.waits.train)
	res.AllP99 = p99(append(slices.Clone(r.waits.replica), r.waits.train...))
	if r.utilN > 0 {
		res.MeanUtil = r.utilSum / float64(r.utilN)
	}
	return res
}

func p99(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
}

// Compare runs the elastic run at target and the static fleet sized for
// its peak (the most nodes it held, for the whole time).
func Compare(cfg Config) (elastic, static Result, err error) {
	if elastic, err = Run(cfg); err != nil {
		return
	}
	s := cfg
	s.BaseNodes, s.PoolMax = elastic.Nodes, 0
	static, err = Run(s)
	return
}
