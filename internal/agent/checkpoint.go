package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// Checkpointed tasks and the devices of stopping attempts.
//
//   - A task that declares a checkpoint is stopped to resume later
//     (preempted, drained, unassigned, its agent stopped) with its
//     checkpoint signal and grace (executor.Checkpoint); a cancel or a
//     timeout stops it with SIGTERM and the agent's grace, as any task.
//   - Its attempts on this node share one work directory
//     (executor.SharedWorkDir); with checkpoint.dir they also get
//     HETSCHED_CHECKPOINT_DIR, under --checkpoint-root (a filesystem
//     every node mounts at the same path) or, without one, under the
//     agent's work dir (then it follows the task only on this node).
//   - An attempt is not started while an attempt the agent is stopping
//     still holds one of its devices: a preemptor waits for its victim to
//     save its checkpoint and exit, up to the victim's grace and
//     killAllWait, as a pod waits for its victims' graceful termination.
//     It stays scheduled (not running) on the server meanwhile.

// Environment variables of checkpointed tasks.
const (
	envRestartCount  = "HETSCHED_RESTART_COUNT"
	envCheckpointDir = "HETSCHED_CHECKPOINT_DIR"
)

// stopping is an attempt the agent stopped and whose result has not come.
type stopping struct {
	devices []string
	until   time.Time // past it, new attempts no longer wait for it
}

// waitingStart is an assignment held back by an attempt that holds one of
// its devices; past until it starts anyway.
type waitingStart struct {
	as       agentapi.Assignment
	received time.Time
	until    time.Time
}

// deviceKeys names an assignment's devices as type:id, with "@<milli>m"
// for a share of a device (as HETSCHED_DEVICES writes them).
func deviceKeys(ds []api.DeviceRef) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		k := d.Type + ":" + d.ID
		if d.Share > 0 && d.Share < 1000 {
			k += "@" + strconv.Itoa(int(d.Share)) + "m"
		}
		out = append(out, k)
	}
	return out
}

// deviceOf splits a device key into the device and whether it is held
// whole.
func deviceOf(k string) (device string, whole bool) {
	d, _, shared := strings.Cut(k, "@")
	return d, !shared
}

// checkpointDir is where an assignment's checkpoint directory lives on
// this node ("" when it declares none).
func (a *Agent) checkpointDir(as *agentapi.Assignment) (string, error) {
	c := as.Checkpoint
	if c == nil || c.Dir == "" {
		return "", nil
	}
	if err := api.ValidateCheckpointDir("checkpoint.dir", c.Dir); err != nil {
		return "", err
	}
	root := a.opt.CheckpointRoot
	if root == "" {
		root = filepath.Join(a.opt.WorkDir, "checkpoints")
	}
	dir := filepath.Join(root, filepath.FromSlash(c.Dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// specOf is the executor spec of an assignment.
func (a *Agent) specOf(x *executor.Executor, as *agentapi.Assignment) (executor.Spec, error) {
	spec := executor.Spec{Task: as.Task, Attempt: as.Attempt, Command: as.Command,
		Env: taskEnv(as, &a.opt.Node), Timeout: time.Duration(as.Timeout), Grace: a.opt.Grace, FenceFile: a.fenceFile,
		Devices: deviceKeys(as.Devices), Restart: as.Service != ""}
	spec.Env[envRestartCount] = strconv.Itoa(as.Restarts)
	if c := as.Checkpoint; c != nil {
		spec.CheckpointSignal = c.SignalOrDefault()
		spec.CheckpointGrace = time.Duration(c.Grace)
		spec.WorkDir = x.SharedWorkDir(as.Task)
		dir, err := a.checkpointDir(as)
		if err != nil {
			return spec, err
		}
		if dir != "" {
			spec.Env[envCheckpointDir] = dir
		}
	}
	for k, v := range as.Env {
		spec.Env[k] = v
	}
	return spec, nil
}

// stopResumable reports whether a stop for reason is one after which the
// task runs again (so a checkpointed task gets its checkpoint signal):
// anything but a cancel or a timeout.
func stopResumable(reason string) bool {
	switch killReasonOf(reason, false) {
	case killCancelled, killTimeout:
		return false
	}
	return true
}

// stop stops one attempt for reason, with its checkpoint signal when the
// task runs again afterwards, and remembers its devices until its result.
func (a *Agent) stop(x *executor.Executor, s executor.Spec, reason string) {
	grace := a.opt.Grace
	if s.CheckpointGrace > 0 {
		grace = s.CheckpointGrace
	}
	a.mu.Lock()
	a.stopping[key{s.Task, s.Attempt}] = stopping{devices: s.Devices, until: time.Now().Add(grace + killAllWait)}
	a.mu.Unlock()
	// Past the bound, held-back attempts start anyway.
	time.AfterFunc(grace+killAllWait, a.startWaiting)
	if stopResumable(reason) {
		x.CheckpointAttempt(s.Task, s.Attempt, reason)
		return
	}
	x.KillAttempt(s.Task, s.Attempt, reason)
}

// heldBack reports whether as must wait, and for how long at most:
//   - for an attempt this agent is stopping that holds one of its devices;
//   - for a running attempt of another task that holds one of its devices
//     where either holds it whole: the server gave the device away, so
//     that attempt's revoke is on its way (a preemptor's assignment may
//     come before its victim's revoke).
//
// a.mu held.
func (a *Agent) heldBack(as *agentapi.Assignment, running []executor.Spec, now time.Time) (bool, time.Duration) {
	if len(as.Devices) == 0 {
		return false, 0
	}
	me := key{as.Task, as.Attempt}
	held, bound := false, time.Duration(0)
	for _, w := range deviceKeys(as.Devices) {
		want, wantWhole := deviceOf(w)
		for k, s := range a.stopping {
			if k == me || now.After(s.until) {
				continue
			}
			for _, h := range s.devices {
				if d, _ := deviceOf(h); d == want {
					held, bound = true, max(bound, s.until.Sub(now))
				}
			}
		}
		for _, s := range running {
			if s.Task == as.Task {
				continue
			}
			if _, ok := a.stopping[key{s.Task, s.Attempt}]; ok {
				continue // above
			}
			for _, h := range s.Devices {
				if d, whole := deviceOf(h); d == want && (whole || wantWhole) {
					held, bound = true, max(bound, max(a.opt.Grace, s.CheckpointGrace)+killAllWait)
				}
			}
		}
	}
	return held, bound
}

// stopped forgets an attempt that ended (its result came) and starts the
// attempts that waited for its devices.
func (a *Agent) stopped(k key) {
	a.mu.Lock()
	delete(a.stopping, k)
	waiting := len(a.waiting) > 0
	a.mu.Unlock()
	if waiting {
		a.startWaiting()
	}
}

// startWaiting starts the held-back assignments that no longer wait, or
// waited their bound out.
func (a *Agent) startWaiting() {
	x := a.x.Load()
	if x == nil || a.done.Load() {
		return
	}
	running := x.Running()
	a.mu.Lock()
	now := time.Now()
	for k, s := range a.stopping {
		if now.After(s.until) {
			delete(a.stopping, k)
		}
	}
	var ready []waitingStart
	for k, w := range a.waiting {
		if held, _ := a.heldBack(&w.as, running, now); !held || now.After(w.until) {
			if held {
				a.log.Warn("starting a task whose devices are still held: the holder did not stop in its grace", "task", k.task, "attempt", k.attempt)
			}
			w.until = time.Time{} // start it now
			ready = append(ready, w)
			delete(a.waiting, k)
		}
	}
	a.mu.Unlock()
	for _, w := range ready {
		a.launch(x, w.as, w.received)
	}
}

// unwait drops held-back assignments of task (all attempts when attempt
// is negative) that are not to run any more.
func (a *Agent) unwait(task string, attempt int) {
	a.mu.Lock()
	for k := range a.waiting {
		if k.task == task && (attempt < 0 || k.attempt == attempt) {
			delete(a.waiting, k)
		}
	}
	a.mu.Unlock()
}

// stopReport is what the server learns of how a stop went.
func stopReport(s *executor.Stop) *agentapi.StopReport {
	if s == nil {
		return nil
	}
	return &agentapi.StopReport{Signal: s.Signal, Seconds: s.Took().Seconds(), Forced: s.Forced, Checkpoint: s.Checkpoint}
}
