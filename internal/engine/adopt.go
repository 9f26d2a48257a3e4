package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
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
		cmd.specs[i], cmd.errs[i] = prepareFor(tenant, &work[i].Task)
	}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.errs, nil
}

// adopt restores one adopted task as running on its node.
func (e *Engine) adopt(tenant string, a *Adoption, specJSON []byte, now time.Time) error {
	spec := &a.Task
	if e.current(spec.ID) != nil {
		return errs.New(errs.Conflict, "id", "task %q exists", spec.ID)
	}
	if spec.Queue != "" && e.queueView()[spec.Queue] == nil {
		return errs.Invalid("queue", "no queue %q", spec.Queue)
	}
	devs := a.Devices
	if devs == nil {
		devs = e.freeDevices(a.Node, spec.Resources)
	}
	s := core.Saved{State: core.Running, Node: a.Node, Devices: devs, Chosen: -1, Started: now}
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
	e.stageState(r, spec.ID, now)
	return nil
}

// freeDevices picks, on node, free healthy devices for the device-backed
// resources of req: whole devices for whole units, the freest device for
// a fraction. What cannot be found is left out (Restore then says the
// saved devices do not match the request).
func (e *Engine) freeDevices(node string, req resource.List) []api.DeviceRef {
	n, ok := e.c.Node(node)
	if !ok {
		return nil
	}
	devices := n.Devices()
	taken := make([]bool, len(devices))
	out := []api.DeviceRef{}
	for name, q := range req {
		if !name.IsExtended() {
			continue
		}
		for q > 0 {
			want := min(q, 1000)
			best := -1
			for i := range devices {
				d := &devices[i]
				if taken[i] || !d.Healthy || d.Type != string(name) || int64(d.Free()) < want {
					continue
				}
				if best < 0 || (want == 1000 && d.Free() == 1000) || d.Free() > devices[best].Free() {
					best = i
					if want == 1000 {
						break
					}
				}
			}
			if best < 0 {
				break
			}
			taken[best] = true
			d := &devices[best]
			out = append(out, api.DeviceRef{Type: d.Type, ID: d.ID, Model: d.Model, Share: int32(want)})
			q -= want
		}
	}
	return out
}
