package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/hetsched/hetsched/internal/api"
)

// recover rebuilds the core: nodes first, then tasks in submission order,
// then one step commits whatever the restore changed (placements that could
// not be restored go back to pending).
func (e *Engine) recover() error {
	ctx := context.Background()
	now := e.cfg.Now()
	if v, ok, err := e.st.Get(ctx, KindMeta, metaEventsKey); err != nil {
		return fmt.Errorf("recover event seq: %w", err)
	} else if ok {
		next, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil || next == 0 {
			return fmt.Errorf("recover event seq: bad value %q", v)
		}
		e.events = newEventLog(next)
	}
	if err := e.st.Load(ctx, KindNode, func(key string, v []byte) error {
		var r NodeRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("node %s: %w", key, err)
		}
		if err := e.c.UpsertNode(now, &r.Spec); err != nil {
			return fmt.Errorf("node %s: %w", key, err)
		}
		spec := r.Spec
		e.nodes[key] = &spec
		return nil
	}); err != nil {
		return fmt.Errorf("recover nodes: %w", err)
	}
	if err := e.st.Load(ctx, KindQueue, func(key string, v []byte) error {
		var q api.Queue
		if err := json.Unmarshal(v, &q); err != nil {
			return fmt.Errorf("queue %s: %w", key, err)
		}
		e.queues[key] = &q
		return nil
	}); err != nil {
		return fmt.Errorf("recover queues: %w", err)
	}
	if err := e.st.Load(ctx, KindJob, func(key string, v []byte) error {
		var j JobRecord
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("job %s: %w", key, err)
		}
		e.jobs[key] = &j
		return nil
	}); err != nil {
		return fmt.Errorf("recover jobs: %w", err)
	}
	var recs []*TaskRecord
	if err := e.st.Load(ctx, KindTask, func(key string, v []byte) error {
		r, err := decodeTask(key, v)
		if err != nil {
			return fmt.Errorf("task %s: %w", key, err)
		}
		recs = append(recs, r)
		return nil
	}); err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	for _, r := range recs {
		if err := e.c.Restore(now, &r.Spec, r.saved()); err != nil {
			return fmt.Errorf("restore task %s: %w", r.Spec.ID, err)
		}
		e.tasks[r.Spec.ID] = r
		e.countWaiting(r, +1)
		e.order = append(e.order, r.Spec.ID)
		if r.Seq > e.seq {
			e.seq = r.Seq
		}
	}
	e.c.TakeOutput() // restore's own transitions are re-read below
	for _, r := range recs {
		e.refresh(r.Spec.ID, now)
	}
	if err := e.commitStaged(now); err != nil {
		return err
	}
	e.log.Info("engine recovered", "nodes", len(e.nodes), "tasks", len(recs))
	return nil
}
