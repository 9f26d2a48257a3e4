package procs

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// governor is a Governor over a ceiling, recording what it set.
func governor(ceiling int) (*Governor, *[]int) {
	var set []int
	return &Governor{Ceiling: ceiling, CPU: func() time.Duration { return 0 }, Set: func(n int) { set = append(set, n) }}, &set
}

func load(cores float64) (time.Duration, time.Duration) {
	return time.Duration(cores * float64(time.Second)), time.Second
}

// It starts on one P, doubles as soon as the Ps are busy (up to the
// ceiling), and gives one back only after Idle idle intervals in a row.
func TestGovernorFollowsTheLoad(t *testing.T) {
	g, set := governor(8)
	if got := g.Start(); got != 1 {
		t.Fatalf("start on %d Ps", got)
	}
	for _, step := range []struct {
		cores float64
		want  int
	}{
		{0.2, 1}, {0.69, 1}, // under 0.7 of one P: one
		{0.7, 2}, {1.5, 4}, {3.0, 8}, {8, 8}, // busy: doubled, up to the ceiling
		{3.0, 8}, // under 0.7 of 8, over 0.4 of 7: stays
	} {
		if got := g.Observe(load(step.cores)); got != step.want {
			t.Fatalf("load %.2f: %d Ps, want %d", step.cores, got, step.want)
		}
	}
	// Idle (under 0.4 of 7 Ps) for DefaultIdle-1 intervals, then a busier
	// one: nothing given back; the count starts again.
	for range DefaultIdle - 1 {
		g.Observe(load(1.0))
	}
	if got := g.Observe(load(2.9)); got != 8 {
		t.Fatalf("an idle run broken by a busier interval: %d Ps", got)
	}
	for i := 1; i <= DefaultIdle; i++ {
		got := g.Observe(load(1.0))
		if want := 8; i < DefaultIdle && got != want {
			t.Fatalf("idle interval %d: %d Ps, want %d", i, got, want)
		}
		if i == DefaultIdle && got != 7 {
			t.Fatalf("after %d idle intervals: %d Ps, want 7", i, got)
		}
	}
	want := []int{1, 2, 4, 8, 7}
	if len(*set) != len(want) {
		t.Fatalf("set %v, want %v", *set, want)
	}
	for i := range want {
		if (*set)[i] != want[i] {
			t.Fatalf("set %v, want %v", *set, want)
		}
	}
}

// Whatever the loads, the Ps stay within 1 and the ceiling, change only
// by doubling up or one down, and are set exactly when they change.
func TestGovernorStaysInBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ceiling := rapid.IntRange(1, 64).Draw(t, "ceiling")
		g, set := governor(ceiling)
		n := g.Start()
		sets := 1
		for _, milli := range rapid.SliceOfN(rapid.IntRange(0, 70_000), 1, 200).Draw(t, "loads") {
			next := g.Observe(time.Duration(milli)*time.Millisecond, time.Second)
			if next < 1 || next > ceiling {
				t.Fatalf("%d Ps, ceiling %d", next, ceiling)
			}
			if next != n {
				sets++
				if next != n-1 && next != min(ceiling, 2*n) {
					t.Fatalf("from %d to %d Ps", n, next)
				}
			}
			n = next
		}
		if len(*set) != sets || (*set)[len(*set)-1] != n {
			t.Fatalf("set %v for %d changes ending at %d", *set, sets, n)
		}
	})
}

// Run measures each interval between ticks on its clock, and stops with
// its context.
func TestRunObservesEachTick(t *testing.T) {
	var cpu time.Duration
	clock := time.Unix(0, 0)
	got := make(chan int, 16)
	g := &Governor{Ceiling: 4, CPU: func() time.Duration { return cpu }, Now: func() time.Time { return clock },
		Set: func(n int) { got <- n }}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Run(ctx, ticks); close(done) }()
	if n := <-got; n != 1 {
		t.Fatalf("started on %d Ps", n)
	}
	cpu, clock = 900*time.Millisecond, clock.Add(time.Second) // 0.9 of a core
	ticks <- clock
	if n := <-got; n != 2 {
		t.Fatalf("a busy interval: %d Ps, want 2", n)
	}
	cancel()
	<-done
}
