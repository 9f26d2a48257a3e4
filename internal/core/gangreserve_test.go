package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestGangReservationBound (issue 43 §1): a gang that needs every GPU of
// several nodes, behind a stream of 1-GPU tasks that takes each freed GPU
// at once, would wait for ever. With reservations it starts by
// GangReserveAfter plus the longest small task (the tasks running when it
// got its reservation end by then; a task backfilled on a held node ends
// before the reservation's expected start). The small tasks are of the
// gang's tier or below (a more urgent one is not held back); some declare
// their runtime (they may backfill), some a timeout, some neither. Each
// step the invariants hold, and no held node takes a task that ends after
// the reservation's expected start unless the members still fit beside
// it.
func TestGangReservationBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(2, 4).Draw(rt, "nodes")
		members := rapid.IntRange(2, nodes).Draw(rt, "members")
		after := time.Duration(rapid.IntRange(1, 30).Draw(rt, "afterMinutes")) * time.Minute
		cfg := DefaultConfig()
		cfg.GangReserveAfter = after
		c := unbatched(rt, cfg)
		now := time.Unix(1_000_000, 0)
		for i := range nodes {
			spec := &api.Node{Name: fmt.Sprintf("n%d", i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 64 << 30}}
			for d := range 8 {
				spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: fmt.Sprint(d), Model: "A"})
			}
			if err := c.UpsertNode(now, spec); err != nil {
				rt.Fatal(err)
			}
		}
		gangPrio := rapid.IntRange(1, 3).Draw(rt, "gangPrio")
		var longest time.Duration
		durs := map[string]time.Duration{}
		seq := 0
		submit := func() {
			seq++
			d := time.Duration(rapid.IntRange(1, 120).Draw(rt, "smallMinutes")) * time.Minute
			longest = max(longest, d)
			prio := rapid.IntRange(gangPrio, 3).Draw(rt, "smallPrio")
			spec := api.Task{ID: fmt.Sprintf("s%d", seq), Priority: &prio, Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}
			switch rapid.IntRange(0, 2).Draw(rt, "declares") {
			case 1:
				spec.Duration = api.Duration(d)
			case 2:
				spec.Timeout = api.Duration(d)
			}
			if err := c.Submit(now, &spec); err != nil {
				rt.Fatal(err)
			}
			durs[spec.ID] = d
		}
		for range nodes*8 + 4 {
			submit()
		}
		ids := make([]string, members)
		for i := range ids {
			ids[i] = fmt.Sprintf("g.%d", i)
		}
		if err := c.AddJob(now, JobSpec{ID: "g", Gang: &GangSpec{Members: ids, MinMember: members}}); err != nil {
			rt.Fatal(err)
		}
		for _, id := range ids {
			spec := api.Task{ID: id, Priority: &gangPrio, Resources: resource.List{resource.CPU: 8000, "nvidia.com/gpu": 8000}}
			if err := c.SubmitJobTask(now, "g", &spec); err != nil {
				rt.Fatal(err)
			}
		}
		start := now
		ends := map[string]time.Time{} // running small task -> its end
		for step := 0; step < 100_000; step++ {
			out := c.TakeOutput()
			for _, p := range out.Placements {
				if strings.HasPrefix(p.Task, "g.") {
					if waited := now.Sub(start); waited > after+longest {
						rt.Fatalf("the gang waited %s: more than GangReserveAfter %s + the longest small task %s", waited, after, longest)
					}
					return
				}
				ends[p.Task] = now.Add(durs[p.Task])
			}
			for id := range ends {
				if x, ok := c.Task(id); !ok || x.State() != Scheduled {
					delete(ends, id) // preempted (by a small task of a higher tier, or the gang), or timed out
				}
			}
			checkReservations(rt, c)
			if now.Sub(start) > after+longest {
				rt.Fatalf("the gang still waits after %s (GangReserveAfter %s, longest small task %s)", now.Sub(start), after, longest)
			}
			var ended string
			var ok bool
			if now, ended, ok = nextEvent(rt, c, now, ends); !ok {
				rt.Fatalf("nothing runs and nothing is due; the gang waits")
			}
			if ended != "" {
				submit()
			}
		}
		rt.Fatalf("no end after 100000 steps")
	})
}

// checkReservations fails the test when checkReservationInvariants does.
func checkReservations(t rapid.TB, c *Core) {
	if err := checkReservationInvariants(c); err != nil {
		t.Fatal(err)
	}
}

// checkReservationInvariants: the core's reservations and the nodes they
// hold point at each other, at most GangReservations are held, a gang
// holds at most one and only while it waits unstarted, and every hold's
// members would fit once what it waits for ends.
func checkReservationInvariants(c *Core) error {
	if n := len(c.gs.gr.active); n > c.cfg.GangReservations {
		return fmt.Errorf("%d reservations held, GangReservations %d", n, c.cfg.GangReservations)
	}
	for _, r := range c.gs.gr.active {
		if r.g.resv != r {
			return fmt.Errorf("the reservation of gang %s is not its gang's", r.g.job.id)
		}
		if r.g.started || !r.g.waiting {
			return fmt.Errorf("gang %s holds a reservation but started (%v) or does not wait (%v)", r.g.job.id, r.g.started, !r.g.waiting)
		}
		for _, h := range r.holds {
			if h.n.hold != h {
				return fmt.Errorf("node %s does not point at gang %s's hold on it", h.n.name, r.g.job.id)
			}
			if !h.fitsWith(c, nil) {
				return fmt.Errorf("gang %s's hold on %s no longer adds up, and is still held", r.g.job.id, h.n.name)
			}
		}
	}
	for _, n := range c.idx.order {
		if h := n.hold; h != nil && h.r.g.resv != h.r {
			return fmt.Errorf("node %s is held for gang %s, which has no such reservation", n.name, h.r.g.job.id)
		}
	}
	return nil
}
