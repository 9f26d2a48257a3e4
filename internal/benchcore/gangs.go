package benchcore

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// GangResult is the gang shape's measurement (issue 43 §3).
type GangResult struct {
	Nodes   int `json:"nodes"`
	Gangs   int `json:"gangs"`
	Members int `json:"members"`
	// Started gangs, their members placed, and the tasks they evicted.
	Started   int    `json:"started"`
	Placed    int    `json:"placed"`
	Preempted uint64 `json:"preempted"`
	// Attempts counts placement attempts (core.Stats.Attempts: a gang try
	// counts its members) from the first gang's arrival on.
	Attempts       uint64  `json:"attempts"`
	Seconds        float64 `json:"seconds"`
	AttemptsPerSec float64 `json:"attemptsPerSec"`
	GangsPerSec    float64 `json:"gangArrivalsPerSec"`
}

func (r GangResult) String() string {
	return fmt.Sprintf("gangs  nodes=%d gangs=%d members=%d started=%d placed=%d preempted=%d attempts=%d seconds=%.2f attemptsPerSec=%.0f gangArrivalsPerSec=%.0f",
		r.Nodes, r.Gangs, r.Members, r.Started, r.Placed, r.Preempted, r.Attempts, r.Seconds, r.AttemptsPerSec, r.GangsPerSec)
}

// gangSizes are the member counts gangs cycle through (2 to 64).
var gangSizes = []int{2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// Gangs fills the GPUs of the fleet of nodes (FleetNodes: 30 % 8-GPU
// nodes of three models) with low, preemptible 1-GPU tasks, then times
// the arrival of gangs gangs of high priority, each of 2 to 64 members
// of one whole 8-GPU node each (one model: the default sameModel): every
// member's arrival is an input, and a gang tries to start, then to start
// over evictions as one (gangpreempt.go), once its members are in. The
// gangs that start take the fill's nodes; the rest wait, tried again
// when capacity changes. One Tick a second later ends the measurement
// (the waiting gangs' retry).
func Gangs(opt Options, nodes, gangs int) (GangResult, error) {
	if gangs < 1 || gangs > 100_000 {
		return GangResult{}, fmt.Errorf("gangs: must be 1..100000, got %d", gangs)
	}
	now := time.Unix(1_700_000_000, 0)
	cfg := core.DefaultConfig()
	cfg.Policy = opt.Policy
	fleet := FleetNodes(nodes)
	c, err := newCore(cfg, fleet, now)
	if err != nil {
		return GangResult{}, err
	}
	low := 3
	fillN := 0
	for _, n := range fleet {
		if len(n.Devices) == 0 || n.Devices[0].Type != "nvidia.com/gpu" {
			continue
		}
		for range n.Devices {
			spec := api.Task{ID: "fill" + strconv.Itoa(fillN), Priority: &low,
				Resources: resource.List{resource.CPU: 1000, resource.Memory: q("4Gi"), "nvidia.com/gpu": 1000}}
			if err := c.Submit(now, &spec); err != nil {
				return GangResult{}, err
			}
			fillN++
		}
	}
	running, _ := fill(c, now, time.Second, nil)
	if len(running) != fillN {
		return GangResult{}, fmt.Errorf("filled %d of %d GPUs", len(running), fillN)
	}
	now = now.Add(time.Minute) // past PreemptMinRuntime, whatever it is
	high := 1
	res := GangResult{Nodes: nodes, Gangs: gangs}
	started := map[string]bool{}
	before := c.Stats()
	runtime.GC() // the fill's garbage is not the measurement's
	start := time.Now()
	for g := 0; g < gangs; g++ {
		size := gangSizes[g%len(gangSizes)]
		job := "g" + strconv.Itoa(g)
		ids := make([]string, size)
		for m := range ids {
			ids[m] = job + "." + strconv.Itoa(m)
		}
		if err := c.AddJob(now, core.JobSpec{ID: job, Gang: &core.GangSpec{Members: ids, MinMember: size}}); err != nil {
			return GangResult{}, err
		}
		for _, id := range ids {
			spec := api.Task{ID: id, Priority: &high,
				Resources: resource.List{resource.CPU: 8000, resource.Memory: q("32Gi"), "nvidia.com/gpu": 8000}}
			if err := c.SubmitJobTask(now, job, &spec); err != nil {
				return GangResult{}, err
			}
		}
		res.Members += size
		res.count(c.TakeOutput(), started)
	}
	c.Tick(now.Add(time.Second))
	res.count(c.TakeOutput(), started)
	el := time.Since(start)
	after := c.Stats()
	res.Started = len(started)
	res.Preempted = after.Preempted - before.Preempted
	res.Attempts = after.Attempts - before.Attempts
	res.Seconds = el.Seconds()
	res.AttemptsPerSec = float64(res.Attempts) / el.Seconds()
	res.GangsPerSec = float64(gangs) / el.Seconds()
	return res, nil
}

// count adds out's gang placements to r (started: the gangs seen placed).
func (r *GangResult) count(out core.Output, started map[string]bool) {
	for _, p := range out.Placements {
		if strings.HasPrefix(p.Task, "g") {
			r.Placed++
			if i := strings.LastIndexByte(p.Task, '.'); i > 0 {
				started[p.Task[:i]] = true // the member's job
			}
		}
	}
}
