package core

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestDefaultWindowsBelowTargets: a batched tier's default window is at
// most half its target, so that a task's delay (window, dispatch, wait for
// capacity) can meet the target with margin.
func TestDefaultWindowsBelowTargets(t *testing.T) {
	cfg := DefaultConfig()
	for l, tc := range cfg.Tiers {
		if 2*tc.Window > tc.Target {
			t.Errorf("tier %d: window %v, target %v", l, tc.Window, tc.Target)
		}
		if l >= 2 && (tc.BatchSize < 2 || tc.Window <= 0) {
			t.Errorf("tier %d is not batched: %+v", l, tc)
		}
	}
}

// TestAgedBypassBound checks the bounded bypass for several AgedBypass
// values: on a node full of urgent work, with an aged low backlog and
// native medium work both waiting, each freed slot goes to the medium work
// except every (AgedBypass+1)-th, which goes to the oldest aged low task;
// once the medium work is placed, the backlog takes every slot.
func TestAgedBypassBound(t *testing.T) {
	for _, bypass := range []int{0, 1, 3, 7} {
		t.Run(strconv.Itoa(bypass), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.AgedBypass = bypass
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1000, 0)
			const slots = 40
			node := api.Node{Name: "n1", Capacity: resource.List{resource.CPU: slots * 1000, resource.Memory: 64 << 30}}
			if err := c.UpsertNode(now, &node); err != nil {
				t.Fatal(err)
			}
			submit := func(prefix string, prio, n int) {
				for i := 0; i < n; i++ {
					spec := api.Task{ID: prefix + strconv.Itoa(i), Priority: &prio, Resources: resource.List{resource.CPU: 1000}}
					if err := c.Submit(now, &spec); err != nil {
						t.Fatal(err)
					}
				}
			}
			submit("u", 0, slots)
			submit("l", 3, 20)
			now = now.Add(50 * time.Millisecond) // past the low window and aging
			c.Tick(now)
			submit("m", 2, 12)
			now = now.Add(3 * time.Millisecond) // past the medium window
			c.Tick(now)
			c.TakeOutput()
			var got []string
			for i := 0; i < 25; i++ {
				if err := c.TaskFinished(now, "u"+strconv.Itoa(i), Result{}); err != nil {
					t.Fatal(err)
				}
				for _, p := range c.TakeOutput().Placements {
					got = append(got, p.Task)
				}
			}
			// The expected order: bypass mediums, then one low, while
			// both wait; then whichever is left.
			var want []string
			m, l, run := 0, 0, 0
			for len(want) < 25 {
				if m < 12 && (run < bypass || l == 20) {
					want = append(want, "m"+strconv.Itoa(m))
					m, run = m+1, run+1
					continue
				}
				want = append(want, "l"+strconv.Itoa(l))
				l, run = l+1, 0
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("placements\n got: %v\nwant: %v", got, want)
			}
			if err := checkInvariants(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
