package benchcore

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// TiersResult is the per-tier scheduling delay inside the core, in real
// time, with the low tier saturated.
type TiersResult struct {
	Nodes    int     `json:"nodes"`
	Backlog  int     `json:"lowBacklog"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"arrivalsPerSec"`
	Arrived  [4]int  `json:"arrived"`
	Placed   [4]int  `json:"placed"` // of the tasks that arrived during the run
	P50Us    [4]float64
	P99Us    [4]float64
	P999Us   [4]float64
	TargetMs [4]float64
	Met      [4]bool // every arrival placed or still within target, p99 within the target
	// EarlierPlaced counts the placements during the run of low tasks
	// submitted before it (the backlog, and fill tasks evicted by
	// preemption): the aged low work's share of the freed slots.
	EarlierPlaced int `json:"earlierLowPlaced"`
}

func (r TiersResult) String() string {
	s := fmt.Sprintf("tiers nodes=%d lowBacklog=%d seconds=%.1f arrivals/s=%.0f\n", r.Nodes, r.Backlog, r.Seconds, r.Rate)
	for l := 0; l < 4; l++ {
		s += fmt.Sprintf("  %-6s arrived=%-7d placed=%-7d p50=%8.0fµs p99=%8.0fµs p999=%8.0fµs target=%gms met=%v\n",
			api.TierNames[l], r.Arrived[l], r.Placed[l], r.P50Us[l], r.P99Us[l], r.P999Us[l], r.TargetMs[l], r.Met[l])
	}
	s += fmt.Sprintf("  low tasks submitted before the run (backlog, evicted) placed during it: %d\n", r.EarlierPlaced)
	return s
}

// Tiers drives the core in real time (the wall clock is its input) on the
// CPU pool of the fleet, full of low-priority work with a backlog of
// backlog more low tasks waiting, while tasks of all four tiers arrive at
// rate per second (mix 1:4:30:65) and running low tasks finish at the same
// rate. Each task's delay is from its arrival to its placement as the core
// saw them, plus, for urgent and high tasks placed within their own
// Submit call, that call's duration (their placement, preemption
// included, happens inside it). The targets are the tiers' (1/1/5/20 ms).
func Tiers(opt Options, nodes, backlog int, rate float64, d time.Duration) (TiersResult, error) {
	cfg := core.DefaultConfig()
	cfg.Policy = opt.Policy
	ns := make([]api.Node, nodes)
	for i := range ns {
		ns[i] = api.Node{Name: "n" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 16000, resource.Memory: q("64Gi")}}
	}
	now := time.Now()
	c, err := newCore(cfg, ns, now)
	if err != nil {
		return TiersResult{}, err
	}
	prio := [4]int{0, 1, 2, 3}
	mk := func(id string, tier int) api.Task {
		return api.Task{ID: id, Priority: &prio[tier], Resources: resource.List{resource.CPU: 1000, resource.Memory: q("1Gi")}}
	}
	// Fill every slot with low tasks, and queue the backlog behind them.
	seq := 0
	for i := 0; i < nodes*16+backlog; i++ {
		t := mk("f"+strconv.Itoa(seq), 3)
		seq++
		if err := c.Submit(now, &t); err != nil {
			return TiersResult{}, err
		}
	}
	running, now := fill(c, now, time.Second, nil)
	var hist [4]*hdrhistogram.Histogram
	for l := range hist {
		hist[l] = hdrhistogram.New(1, 10_000_000, 3)
	}
	tierOf := map[string]int{}
	rng := rand.New(rand.NewPCG(1, 2))
	weights := [4]int{1, 4, 30, 65}
	pick := func() int {
		x := rng.IntN(100)
		for l, w := range weights {
			if x < w {
				return l
			}
			x -= w
		}
		return 3
	}
	var res TiersResult
	record := func(out core.Output, call time.Duration, immediate string) {
		for _, p := range out.Placements {
			running = append(running, p.Task)
			l, ok := tierOf[p.Task]
			if !ok {
				res.EarlierPlaced++
				continue
			}
			delete(tierOf, p.Task)
			us := p.Delay.Microseconds()
			if p.Task == immediate {
				us += call.Microseconds()
			}
			hist[l].RecordValue(max(1, us))
			res.Placed[l]++
		}
	}
	runtime.GC()
	start := time.Now()
	next := start
	interval := time.Duration(float64(time.Second) / rate)
	// The simulated clock follows the wall clock from here: the core's
	// "now" is the fill's clock plus the time elapsed since start.
	base := now
	clock := func() time.Time { return base.Add(time.Since(start)) }
	finished := 0
	for time.Since(start) < d {
		for !time.Now().Before(next) {
			// A running task ends (the oldest), then a task arrives.
			if finished < len(running) {
				id := running[finished]
				finished++
				if t, ok := c.Task(id); ok && (t.State() == core.Scheduled || t.State() == core.Running) {
					if err := c.TaskFinished(clock(), id, core.Result{}); err != nil {
						return res, err
					}
					record(c.TakeOutput(), 0, "")
				}
			}
			l := pick()
			id := "a" + strconv.Itoa(seq)
			seq++
			t := mk(id, l)
			tierOf[id] = l
			res.Arrived[l]++
			t0 := time.Now()
			if err := c.Submit(clock(), &t); err != nil {
				return res, err
			}
			call := time.Since(t0)
			record(c.TakeOutput(), call, id)
			next = next.Add(interval)
		}
		if w, ok := c.NextWakeup(); ok && !clock().Before(w) {
			c.Tick(clock())
			record(c.TakeOutput(), 0, "")
		}
	}
	res.Nodes, res.Backlog, res.Seconds = nodes, backlog, time.Since(start).Seconds()
	total := 0
	for l := 0; l < 4; l++ {
		total += res.Placed[l]
		res.P50Us[l] = float64(hist[l].ValueAtQuantile(50))
		res.P99Us[l] = float64(hist[l].ValueAtQuantile(99))
		res.P999Us[l] = float64(hist[l].ValueAtQuantile(99.9))
		res.TargetMs[l] = float64(cfg.Tiers[l].Target.Microseconds()) / 1000
		// Arrivals still waiting at the end count against the target when
		// they are more than a few per mille (the last target's worth).
		waiting := res.Arrived[l] - res.Placed[l]
		res.Met[l] = res.Placed[l] > 0 && res.P99Us[l] <= float64(cfg.Tiers[l].Target.Microseconds()) &&
			float64(waiting) <= 0.001*float64(res.Arrived[l])+rate*cfg.Tiers[l].Target.Seconds()
	}
	res.Rate = float64(seq-(nodes*16+backlog)) / res.Seconds
	return res, nil
}
