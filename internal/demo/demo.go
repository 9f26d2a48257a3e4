// Package demo runs the scheduling core on the embedded default fleet and
// workload in simulated time (`hetsched demo`; `hetsched up` runs the same
// fleet for real, with the server and agents). Every decision printed is the core's own; only
// the passage of time and the tasks' running are simulated (a task runs for
// its duration divided by the chosen alternative's speed).
package demo

import (
	"bufio"
	"container/heap"
	_ "embed"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

//go:embed fleet.yaml
var fleetYAML []byte

//go:embed workload.yaml
var workloadYAML []byte

//go:embed queues.yaml
var queuesYAML []byte

// Waves are waves of tasks arriving at simulated times (the demo's own
// file; the simulator's traces are trace.Workload).
type Waves struct {
	Arrivals []Wave `json:"arrivals"`
}

// Wave is tasks arriving together, At a simulated time.
type Wave struct {
	At    api.Duration `json:"at"`
	Tasks []api.Task   `json:"tasks"`
}

// DefaultFleet returns the embedded fleet.
func DefaultFleet() (api.NodesFile, error) {
	var f api.NodesFile
	if err := yaml.UnmarshalStrict(fleetYAML, &f); err != nil {
		return f, fmt.Errorf("embedded fleet: %w", err)
	}
	return f, nil
}

// DefaultQueues returns the embedded queue tree of `hetsched up`
// (queues.yaml), validated queue by queue; the root is the implicit parent
// (Parent "").
func DefaultQueues() ([]api.Queue, error) {
	var f struct {
		Queues []api.Queue `json:"queues"`
	}
	if err := yaml.UnmarshalStrict(queuesYAML, &f); err != nil {
		return nil, fmt.Errorf("embedded queues: %w", err)
	}
	for i := range f.Queues {
		if f.Queues[i].Parent == api.RootQueue {
			f.Queues[i].Parent = ""
		}
		if err := f.Queues[i].Validate(); err != nil {
			return nil, fmt.Errorf("embedded queues[%d]: %w", i, err)
		}
	}
	return f.Queues, nil
}

// DefaultWaves returns the embedded waves.
func DefaultWaves() (Waves, error) {
	var w Waves
	if err := yaml.UnmarshalStrict(workloadYAML, &w); err != nil {
		return w, fmt.Errorf("embedded workload: %w", err)
	}
	return w, nil
}

// LocalNode describes this machine: its real CPU count and memory (from
// /proc/meminfo; 0 when unreadable), no accelerators.
func LocalNode() api.Node {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "local"
	}
	name := "local-" + sanitize(host)
	capList := resource.List{resource.CPU: int64(runtime.NumCPU()) * 1000}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for i := 0; sc.Scan() && i < 64; i++ {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					capList[resource.Memory] = kb * 1024
				}
			}
		}
	}
	return api.Node{Name: name, Labels: map[string]string{"hetsched.io/local": "true"}, Capacity: capList}
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 50 {
			break
		}
	}
	return strings.Trim(b.String(), "-.")
}

// Options tune a run.
type Options struct {
	Policy string
	// Horizon stops the simulation (simulated time).
	Horizon time.Duration
	// Quiet prints only the summary.
	Quiet bool
}

// Summary is what a run measured.
type Summary struct {
	Submitted, Placed, Succeeded, Preempted, Expired, Skipped, Unplaced int
	Makespan                                                            time.Duration
	MeanDelay                                                           [4]time.Duration
	MaxDelay                                                            [4]time.Duration
	// MaxFirstDelay is MaxDelay over first attempts only (no re-queue after
	// preemption).
	MaxFirstDelay [4]time.Duration
	// Utilization is the time-averaged allocated fraction per resource,
	// over the makespan.
	Utilization map[string]float64
}

type finishEvent struct {
	at      time.Duration
	task    string
	attempt int
}

type finishHeap []finishEvent

func (h finishHeap) Len() int { return len(h) }
func (h finishHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].task < h[j].task
}
func (h finishHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *finishHeap) Push(x any)   { *h = append(*h, x.(finishEvent)) }
func (h *finishHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run drives a fresh core with fleet and workload, printing decisions to w.
func Run(w io.Writer, fleet api.NodesFile, work Waves, opt Options) (Summary, error) {
	cfg := core.DefaultConfig()
	if opt.Policy != "" {
		cfg.Policy = opt.Policy
	}
	if opt.Horizon == 0 {
		opt.Horizon = 48 * time.Hour
	}
	c, err := core.New(cfg)
	if err != nil {
		return Summary{}, err
	}
	epoch := time.Unix(0, 0).UTC()
	for i := range fleet.Nodes {
		if err := c.UpsertNode(epoch, &fleet.Nodes[i]); err != nil {
			return Summary{}, fmt.Errorf("node %s: %w", fleet.Nodes[i].Name, err)
		}
	}
	specs := map[string]*api.Task{}
	arrivals := append([]Wave(nil), work.Arrivals...)
	sort.SliceStable(arrivals, func(i, j int) bool { return arrivals[i].At < arrivals[j].At })
	var s Summary
	var delays [4][]time.Duration
	var finishes finishHeap
	attempts := map[string]int{}
	dims := c.Dims()
	capTotal := resource.Vector{}
	for _, n := range c.Nodes() {
		capTotal.Add(n.Capacity())
	}
	var allocArea [resource.MaxDims]float64
	var lastT time.Duration
	say := func(now time.Duration, format string, args ...any) {
		if !opt.Quiet {
			fmt.Fprintf(w, "%8s  %s\n", now.Round(time.Second), fmt.Sprintf(format, args...))
		}
	}
	now := time.Duration(0)
	for {
		// Accumulate allocation over [lastT, now).
		if now > lastT {
			var alloc resource.Vector
			for _, n := range c.Nodes() {
				alloc.Add(n.Allocated())
			}
			for i := 0; i < dims.Len(); i++ {
				allocArea[i] += float64(alloc[i]) * float64(now-lastT)
			}
			lastT = now
		}
		for len(arrivals) > 0 && arrivals[0].At.D() <= now {
			for i := range arrivals[0].Tasks {
				t := &arrivals[0].Tasks[i]
				if err := t.Validate(); err != nil {
					return s, fmt.Errorf("workload task %s: %w", t.ID, err)
				}
				specs[t.ID] = t
				if err := c.Submit(epoch.Add(now), t); err != nil {
					return s, fmt.Errorf("submit %s: %w", t.ID, err)
				}
				s.Submitted++
				say(now, "submit   %-16s priority=%d %s", t.ID, t.PriorityOrDefault(), t.Resources)
			}
			arrivals = arrivals[1:]
		}
		for len(finishes) > 0 && finishes[0].at <= now {
			ev := heap.Pop(&finishes).(finishEvent)
			tk, ok := c.Task(ev.task)
			if !ok || attempts[ev.task] != ev.attempt || (tk.State() != core.Running && tk.State() != core.Scheduled) {
				continue // preempted or re-queued since
			}
			if err := c.TaskFinished(epoch.Add(now), ev.task, core.Result{}); err != nil {
				return s, err
			}
			s.Succeeded++
			say(now, "finish   %-16s succeeded", ev.task)
		}
		c.Tick(epoch.Add(now))
		out := c.TakeOutput()
		for _, p := range out.Placements {
			s.Placed++
			attempts[p.Task] = p.Attempt
			delays[p.Priority] = append(delays[p.Priority], p.Delay)
			if p.Attempt == 0 && p.Delay > s.MaxFirstDelay[p.Priority] {
				s.MaxFirstDelay[p.Priority] = p.Delay
			}
			spec := specs[p.Task]
			speed := 1.0
			if p.Chosen >= 0 && spec.Alternatives[p.Chosen].Speed > 0 {
				speed = spec.Alternatives[p.Chosen].Speed
			}
			run := time.Duration(float64(spec.Duration.D()) / speed)
			if run <= 0 {
				run = time.Minute
			}
			if err := c.TaskStarted(epoch.Add(now), p.Task); err != nil {
				return s, err
			}
			heap.Push(&finishes, finishEvent{at: now + run, task: p.Task, attempt: p.Attempt})
			var devs []string
			for _, d := range p.Devices {
				ds := d.Type + ":" + d.ID
				if d.Share != 1000 {
					ds += "(" + resource.FormatMilli(int64(d.Share)) + ")"
				}
				devs = append(devs, ds)
			}
			option := "resources"
			if p.Chosen >= 0 {
				option = "alternative " + strconv.Itoa(p.Chosen)
			}
			say(now, "place    %-16s on %-10s %s via %s, waited %s", p.Task, p.Node, strings.Join(devs, " "), option, p.Delay)
		}
		for _, p := range out.Preemptions {
			say(now, "preempt  %-16s on %s for %s", p.Victim, p.Node, p.By)
		}
		for _, tr := range out.Transitions {
			switch tr.To {
			case core.Preempted:
				s.Preempted++
			case core.Expired:
				s.Expired++
				say(now, "expire   %-16s %s", tr.Task, tr.Reason)
			case core.Skipped:
				s.Skipped++
				say(now, "skip     %-16s %s", tr.Task, tr.Reason)
			}
		}
		for _, u := range out.Unschedulable {
			say(now, "waiting  %-16s (%d like it) %s", u.Sample, u.Count, u.Reason)
		}
		// The TaskStarted transitions; out is not read after this.
		c.TakeOutput()
		// Next event.
		next := time.Duration(-1)
		pick := func(t time.Duration) {
			if t > now && (next < 0 || t < next) {
				next = t
			}
		}
		if len(arrivals) > 0 {
			pick(arrivals[0].At.D())
		}
		if len(finishes) > 0 {
			pick(finishes[0].at)
		}
		if wk, ok := c.NextWakeup(); ok {
			pick(wk.Sub(epoch))
		}
		if next < 0 || next > opt.Horizon {
			break
		}
		now = next
	}
	s.Makespan = now
	p := c.Pending()
	s.Unplaced = p[0] + p[1] + p[2] + p[3]
	for l := range delays {
		var sum time.Duration
		for _, d := range delays[l] {
			sum += d
			if d > s.MaxDelay[l] {
				s.MaxDelay[l] = d
			}
		}
		if len(delays[l]) > 0 {
			s.MeanDelay[l] = sum / time.Duration(len(delays[l]))
		}
	}
	s.Utilization = map[string]float64{}
	if now > 0 {
		for i := 0; i < dims.Len(); i++ {
			if capTotal[i] > 0 {
				s.Utilization[string(dims.Name(i))] = allocArea[i] / (float64(capTotal[i]) * float64(now))
			}
		}
	}
	return s, nil
}

// PrintSummary writes the summary as a small table.
func PrintSummary(w io.Writer, s Summary) {
	fmt.Fprintf(w, "\nsubmitted %d, placed %d (preemptions %d), succeeded %d, expired %d, skipped %d, still pending %d; makespan %s (simulated)\n",
		s.Submitted, s.Placed, s.Preempted, s.Succeeded, s.Expired, s.Skipped, s.Unplaced, s.Makespan)
	fmt.Fprintf(w, "%-8s %14s %14s\n", "tier", "mean delay", "max delay")
	for l := range s.MeanDelay {
		fmt.Fprintf(w, "%-8s %14s %14s\n", api.TierNames[l], s.MeanDelay[l].Round(time.Millisecond), s.MaxDelay[l].Round(time.Millisecond))
	}
	names := make([]string, 0, len(s.Utilization))
	for n := range s.Utilization {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-16s %s\n", "resource", "allocated (time average over the makespan)")
	for _, n := range names {
		fmt.Fprintf(w, "%-16s %5.1f%%\n", n, 100*s.Utilization[n])
	}
}
