package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// TestAssignmentNamespacesCheckpoints: an assignment's checkpoint dir is
// inside its tenant's part of the checkpoint root (the default tenant's
// when auth is off), and the task's own spec is left as it was.
func TestAssignmentNamespacesCheckpoints(t *testing.T) {
	for _, c := range []struct{ tenant, want string }{{"acme", "acme/runs/r1"}, {"", "default/runs/r1"}} {
		r := &TaskRecord{Spec: api.Task{ID: "x", Command: []string{"true"},
			Checkpoint: &api.Checkpoint{Signal: "SIGUSR1", Dir: "runs/r1"}}, Tenant: c.tenant, Restarts: 2}
		a := assignmentOf(r)
		if a.Checkpoint == nil || a.Checkpoint.Dir != c.want || a.Checkpoint.Signal != "SIGUSR1" || a.Restarts != 2 {
			t.Errorf("tenant %q: %+v, want dir %s, restarts 2", c.tenant, a.Checkpoint, c.want)
		}
		if r.Spec.Checkpoint.Dir != "runs/r1" {
			t.Errorf("the spec's dir changed to %q", r.Spec.Checkpoint.Dir)
		}
	}
	if a := assignmentOf(&TaskRecord{Spec: api.Task{ID: "y", Command: []string{"true"}}}); a.Checkpoint != nil {
		t.Errorf("a task without a checkpoint got %+v", a.Checkpoint)
	}
}

// TestEndAttemptStates: an ended attempt is preempted (by a task, or
// swapped out by a round), failed (it has an exit code) or requeued; a
// started one counts as a restart; preemptions are counted, and the
// record's cost is copied, never shared with the published record.
func TestEndAttemptStates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).UTC()
	started := now.Add(-time.Minute)
	r := &TaskRecord{Attempt: 0, Node: "n1", Started: &started}
	r.endAttempt(now, "preempted by t2")
	published := r.Preemption
	r.Attempt, r.Started = 1, &started
	r.endAttempt(now, "swapped out by the gavel round: moved to V100")
	code := 1
	r.Attempt, r.Started, r.ExitCode = 2, &started, &code
	r.endAttempt(now, "exited with code 1")
	r.Attempt, r.Started = 3, nil
	r.endAttempt(now, "node n1 lost")
	var states []string
	for _, a := range r.Attempts {
		states = append(states, a.State)
	}
	if want := []string{AttemptPreempted, AttemptPreempted, AttemptFailed, AttemptRequeued}; !slices.Equal(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	if r.Restarts != 3 || r.Preemption == nil || r.Preemption.Count != 2 || published.Count != 1 {
		t.Errorf("restarts %d, preemption %+v (first published %+v): want 3 restarts, 2 preemptions, the first copy left at 1", r.Restarts, r.Preemption, published)
	}
}

// TestWaitCategoryOfRounds: a task swapped out by a round waits as a
// preempted one; one waiting for the next round is being scheduled.
func TestWaitCategoryOfRounds(t *testing.T) {
	for reason, want := range map[string]string{
		"swapped out by the gavel round: moved to K80": WaitPreempted,
		"preempted by t9": WaitPreempted,
		"0/2 nodes fit: 1 insufficient nvidia.com/gpu, 1 waits for the next gavel round (every 6m0s)": WaitScheduling,
		"0/2 nodes fit: 2 insufficient nvidia.com/gpu":                                                WaitResources,
	} {
		if got := WaitCategory(reason); got != want {
			t.Errorf("WaitCategory(%q) = %s, want %s", reason, got, want)
		}
	}
}
