package core

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestStarvationBound (issue 43 §1b): under sjf and srtf, a long task
// that a stream of shorter ones would keep waiting for ever starts by its
// starvation bound (StarveFactor times its expected runtime, or
// StarveLimit) plus the time the task it waits behind takes to end. One
// node with one core; a short task is submitted whenever one ends, so
// that two always wait.
func TestStarvationBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		policy := rapid.SampledFrom([]string{"sjf", "srtf"}).Draw(rt, "policy")
		short := time.Duration(rapid.IntRange(1, 10).Draw(rt, "shortSeconds")) * time.Second
		long := time.Duration(rapid.IntRange(50, 500).Draw(rt, "longSeconds")) * time.Second
		factor := rapid.IntRange(1, 10).Draw(rt, "factor")
		limit := time.Duration(rapid.IntRange(0, 3).Draw(rt, "limitMinutes")) * 10 * time.Minute
		cfg := DefaultConfig()
		cfg.Policy, cfg.StarveFactor, cfg.StarveLimit = policy, factor, limit
		c := unbatched(rt, cfg)
		now := time.Unix(1_000_000, 0)
		if err := c.UpsertNode(now, &api.Node{Name: "n", Capacity: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30}}); err != nil {
			rt.Fatal(err)
		}
		prio := 2
		seq := 0
		submit := func(id string, d time.Duration) {
			spec := api.Task{ID: id, Priority: &prio, Resources: resource.List{resource.CPU: 1000}, Duration: api.Duration(d)}
			if err := c.Submit(now, &spec); err != nil {
				rt.Fatal(err)
			}
		}
		nextShort := func() {
			seq++
			submit(fmt.Sprintf("s%d", seq), short)
		}
		nextShort()
		submit("long", long)
		nextShort()
		nextShort()
		start := now
		bound := time.Duration(factor) * long
		if limit > 0 && limit < bound {
			bound = limit
		}
		running := map[string]time.Time{} // placed task -> when it ends
		for step := 0; step < 100_000; step++ {
			out := c.TakeOutput()
			for _, p := range out.Placements {
				if p.Task == "long" {
					if waited := now.Sub(start); waited > bound+short {
						rt.Fatalf("%s: the long task (%s) waited %s, bound %s (factor %d, limit %s) + a short task's %s", policy, long, waited, bound, factor, limit, short)
					}
					return
				}
				d := short
				running[p.Task] = now.Add(d)
			}
			if now.Sub(start) > bound+short {
				rt.Fatalf("%s: the long task still waits after %s (bound %s)", policy, now.Sub(start), bound)
			}
			// The next event: the running task ends, or a deadline's Tick.
			var ended string
			var ok bool
			if now, ended, ok = nextEvent(rt, c, now, running); !ok {
				rt.Fatalf("%s: nothing runs and nothing is due, the long task waits", policy)
			}
			if ended != "" {
				nextShort()
			}
		}
		rt.Fatalf("%s: no end after 100000 steps", policy)
	})
}

// nextEvent moves a closed-loop run to its next event: a Tick when the
// core's next wakeup comes before the first end in ends (the running
// tasks' ends; ties by id), else that task's end, reported finished and
// taken out of ends. It returns the new time and the task that ended (""
// after a Tick); ok is false when nothing runs and nothing is due.
func nextEvent(t rapid.TB, c *Core, now time.Time, ends map[string]time.Time) (time.Time, string, bool) {
	var id string
	var end time.Time
	for x, e := range ends {
		if id == "" || e.Before(end) || e.Equal(end) && x < id {
			id, end = x, e
		}
	}
	if wake, ok := c.NextWakeup(); ok && (id == "" || wake.Before(end)) {
		c.Tick(wake)
		return wake, "", true
	}
	if id == "" {
		return now, "", false
	}
	delete(ends, id)
	if err := c.TaskFinished(end, id, Result{}); err != nil {
		t.Fatal(err)
	}
	return end, id, true
}

// unbatched is a core of cfg whose tiers dispatch each task as it comes
// and never age it: what the closed-loop bounds run on.
func unbatched(t rapid.TB, cfg Config) *Core {
	for l := range cfg.Tiers {
		cfg.Tiers[l].BatchSize, cfg.Tiers[l].AgingAfter = 1, 0
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
