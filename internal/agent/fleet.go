package agent

import (
	"container/heap"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// FleetOptions configure a fake fleet: one process that registers N
// simulated nodes under one agent name and "runs" their tasks by waiting
// for each task's duration (like KWOK).
type FleetOptions struct {
	Server, Token string
	// TLS is as Options.TLS.
	TLS *tls.Config
	// Name is the agent name and the nodes' name prefix (default "fake").
	Name  string
	Nodes int
	// Template is every node's shape (names are Name-00001, …); its
	// devices are marked simulated. Default: 8 H100 GPUs, 64 CPUs, 512Gi.
	Template api.Node
	// DefaultDuration is how long a task without a duration runs
	// (default 1s).
	DefaultDuration time.Duration
	Logger          *slog.Logger
}

// DefaultFleetNode is a fake fleet's node shape unless one is given.
func DefaultFleetNode() api.Node {
	n := api.Node{
		Labels:   map[string]string{"gpu.model": "H100-80GB", "hetsched.io/fake": "true"},
		Capacity: resource.List{"cpu": 64_000, "memory": 512 << 30},
	}
	for i := 0; i < 8; i++ {
		n.Devices = append(n.Devices, api.Device{Type: nvidiaGPU, ID: fmt.Sprint(i), Model: "H100-80GB",
			Memory: api.Bytes(80 << 30), Topology: map[string]string{"nvlink": "nv0", "numa": fmt.Sprint(i / 4)}})
	}
	return n
}

// Fleet is a running fake fleet.
type Fleet struct {
	opt   FleetOptions
	sess  *session
	specs []api.Node

	mu      sync.Mutex
	running map[string]*fakeTask // by task id
	due     dueHeap
	wake    chan struct{}
	done    int64 // tasks finished (for tests and the progress line)
}

type fakeTask struct {
	key
	node string
	at   time.Time
	pos  int
}

type dueHeap []*fakeTask

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].pos = i; h[j].pos = j }
func (h *dueHeap) Push(x any)        { t := x.(*fakeTask); t.pos = len(*h); *h = append(*h, t) }
func (h *dueHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.pos = -1
	return t
}

// NewFleet prepares a fleet; Run connects it.
func NewFleet(opt FleetOptions) (*Fleet, error) {
	if opt.Nodes <= 0 || opt.Nodes > agentapi.MaxAgentNodes {
		return nil, fmt.Errorf("fake-fleet: between 1 and %d nodes, got %d", agentapi.MaxAgentNodes, opt.Nodes)
	}
	if opt.Name == "" {
		opt.Name = "fake"
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.DefaultDuration <= 0 {
		opt.DefaultDuration = time.Second
	}
	if opt.Template.Capacity == nil && opt.Template.Devices == nil {
		opt.Template = DefaultFleetNode()
	}
	c, err := newClient(opt.Server, opt.Token, opt.TLS)
	if err != nil {
		return nil, err
	}
	f := &Fleet{opt: opt, running: map[string]*fakeTask{}, wake: make(chan struct{}, 1)}
	width := len(fmt.Sprint(opt.Nodes))
	for i := 1; i <= opt.Nodes; i++ {
		n := opt.Template
		n.Name = fmt.Sprintf("%s-%0*d", opt.Name, width, i)
		n.Devices = append([]api.Device(nil), opt.Template.Devices...)
		for j := range n.Devices {
			n.Devices[j].Simulated = true
		}
		if err := n.Validate(); err != nil {
			return nil, fmt.Errorf("fake-fleet node: %w", err)
		}
		f.specs = append(f.specs, n)
	}
	f.sess = &session{name: opt.Name, c: c, r: f, rep: newReporter(), log: opt.Logger.With("agent", opt.Name)}
	return f, nil
}

// Run keeps the fleet connected and its tasks "running" until ctx ends.
func (f *Fleet) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.finishDue(ctx) }()
	f.sess.run(ctx)
	wg.Wait()
	return nil
}

// Connected reports how many times the fleet registered.
func (f *Fleet) Connected() int64 { return f.sess.connected.Load() }

// Stats returns the tasks running now and finished so far.
func (f *Fleet) Stats() (running int, finished int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running), f.done
}

func (f *Fleet) nodes() []api.Node { return f.specs }

func (f *Fleet) beats() []agentapi.Beat {
	f.mu.Lock()
	busy := make(map[string]int, len(f.running))
	for _, t := range f.running {
		busy[t.node]++
	}
	f.mu.Unlock()
	out := make([]agentapi.Beat, len(f.specs))
	for i := range f.specs {
		out[i] = agentapi.Beat{Node: f.specs[i].Name, CPU: min(float64(busy[f.specs[i].Name])/8, 1)}
	}
	return out
}

func (f *Fleet) sync(snapshot []agentapi.Assignment) {
	want := make(map[string]bool, len(snapshot))
	for i := range snapshot {
		want[snapshot[i].Task] = true
	}
	f.mu.Lock()
	for id, t := range f.running {
		if !want[id] {
			f.drop(t)
		}
	}
	f.mu.Unlock()
	for i := range snapshot {
		f.assign(snapshot[i])
	}
}

func (f *Fleet) assign(a agentapi.Assignment) {
	d := time.Duration(a.Duration)
	if d <= 0 {
		d = f.opt.DefaultDuration
	}
	f.mu.Lock()
	if t := f.running[a.Task]; t != nil {
		if t.attempt == a.Attempt {
			f.mu.Unlock()
			return
		}
		f.drop(t)
	}
	t := &fakeTask{key: key{a.Task, a.Attempt}, node: a.Node, at: time.Now().Add(d)}
	f.running[a.Task] = t
	heap.Push(&f.due, t)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	if a.State == "scheduled" {
		f.sess.rep.add(agentapi.StatusUpdate{Task: a.Task, Attempt: a.Attempt, State: agentapi.StatusRunning}, nil)
	}
}

// drop forgets a running task; f.mu held.
func (f *Fleet) drop(t *fakeTask) {
	delete(f.running, t.task)
	if t.pos >= 0 {
		heap.Remove(&f.due, t.pos)
	}
}

func (f *Fleet) revoke(task string, attempt int, _ string) {
	f.mu.Lock()
	if t := f.running[task]; t != nil && t.attempt == attempt {
		f.drop(t)
	}
	f.mu.Unlock()
}

func (f *Fleet) fence(reason string) {
	f.mu.Lock()
	var lost []key
	for _, t := range f.running {
		lost = append(lost, t.key)
		f.drop(t)
	}
	f.mu.Unlock()
	for _, k := range lost {
		f.sess.rep.add(agentapi.StatusUpdate{Task: k.task, Attempt: k.attempt, State: agentapi.StatusLost, Reason: reason}, nil)
	}
}

// finishDue reports each task succeeded when its duration has passed.
func (f *Fleet) finishDue(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		f.mu.Lock()
		now := time.Now()
		var ended []key
		for len(f.due) > 0 && !f.due[0].at.After(now) {
			ft := heap.Pop(&f.due).(*fakeTask)
			delete(f.running, ft.task)
			ended = append(ended, ft.key)
		}
		f.done += int64(len(ended))
		next := time.Hour
		if len(f.due) > 0 {
			next = f.due[0].at.Sub(now)
		}
		f.mu.Unlock()
		for _, k := range ended {
			f.sess.rep.add(agentapi.StatusUpdate{Task: k.task, Attempt: k.attempt, State: agentapi.StatusSucceeded}, nil)
		}
		t.Reset(next)
		select {
		case <-t.C:
		case <-f.wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-ctx.Done():
			return
		}
	}
}
