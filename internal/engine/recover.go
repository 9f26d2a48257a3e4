package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/store"
)

// recover rebuilds the core: nodes first, then queues and jobs, then tasks
// in submission order, then one step commits whatever the restore changed
// (placements that could not be restored go back to pending).
func (e *Engine) recover() error {
	ctx := context.Background()
	now := e.cfg.Now()
	if err := e.recoverMeta(ctx); err != nil {
		return err
	}
	if err := e.recoverNodes(ctx, now); err != nil {
		return err
	}
	if err := e.recoverQueues(ctx, now); err != nil {
		return err
	}
	if err := e.recoverJobs(ctx, now); err != nil {
		return err
	}
	loaded := e.cfg.Now()
	recs, err := e.recoverTasks(ctx, now)
	if err != nil {
		return err
	}
	if err := e.recoverServices(ctx, recs); err != nil {
		return err
	}
	if err := e.recoverPools(ctx); err != nil {
		return err
	}
	e.recoverFinished()
	restored, changed := e.cfg.Now(), len(e.staged.tasks)
	if err := e.commitStaged(now); err != nil {
		return err
	}
	// Agent nodes are judged from the end of recovery, which can take
	// longer than their heartbeat deadline.
	end := e.cfg.Now()
	e.live.restartAll(end)
	e.log.Info("engine recovered", "nodes", len(e.nodes), "tasks", len(recs),
		"tasks_took", restored.Sub(loaded).Round(time.Millisecond), "changed", changed, "commit_took", end.Sub(restored).Round(time.Millisecond))
	return nil
}

// recoverMeta reads the cluster id (making one for a new store) and the
// events' high-water mark.
func (e *Engine) recoverMeta(ctx context.Context) error {
	if v, ok, err := e.st.Get(ctx, KindMeta, metaClusterKey); err != nil {
		return fmt.Errorf("recover the cluster id: %w", err)
	} else if ok {
		e.cluster = string(v)
	} else {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		e.cluster = hex.EncodeToString(b)
		if err := e.st.Commit(ctx, []store.Record{{Kind: KindMeta, Key: metaClusterKey, Value: []byte(e.cluster)}}); err != nil {
			return fmt.Errorf("store the cluster id: %w", err)
		}
	}
	if v, ok, err := e.st.Get(ctx, KindMeta, metaEventsKey); err != nil {
		return fmt.Errorf("recover event seq: %w", err)
	} else if ok {
		next, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil || next == 0 {
			return fmt.Errorf("recover event seq: bad value %q", v)
		}
		e.events.reset(next)
	}
	return nil
}

// recoverNodes gives the core every node, with its holder and admin state.
func (e *Engine) recoverNodes(ctx context.Context, now time.Time) error {
	return loadJSON(ctx, e.st, KindNode, func(key string, r *NodeRecord) error {
		if err := e.c.UpsertNode(now, &r.Spec); err != nil {
			return err
		}
		spec := r.Spec // the published copy, apart from what the core was given
		e.nodes[key] = &spec
		e.laneNodes.Store(key, &spec)
		if r.Agent != "" {
			// An agent node gets a full heartbeat deadline from now
			// before it is judged: its agent is reconnecting.
			e.owner[key] = r.Agent
			e.live.heard(key, now) // moved to the end of recovery
		}
		if r.Admin != "" {
			e.admin[key] = r.Admin
		}
		return nil
	})
}

// recoverQueues gives the core every queue, parents before children (the
// tree was validated).
func (e *Engine) recoverQueues(ctx context.Context, now time.Time) error {
	if err := loadJSON(ctx, e.st, KindQueue, func(key string, q *api.Queue) error {
		e.queues[key] = q
		return nil
	}); err != nil {
		return err
	}
	for set := map[string]bool{}; len(set) < len(e.queues); {
		progress := false
		for name, q := range e.queues {
			if set[name] || (q.Parent != "" && q.Parent != api.RootQueue && !set[q.Parent]) {
				continue
			}
			if err := e.c.SetQueue(now, q); err != nil {
				return fmt.Errorf("restore queue %s: %w", name, err)
			}
			set[name], progress = true, true
		}
		if !progress {
			return fmt.Errorf("restore queues: a parent is missing")
		}
	}
	return nil
}

// recoverJobs gives the core every job, in submission order for listing.
func (e *Engine) recoverJobs(ctx context.Context, now time.Time) error {
	if err := loadJSON(ctx, e.st, KindJob, func(key string, j *JobRecord) error {
		e.jobs[key] = j
		e.jobOrder = append(e.jobOrder, key)
		return e.c.AddJob(now, coreJob(&j.Spec))
	}); err != nil {
		return err
	}
	sort.Slice(e.jobOrder, func(a, b int) bool { return jobBefore(e.jobs[e.jobOrder[a]], e.jobs[e.jobOrder[b]]) })
	return nil
}

// recoverTasks restores every task in submission order, indexes the
// agents' assignments, and stages what the core's restore changed.
func (e *Engine) recoverTasks(ctx context.Context, now time.Time) ([]*TaskRecord, error) {
	var recs []*TaskRecord
	if err := e.st.Load(ctx, KindTask, func(key string, v []byte) error {
		r, err := decodeTask(key, v)
		if err != nil {
			return fmt.Errorf("task %s: %w", key, err)
		}
		recs = append(recs, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("recover tasks: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	for _, r := range recs {
		if err := e.c.Restore(now, &r.Spec, r.saved()); err != nil {
			return nil, fmt.Errorf("restore task %s: %w", r.Spec.ID, err)
		}
		e.tasks[r.Spec.ID] = r
		e.waiting.add(r, +1)
		e.order = append(e.order, r.Spec.ID)
		if r.Seq > e.seq {
			e.seq = r.Seq
		}
	}
	e.c.TakeOutput() // restore's own transitions are re-read below
	e.sessions.restore(recs)
	// Jobs' states as recovered: only a change from here on is an event.
	for id, j := range e.jobs {
		e.jobLast[id] = e.jobStateNow(j)
	}
	for _, r := range recs {
		e.staged.refreshRecovered(r.Spec.ID, now)
	}
	return recs, nil
}

// loadJSON decodes every record of kind into a fresh T and hands it to fn;
// errors name the kind and key.
func loadJSON[T any](ctx context.Context, st store.Store, kind string, fn func(key string, v *T) error) error {
	err := st.Load(ctx, kind, func(key string, b []byte) error {
		v := new(T)
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s %s: %w", kind, key, err)
		}
		if err := fn(key, v); err != nil {
			return fmt.Errorf("%s %s: %w", kind, key, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	return nil
}
