package elastic

import (
	"testing"
)

// TestElasticBeatsTheStaticPeakFleet (issue 44 §4's goal): at the 70 %
// target the elastic run holds at least 30 % fewer GPU-hours than a
// static fleet sized for its peak, and the service's replicas wait
// under 30 s at p99; the same seed gives the same result.
func TestElasticBeatsTheStaticPeakFleet(t *testing.T) {
	e, s, err := Compare(Defaults(70))
	if err != nil {
		t.Fatal(err)
	}
	if saved := 1 - e.GPUHours/s.GPUHours; saved < 0.30 {
		t.Errorf("elastic %.0f GPU-hours, static %.0f: %.0f %% fewer, want at least 30 %%", e.GPUHours, s.GPUHours, 100*saved)
	}
	if e.ReplicaP99 >= 30 {
		t.Errorf("replicas' p99 queueing %.0f s, want under 30 s", e.ReplicaP99)
	}
	if e.TrainDone == 0 || e.MaxReplicas <= 2 || e.MeanUtil < 0.5 || e.MeanUtil > 0.85 {
		t.Errorf("implausible run: %+v", e)
	}
	if e.Minutes != 2*24*60 || e.SLOMinutes > e.Minutes/20 {
		t.Errorf("SLO minutes %d of %d: want under 5 %%", e.SLOMinutes, e.Minutes)
	}
	again, err := Run(Defaults(70))
	if err != nil {
		t.Fatal(err)
	}
	if again != e {
		t.Errorf("the same seed twice: %+v, then %+v", e, again)
	}
}

// TestTargetsOrderTheFleet: a higher utilization target runs fewer
// replicas on fewer GPU-hours, and loads each replica more.
func TestTargetsOrderTheFleet(t *testing.T) {
	var prev Result
	for i, target := range []int{50, 70, 90} {
		r, err := Run(Defaults(target))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && (r.GPUHours >= prev.GPUHours || r.MaxReplicas >= prev.MaxReplicas || r.MeanUtil <= prev.MeanUtil) {
			t.Errorf("target %d: %+v\nafter target %d: %+v", target, r, prev.Target, prev)
		}
		prev = r
	}
}
