package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hetsched/hetsched/internal/sim/trace"
)

// IdealSRTF names the simulator's reference bound (issue 43 §3): not a
// policy of the core, and not a scheduler one could run. At every arrival
// and completion it re-packs the whole cluster from scratch, shortest
// remaining time first, for free:
//   - every job's remaining time is known (its trace duration, at speed 1
//     on any model);
//   - jobs are taken in order of remaining time (then arrival, then id)
//     and each gets, if it can: a job of up to a node's GPUs the fullest
//     node that still holds it (best fit), a larger one as many whole
//     free nodes as it needs (the simulator's gangs take whole nodes too);
//   - a job left out waits; a running job left out stops where it is and
//     resumes later at no cost (no restart, no checkpoint time, no
//     placement kept from one event to the next);
//   - a job that asks no GPU runs on arrival.
//
// It is the bound hetsched's srtf is measured against: the same order
// with perfect packing and free preemption.
const IdealSRTF = "srtf-ideal"

// idealJob is one job of the reference run.
type idealJob struct {
	id       string
	arrival  int64 // ns
	left     int64 // ns of work left
	gpus     int
	running  bool
	finished int64
}

// runIdeal is Run for IdealSRTF.
func runIdeal(cfg Config) (Result, error) {
	if cfg.FGD {
		return Result{}, fmt.Errorf("%s: a replay bound, not for the fgd protocol (no departures)", IdealSRTF)
	}
	start := time.Now()
	res := Result{Policy: IdealSRTF, Seed: cfg.Seed, Cluster: cfg.Cluster.Name, Workload: cfg.Workload.Name,
		Nodes: len(cfg.Cluster.Nodes), Protocol: "replay", Durations: "known"}
	var caps []int
	perNode := 0
	for _, n := range cfg.Cluster.Nodes {
		g := 0
		for _, d := range n.Devices {
			if d.Type == string(trace.GPU) {
				g++
			}
		}
		caps = append(caps, g)
		perNode = max(perNode, g)
		res.GPUs += g
	}
	jobs := make([]*idealJob, 0, len(cfg.Workload.Arrivals))
	for _, j := range cfg.Workload.Arrivals {
		if j.Duration <= 0 {
			return Result{}, fmt.Errorf("%s: job %s has no duration (the reference needs every run time)", IdealSRTF, j.ID)
		}
		arr := int64(j.At)
		if sc := cfg.ArrivalScale; sc > 0 && sc != 1 {
			arr = int64(float64(arr) * sc)
		}
		g := int(math.Ceil(float64(j.Task.Resources[trace.GPU]) / 1000))
		if g > perNode && (perNode == 0 || (g+perNode-1)/perNode > len(caps)) {
			res.Unplaced++ // larger than the cluster: never starts
			continue
		}
		jobs = append(jobs, &idealJob{id: j.ID, arrival: arr, left: int64(j.Duration), gpus: g})
	}
	res.Jobs = len(cfg.Workload.Arrivals)
	slices.SortStableFunc(jobs, func(a, b *idealJob) int { return cmp.Compare(a.arrival, b.arrival) })
	var active, done []*idealJob
	next, now := 0, int64(0)
	if len(jobs) > 0 {
		now = jobs[0].arrival
	}
	first := now
	free := make([]int, len(caps))
	for next < len(jobs) || len(active) > 0 {
		for next < len(jobs) && jobs[next].arrival <= now {
			active = append(active, jobs[next])
			next++
		}
		idealPack(active, caps, free, perNode)
		// The next event: an arrival, or the first running job's end.
		end := int64(math.MaxInt64)
		if next < len(jobs) {
			end = jobs[next].arrival
		}
		for _, j := range active {
			if j.running {
				end = min(end, now+j.left)
			}
		}
		if end == math.MaxInt64 {
			return Result{}, fmt.Errorf("%s: %d jobs wait and nothing runs", IdealSRTF, len(active))
		}
		res.Events++
		keep := active[:0]
		for _, j := range active {
			if j.running {
				j.left -= end - now
			}
			if j.left <= 0 {
				j.finished = end
				done = append(done, j)
				continue
			}
			keep = append(keep, j)
		}
		clear(active[len(keep):])
		active = keep
		now = end
	}
	jct := make([]float64, len(done))
	var byWidth [2][]float64
	for i, j := range done {
		jct[i] = time.Duration(j.finished - j.arrival).Seconds()
		res.Makespan = max(res.Makespan, time.Duration(j.finished-first).Seconds())
		w := 0
		if j.gpus > perNode {
			w = 1
		}
		byWidth[w] = append(byWidth[w], jct[i])
	}
	res.Placed, res.Completed = len(done), len(done)
	res.JCT = stats(jct)
	res.JCTByWidth = jctByWidth(byWidth)
	res.WallSeconds = time.Since(start).Seconds()
	if res.WallSeconds > 0 {
		res.EventsPerSec = float64(res.Events) / res.WallSeconds
	}
	return res, nil
}

// idealPack re-packs the cluster: active jobs in order of remaining time
// get GPUs (best fit on one node, or whole free nodes for a larger job);
// it sets each job's running flag.
func idealPack(active []*idealJob, caps, free []int, perNode int) {
	slices.SortFunc(active, func(a, b *idealJob) int {
		return cmp.Or(cmp.Compare(a.left, b.left), cmp.Compare(a.arrival, b.arrival), cmp.Compare(a.id, b.id))
	})
	copy(free, caps)
	for _, j := range active {
		j.running = false
		switch {
		case j.gpus == 0:
			j.running = true
		case j.gpus <= perNode:
			best := -1
			for i, f := range free {
				if f >= j.gpus && (best < 0 || f < free[best]) {
					best = i
				}
			}
			if best >= 0 {
				free[best] -= j.gpus
				j.running = true
			}
		default:
			need := (j.gpus + perNode - 1) / perNode
			var whole []int
			for i, f := range free {
				if f == caps[i] && caps[i] == perNode {
					whole = append(whole, i)
					if len(whole) == need {
						break
					}
				}
			}
			if len(whole) == need {
				for _, i := range whole {
					free[i] = 0
				}
				j.running = true
			}
		}
	}
}
