package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// trainScript counts to 80 steps of 100ms from its checkpoint. On
// SIGUSR1 it takes 500ms to save the step it reached (a checkpoint
// write), says so, and exits 0; a later attempt resumes from it.
const trainScript = `ck="$HETSCHED_CHECKPOINT_DIR/step"
n=$(cat "$ck" 2>/dev/null || echo 0)
echo "attempt=$HETSCHED_ATTEMPT restarts=$HETSCHED_RESTART_COUNT from=$n wd=$PWD"
trap 'sleep 0.5; echo $n > "$ck.tmp" && mv "$ck.tmp" "$ck"; echo "saved=$n"; exit 0' USR1
s=$n
while [ $n -lt 80 ]; do
  n=$((n+1))
  [ $n -eq $((s+1)) ] && echo stepped
  sleep 0.1
done
echo "finished=$n"`

type checkpointView struct {
	State      string `json:"state"`
	Attempt    int    `json:"attempt"`
	Restarts   int    `json:"restarts"`
	Started    *time.Time
	Preemption *struct {
		Count          int     `json:"count"`
		StopSeconds    float64 `json:"stopSeconds"`
		RestartSeconds float64 `json:"restartSeconds"`
	} `json:"preemption"`
	Attempts []struct {
		Attempt  int       `json:"attempt"`
		State    string    `json:"state"`
		Reason   string    `json:"reason"`
		Finished time.Time `json:"finished"`
		Stop     *struct {
			Signal     string  `json:"signal"`
			Seconds    float64 `json:"seconds"`
			Forced     bool    `json:"forced"`
			Checkpoint bool    `json:"checkpoint"`
		} `json:"stop"`
	} `json:"attempts"`
}

func checkpointTask(t *testing.T, base, id string) checkpointView {
	t.Helper()
	code, b := get(t, base+"/api/v1/tasks/"+id)
	if code != 200 {
		t.Fatalf("GET task %s: %d %s", id, code, b)
	}
	var v checkpointView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCheckpointedTaskSurvivesTwoPreemptions (issue 21 §1): under srtf a
// long training task on the node's only GPU is preempted twice by short
// tasks. Each time its agent sends SIGUSR1, waits while it saves its
// step, records the attempt as preempted with how long the stop took,
// and holds the preemptor back until the GPU is free; the next attempt
// gets HETSCHED_RESTART_COUNT, the same work directory and the
// checkpoint directory, resumes from the saved step and finishes at 80.
// The task's preemption cost and the metrics count both stops.
func TestCheckpointedTaskSurvivesTwoPreemptions(t *testing.T) {
	base := servertest.StartWith(t, "nodes: []\n", func(o *server.Options) {
		o.Policy, o.ShareMinRun, o.ShareRound = "srtf", time.Second, 200*time.Millisecond
	})
	root := t.TempDir()
	opt := declaredOptions(t, base, "n1", devicesFile(t, "devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n"), t.TempDir())
	opt.CheckpointRoot = root
	startAgentWith(t, opt)

	train := map[string]any{"id": "train", "resources": map[string]any{"cpu": "1", "nvidia.com/gpu": 1}, "duration": "1h",
		"checkpoint": map[string]any{"signal": "SIGUSR1", "grace": "30s", "dir": "runs/train"},
		"command":    []string{"sh", "-c", trainScript}}
	body, _ := json.Marshal(train)
	post(t, base+"/api/v1/tasks", string(body))

	logOf := func(attempt int) string {
		_, _, b := logsOf(t, base, "train", "?attempt="+strconv.Itoa(attempt))
		return b
	}
	steps := func(attempt int) {
		t.Helper()
		waitFor(t, 60*time.Second, func() bool { return strings.Contains(logOf(attempt), "stepped") },
			fmt.Sprintf("train's attempt %d to make progress", attempt))
	}
	preemptBy := func(short string, attempt int) {
		t.Helper()
		post(t, base+"/api/v1/tasks", `{"id":"`+short+`","resources":{"cpu":"1","nvidia.com/gpu":1},"duration":"1s",
			"command":["sh","-c","echo short; sleep 0.2"]}`)
		waitState(t, base, short, 60*time.Second, "succeeded")
		waitFor(t, 30*time.Second, func() bool {
			v := checkpointTask(t, base, "train")
			return len(v.Attempts) == attempt+1 && v.Attempts[attempt].Stop != nil
		}, fmt.Sprintf("train's attempt %d preempted, with its stop reported", attempt))
		v := checkpointTask(t, base, "train")
		a := v.Attempts[attempt]
		if a.State != "preempted" || !strings.HasPrefix(a.Reason, "preempted by "+short) || a.Stop.Signal != "SIGUSR1" ||
			!a.Stop.Checkpoint || a.Stop.Forced || a.Stop.Seconds < 0.5 || a.Stop.Seconds > 20 {
			t.Fatalf("attempt %d: %+v stop %+v", attempt, a, *a.Stop)
		}
		// The preemptor started only once the victim had saved and
		// exited (500ms after its signal at the eviction).
		s := checkpointTask(t, base, short)
		if s.Started == nil || s.Started.Sub(a.Finished) < 450*time.Millisecond {
			t.Errorf("%s started %v after train's eviction: it did not wait for the GPU to be freed", short, s.Started.Sub(a.Finished))
		}
	}

	steps(0)
	preemptBy("short1", 0)
	steps(1)
	preemptBy("short2", 1)
	waitState(t, base, "train", 60*time.Second, "succeeded")

	v := checkpointTask(t, base, "train")
	if v.Attempt != 2 || v.Restarts != 2 || v.Preemption == nil || v.Preemption.Count != 2 ||
		v.Preemption.StopSeconds < 1 || v.Preemption.RestartSeconds <= 0 {
		t.Fatalf("train at the end: %+v preemption %+v", v, v.Preemption)
	}
	// Progress is intact: each attempt resumed where the one before it
	// saved, in the same work directory, and the last one finished.
	line := regexp.MustCompile(`attempt=(\d+) restarts=(\d+) from=(\d+) wd=(\S+)`)
	saved := regexp.MustCompile(`saved=(\d+)`)
	from, wd := "0", ""
	for at := 0; at <= 2; at++ {
		out := logOf(at)
		m := line.FindStringSubmatch(out)
		if m == nil || m[1] != strconv.Itoa(at) || m[2] != strconv.Itoa(at) || m[3] != from || (wd != "" && m[4] != wd) {
			t.Fatalf("attempt %d started with %q, want attempt=%d restarts=%d from=%s wd=%s:\n%s", at, m, at, at, from, wd, out)
		}
		wd = m[4]
		if at == 2 {
			if !strings.Contains(out, "finished=80") {
				t.Fatalf("the last attempt did not finish at step 80:\n%s", out)
			}
			break
		}
		s := saved.FindStringSubmatch(out)
		if s == nil {
			t.Fatalf("attempt %d saved no checkpoint:\n%s", at, out)
		}
		if n, _ := strconv.Atoi(s[1]); n <= 0 || s[1] == from {
			t.Fatalf("attempt %d saved step %s after resuming from %s: no progress", at, s[1], from)
		}
		from = s[1]
	}
	if b, err := os.ReadFile(filepath.Join(root, "default", "runs", "train", "step")); err != nil || strings.TrimSpace(string(b)) != from {
		t.Errorf("the checkpoint under the root (tenant default): %q, %v; want %s", b, err, from)
	}

	_, m := get(t, base+"/metrics")
	for series, least := range map[string]float64{
		`hetsched_preemption_stop_seconds_count{forced="false"}`: 2,
		`hetsched_preemption_restart_seconds_count`:              2,
		`hetsched_preemptions_total{reason="timeshare"}`:         2,
	} {
		if got, ok := sample(string(m), series); !ok || got < least {
			t.Errorf("%s = %v (found %v), want at least %v", series, got, ok, least)
		}
	}
}

// TestHeldBack: an attempt waits for a stopping attempt on any of its
// devices, and for a running attempt of another task holding one of them
// whole (its revoke is on the way); shares of a device coexist; the wait
// is bounded by the holder's grace.
func TestHeldBack(t *testing.T) {
	now := time.Now()
	a := &Agent{opt: Options{Grace: 10 * time.Second}, stopping: map[key]stopping{}}
	gpu := func(id string, share int32) api.DeviceRef {
		return api.DeviceRef{Type: "nvidia.com/gpu", ID: id, Share: share}
	}
	as := &agentapi.Assignment{Task: "new", Attempt: 0, Devices: []api.DeviceRef{gpu("0", 1000)}}
	running := []executor.Spec{{Task: "old", Attempt: 3, Devices: []string{"nvidia.com/gpu:0"}, CheckpointGrace: time.Minute}}
	if held, bound := a.heldBack(as, running, now); !held || bound != time.Minute+killAllWait {
		t.Errorf("a running holder of the whole GPU: held %v for %v, want true for the holder's grace + %v", held, bound, killAllWait)
	}
	if held, _ := a.heldBack(as, running[:0], now); held {
		t.Error("held back with no holder")
	}
	half := &agentapi.Assignment{Task: "new", Devices: []api.DeviceRef{gpu("0", 500)}}
	shared := []executor.Spec{{Task: "old", Devices: []string{"nvidia.com/gpu:0@500m"}}}
	if held, _ := a.heldBack(half, shared, now); held {
		t.Error("a half GPU waits for another half of the same GPU")
	}
	if held, _ := a.heldBack(as, shared, now); !held {
		t.Error("the whole GPU does not wait for a half of it held")
	}
	a.stopping[key{"old", 3}] = stopping{devices: []string{"nvidia.com/gpu:0@500m"}, until: now.Add(5 * time.Second)}
	if held, bound := a.heldBack(half, nil, now); !held || bound != 5*time.Second {
		t.Errorf("a stopping holder of a share: held %v for %v, want true for 5s", held, bound)
	}
	if held, _ := a.heldBack(half, nil, now.Add(6*time.Second)); held {
		t.Error("held back past the stopping attempt's bound")
	}
	if held, _ := a.heldBack(&agentapi.Assignment{Task: "cpu"}, running, now); held {
		t.Error("a task without devices held back")
	}
}
