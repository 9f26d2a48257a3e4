package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
)

// Adoption is work that already runs on a node, placed by someone else
// (another scheduler, or this front end before a restart), that the core
// must count: Task holds its request, Node where it runs, Devices the
// devices it holds (nil: any free devices of the requested types).
// Displace lists tasks placed meanwhile on what it holds: they are
// cancelled and it takes their room in one step, before anything waiting
// can (core.Replace).
type Adoption struct {
	Task     api.Task
	Node     string
	Devices  []api.DeviceRef
	Displace []string
}

type adoptCmd struct {
	answer
	tenant string
	work   []Adoption
	specs  [][]byte
	errs   []error
}

func (c *adoptCmd) run(e *Engine, now time.Time) {
	for i := range c.work {
		if c.errs[i] == nil {
			c.errs[i] = e.adopt(c.tenant, &c.work[i], c.specs[i], now)
		}
	}
}

// Adopt admits tasks that already run on their nodes (a Kubernetes front
// end's pods bound before it started, or bound by other schedulers): each
// is placed where it runs, on the devices it holds, without a scheduling
// decision. One that does not fit there (its node is gone, or full) waits
// pending with the reason, as a restored placement does (core.Restore).
// Each work item gets its error; nil means it is durable.
func (e *Engine) Adopt(ctx context.Context, tenant string, work []Adoption) ([]error, error) {
	cmd := &adoptCmd{tenant: tenant, work: work, specs: make([][]byte, len(work)), errs: make([]error, len(work))}
	for i := range work {
		if work[i].Task.ID == "" {
			cmd.errs[i] = errs.Invalid("id", "an adopted task needs its id")
			continue
		}
		if work[i].Node == "" {
			cmd.errs[i] = errs.Invalid("node", "an adopted task needs the node it runs on")
			continue
		}
		cmd.specs[i], cmd.errs[i] = e.prepareFor(tenant, &work[i].Task)
	}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.errs, nil
}

// adopt restores one adopted task as running on its node.
func (e *Engine) adopt(tenant string, a *Adoption, specJSON []byte, now time.Time) error {
	spec := &a.Task
	if e.staged.current(spec.ID) != nil {
		return errs.New(errs.Conflict, "id", "task %q exists", spec.ID)
	}
	if spec.Queue != "" && e.staged.queueView()[spec.Queue] == nil {
		return errs.Invalid("queue", "no queue %q", spec.Queue)
	}
	s := core.Saved{State: core.Running, Node: a.Node, Devices: a.Devices, AnyDevices: a.Devices == nil, Chosen: -1, Started: now}
	var err error
	if len(a.Displace) > 0 {
		err = e.c.Replace(now, a.Displace, "displaced: its node's room went back to "+spec.ID+", which stayed", spec, s)
	} else {
		err = e.c.Restore(now, spec, s)
	}
	if err != nil {
		return err
	}
	e.seq++
	r := &TaskRecord{Spec: *spec, Tenant: tenant, Seq: e.seq, Chosen: -1, Submitted: now, spec: specJSON}
	e.staged.stageState(r, spec.ID, now)
	return nil
}
