package series

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func point(at time.Time, q map[string]int) Point {
	return Point{At: at, Allocated: map[string]float64{"cpu": 0.5}, PendingByTier: map[string]int{"low": 1}, PendingByQueue: q}
}

// The ring keeps the latest points, oldest first; since and the queue
// filter narrow what is read, and reading never changes what is kept.
func TestRecorderKeepsTheLatest(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	r := New(3)
	if got := r.Points(time.Time{}, nil); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
	for i := 0; i < 5; i++ {
		r.Add(point(t0.Add(time.Duration(i)*time.Minute), map[string]int{"team-a": i, "team-b": 10 * i}))
	}
	got := r.Points(time.Time{}, nil)
	if len(got) != 3 || !got[0].At.Equal(t0.Add(2*time.Minute)) || !got[2].At.Equal(t0.Add(4*time.Minute)) {
		t.Fatalf("after 5 adds into 3 slots: %v", got)
	}
	late := r.Points(t0.Add(3*time.Minute), func(q string) bool { return q == "team-a" })
	if len(late) != 2 || late[0].PendingByQueue["team-a"] != 3 || len(late[0].PendingByQueue) != 1 {
		t.Fatalf("since 3m, team-a only: %v", late)
	}
	if again := r.Points(time.Time{}, nil); again[1].PendingByQueue["team-b"] != 30 {
		t.Errorf("a filtered read changed what is kept: %v", again[1])
	}
}

// Run samples every period until its context ends; a failed sample is
// reported and skipped.
func TestRunSamplesUntilCancelled(t *testing.T) {
	r := New(100)
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 100)
	failures := make(chan error, 100)
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, time.Millisecond, func(_ context.Context, now time.Time) (Point, error) {
			n++
			defer func() { calls <- struct{}{} }()
			if n == 2 {
				return Point{}, errors.New("busy")
			}
			return point(now, nil), nil
		}, func(err error) { failures <- err })
	}()
	for i := 0; i < 4; i++ {
		<-calls
	}
	cancel()
	<-done
	if err := <-failures; err == nil || err.Error() != "busy" {
		t.Errorf("failure: %v", err)
	}
	if got := len(r.Points(time.Time{}, nil)); got != n-1 {
		t.Errorf("%d points after %d samples, one failed", got, n)
	}
}
