package core

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestScenarios runs the data-driven scenario files in testdata/scenarios.
// Each command drives the core and prints what it decided; the core's
// invariants are checked after every command. Regenerate expectations with
// `go test ./internal/core -run TestScenarios -rewrite` and read the diff.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := h.run(t, td)
			if h.c != nil {
				if err := checkInvariants(h.c); err != nil {
					t.Fatalf("%s: invariant broken after %q: %v", td.Pos, td.Cmd, err)
				}
			}
			return out
		})
	})
}

// harness is the state of one scenario file.
type harness struct {
	c   *Core
	now time.Time
}

var epoch = time.Unix(1_000_000, 0)

func arg(td *datadriven.TestData, key string) (string, bool) {
	a, ok := td.Arg(key)
	if !ok || len(a.Vals) == 0 {
		return "", ok
	}
	return a.Vals[0], true
}

func args(td *datadriven.TestData, key string) []string {
	a, ok := td.Arg(key)
	if !ok {
		return nil
	}
	return a.Vals
}

func mustDur(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		t.Fatalf("bad duration %q: %v", s, err)
	}
	return d
}

func kv(vals []string) map[string]string {
	if len(vals) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, v := range vals {
		k, val, _ := strings.Cut(v, "=")
		m[k] = val
	}
	return m
}

func quantity(t *testing.T, name resource.Name, s string) int64 {
	v, err := resource.ParseQuantity(s, name.Scale())
	if err != nil {
		t.Fatalf("bad quantity %s=%q: %v", name, s, err)
	}
	return v
}

func (h *harness) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "init" && h.c == nil {
		t.Fatalf("%s: init first", td.Pos)
	}
	var err error
	switch td.Cmd {
	case "init":
		return h.init(t, td)
	case "node":
		err = h.upsertNode(t, td)
	case "submit":
		var answer string
		if answer, err = h.submit(t, td); answer != "" {
			return answer
		}
	case "tick":
		if v, ok := arg(td, "by"); ok {
			h.now = h.now.Add(mustDur(t, v))
		}
		h.c.Tick(h.now)
	case "advance":
		v, _ := arg(td, "by")
		h.now = h.now.Add(mustDur(t, v))
		return "now=" + h.now.Sub(epoch).String()
	case "start":
		for _, id := range args(td, "id") {
			if err = h.c.TaskStarted(h.now, id); err != nil {
				break
			}
		}
	case "finish":
		err = h.finish(td)
	case "job":
		err = h.addJob(t, td)
	case "queue":
		err = h.setQueue(t, td)
	case "lost":
		for _, id := range args(td, "id") {
			if err = h.c.TaskLost(h.now, id, "run lost"); err != nil {
				break
			}
		}
	case "cancel":
		id, _ := arg(td, "id")
		err = h.c.Cancel(h.now, id, "")
	case "renew":
		id, _ := arg(td, "id")
		err = h.c.Renew(h.now, id)
	case "forget":
		id, _ := arg(td, "id")
		err = h.c.Forget(id)
	case "health":
		err = h.health(td)
	case "state":
		node, _ := arg(td, "node")
		to, _ := arg(td, "to")
		err = h.c.SetNodeState(h.now, node, to)
	case "remove":
		node, _ := arg(td, "node")
		err = h.c.RemoveNode(h.now, node)
	case "observe":
		err = h.observe(td)
	case "profile":
		// profile class=C model=M runtime=D: a declared run time.
		class, _ := arg(td, "class")
		model, _ := arg(td, "model")
		rt, _ := arg(td, "runtime")
		err = h.c.ObserveRuntime(h.now, class, model, mustDur(t, rt))
	case "show":
		return h.show(td)
	case "nodes":
		return h.showNodes()
	case "groups":
		return h.showGroups()
	case "queues":
		return h.queues()
	case "pending":
		p := h.c.Pending()
		return fmt.Sprintf("urgent=%d high=%d medium=%d low=%d", p[0], p[1], p[2], p[3])
	case "wakeup":
		w, ok := h.c.NextWakeup()
		if !ok {
			return "none"
		}
		return "in " + w.Sub(h.now).String()
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	b.WriteString(formatOutput(h.c.TakeOutput()))
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

// init runs "init": a new core with the arguments' configuration.
func (h *harness) init(t *testing.T, td *datadriven.TestData) string {
	var err error
	cfg := DefaultConfig()
	if p, ok := arg(td, "policy"); ok {
		cfg.Policy = p
	}
	for l := 2; l < 4; l++ {
		s := strconv.Itoa(l)
		if v, ok := arg(td, "batch"+s); ok {
			cfg.Tiers[l].BatchSize, _ = strconv.Atoi(v)
		}
		if v, ok := arg(td, "window"+s); ok {
			cfg.Tiers[l].Window = mustDur(t, v)
		}
		if v, ok := arg(td, "aging"+s); ok {
			cfg.Tiers[l].AgingAfter = mustDur(t, v)
		}
	}
	if v, ok := arg(td, "hysteresis"); ok {
		cfg.AgingHysteresis, _ = strconv.ParseFloat(v, 64)
	}
	if v, ok := arg(td, "bypass"); ok {
		cfg.AgedBypass, _ = strconv.Atoi(v)
	}
	if v, ok := arg(td, "share-round"); ok {
		cfg.TimeShareRound = mustDur(t, v)
	}
	if v, ok := arg(td, "las"); ok {
		cfg.LASThresholds = nil
		for _, x := range strings.Split(v, ",") {
			cfg.LASThresholds = append(cfg.LASThresholds, mustDur(t, x))
		}
	}
	if v, ok := arg(td, "gavel-round"); ok {
		cfg.GavelRound = mustDur(t, v)
	}
	if v, ok := arg(td, "gavel-objective"); ok {
		cfg.GavelObjective = v
	}
	if v, ok := arg(td, "las-promote"); ok {
		cfg.LASPromote, _ = strconv.Atoi(v)
	}
	if v, ok := arg(td, "share-min-run"); ok {
		cfg.TimeShareMinRun = mustDur(t, v)
	}
	if v, ok := arg(td, "min-runtime"); ok {
		cfg.PreemptMinRuntime = mustDur(t, v)
	}
	if v, ok := arg(td, "sample"); ok {
		cfg.SampleSize, _ = strconv.Atoi(v)
	}
	if v, ok := arg(td, "max-visit"); ok {
		cfg.MaxVisit, _ = strconv.Atoi(v)
	}
	if v, ok := arg(td, "preempt-all-tiers"); ok {
		cfg.PreemptAllTiers = v == "true"
	}
	if v, ok := arg(td, "gang-reserve"); ok {
		cfg.GangReserveAfter = mustDur(t, v)
	}
	if v, ok := arg(td, "keep-noexecute"); ok {
		cfg.KeepOnNoExecute = v == "true"
	}
	h.c, err = New(cfg)
	h.now = epoch
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

// upsertNode runs "node": the spec from the input (JSON) or the arguments.
func (h *harness) upsertNode(t *testing.T, td *datadriven.TestData) error {
	var spec api.Node
	if strings.TrimSpace(td.Input) != "" {
		dec := json.NewDecoder(strings.NewReader(td.Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			t.Fatalf("%s: %v", td.Pos, err)
		}
	} else {
		spec = h.nodeFromArgs(t, td)
	}
	return h.c.UpsertNode(h.now, &spec)
}

// addJob runs "job": the job spec from the input (JSON).
func (h *harness) addJob(t *testing.T, td *datadriven.TestData) error {
	var js struct {
		ID           string
		FailFast     bool
		RetryLimit   int
		RetryBackoff string
		Gang         *struct {
			Members          []string
			MinMember        int
			Timeout          string
			Topology         []string
			RequiredTopology string
			MixedModels      bool
			EvictMembers     bool
		}
	}
	dec := json.NewDecoder(strings.NewReader(td.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&js); err != nil {
		t.Fatalf("%s: %v", td.Pos, err)
	}
	spec := JobSpec{ID: js.ID, FailFast: js.FailFast, RetryLimit: js.RetryLimit}
	if js.RetryBackoff != "" {
		spec.RetryBackoff = mustDur(t, js.RetryBackoff)
	}
	if g := js.Gang; g != nil {
		spec.Gang = &GangSpec{Members: g.Members, MinMember: g.MinMember, Topology: g.Topology,
			RequiredTopology: g.RequiredTopology, MixedModels: g.MixedModels, EvictMembers: g.EvictMembers}
		if g.Timeout != "" {
			spec.Gang.Timeout = mustDur(t, g.Timeout)
		}
	}
	return h.c.AddJob(h.now, spec)
}

// setQueue runs "queue": the queue from the input (JSON).
func (h *harness) setQueue(t *testing.T, td *datadriven.TestData) error {
	var q api.Queue
	dec := json.NewDecoder(strings.NewReader(td.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&q); err != nil {
		t.Fatalf("%s: %v", td.Pos, err)
	}
	return h.c.SetQueue(h.now, &q)
}

// health runs "health": a device healthy or not.
func (h *harness) health(td *datadriven.TestData) error {
	node, _ := arg(td, "node")
	dev, _ := arg(td, "dev")
	typ := "nvidia.com/gpu"
	if v, ok := arg(td, "type"); ok {
		typ = v
	}
	hv, _ := arg(td, "healthy")
	return h.c.SetDeviceHealth(h.now, node, typ, dev, hv == "true")
}

// observe runs "observe": one utilization sample.
func (h *harness) observe(td *datadriven.TestData) error {
	node, _ := arg(td, "node")
	u := NodeUsage{}
	if v, ok := arg(td, "cpu"); ok {
		u.CPU, _ = strconv.ParseFloat(v, 64)
	}
	if d := kv(args(td, "devs")); d != nil {
		u.Devices = map[string]float64{}
		for k, v := range d {
			u.Devices[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return h.c.ObserveNode(h.now, node, u)
}

// finish runs "finish": tasks end with the exit code (or timed out).
func (h *harness) finish(td *datadriven.TestData) error {
	r := Result{}
	if v, ok := arg(td, "exit"); ok {
		r.ExitCode, _ = strconv.Atoi(v)
	}
	r.TimedOut = td.HasArg("timedout")
	for _, id := range args(td, "id") {
		if err := h.c.TaskFinished(h.now, id, r); err != nil {
			return err
		}
	}
	return nil
}

// show runs "show": the named tasks' state.
func (h *harness) show(td *datadriven.TestData) string {
	var b strings.Builder
	for _, id := range args(td, "id") {
		tk, ok := h.c.Task(id)
		if !ok {
			fmt.Fprintf(&b, "%s: unknown\n", id)
			continue
		}
		fmt.Fprintf(&b, "%s: %s level=%d attempt=%d", id, tk.State(), tk.Level(), tk.attempt)
		if tk.node != nil {
			fmt.Fprintf(&b, " node=%s", tk.node.name)
		}
		if r := tk.Reason(); r != "" {
			fmt.Fprintf(&b, " reason=%q", r)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// nodes runs "nodes": every node's allocation.
func (h *harness) showNodes() string {
	var b strings.Builder
	for _, n := range h.c.Nodes() {
		fmt.Fprintf(&b, "%s %s alloc=%s cap=%s tasks=%d", n.name, n.state, h.c.dims.Format(&n.alloc), h.c.dims.Format(&n.capacity), len(n.tasks))
		for _, d := range n.devices {
			if d.Used > 0 || !d.Healthy {
				fmt.Fprintf(&b, " %s=%d", d.ID, d.Used)
				if !d.Healthy {
					b.WriteString("(unhealthy)")
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// groups runs "groups": the node groups.
func (h *harness) showGroups() string {
	var b strings.Builder
	for _, g := range h.c.idx.glist {
		fmt.Fprintf(&b, "group %d: %d nodes (%d schedulable)\n", g.id, g.members, g.indexed)
	}
	return b.String()
}

// submit runs "submit": a task from the input (JSON), or one per id
// from the arguments. A spec that does not decode or validate is
// answered at once (answer), before the core sees it.
func (h *harness) submit(t *testing.T, td *datadriven.TestData) (answer string, err error) {
	var spec api.Task
	if strings.TrimSpace(td.Input) != "" {
		dec := json.NewDecoder(strings.NewReader(td.Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return "error: " + err.Error(), nil
		}
		if err := spec.Validate(); err != nil {
			return "error: " + err.Error(), nil
		}
		if j, ok := arg(td, "job"); ok {
			return "", h.c.SubmitJobTask(h.now, j, &spec)
		}
		// id=(a,b,...) submits one task per id, each the input's.
		for _, id := range args(td, "id") {
			one := spec
			one.ID = id
			if err := h.c.Submit(h.now, &one); err != nil {
				return "error: " + err.Error(), nil
			}
		}
		if len(args(td, "id")) > 0 {
			return "", nil
		}
		return "", h.c.Submit(h.now, &spec)
	}
	ids := args(td, "id")
	for _, id := range ids {
		spec = h.taskFromArgs(t, td)
		spec.ID = id
		if err := spec.Validate(); err != nil {
			return "", err
		}
		if err := h.c.Submit(h.now, &spec); err != nil {
			return "", err
		}
	}
	return "", nil
}

// queues prints each queue's usage, weighted dominant share, whether it is
// below its guarantee, and its fair share.
func (h *harness) queues() string {
	names := make([]string, 0, len(h.c.qs.tree))
	for n := range h.c.qs.tree {
		names = append(names, n)
	}
	sort.Strings(names)
	fair := h.c.FairShares()
	var b strings.Builder
	for _, n := range names {
		q := h.c.qs.tree[n]
		fmt.Fprintf(&b, "%s used=%s share=%.3f under=%v fair=%s\n", n, h.c.dims.Format(&q.used), q.share, q.under, fair[n])
	}
	return b.String()
}

func (h *harness) nodeFromArgs(t *testing.T, td *datadriven.TestData) api.Node {
	name, _ := arg(td, "name")
	spec := api.Node{Name: name, Capacity: resource.List{}}
	if v, ok := arg(td, "cpu"); ok {
		spec.Capacity[resource.CPU] = quantity(t, resource.CPU, v)
	}
	if v, ok := arg(td, "mem"); ok {
		spec.Capacity[resource.Memory] = quantity(t, resource.Memory, v)
	}
	spec.Labels = kv(args(td, "labels"))
	spec.Taints = args(td, "taints")
	spec.State, _ = arg(td, "state")
	devs := func(typ, countKey, modelKey, domKey, domLabel string) {
		v, ok := arg(td, countKey)
		if !ok {
			return
		}
		n, _ := strconv.Atoi(v)
		model, _ := arg(td, modelKey)
		doms := 1
		if dv, ok := arg(td, domKey); ok {
			doms, _ = strconv.Atoi(dv)
		}
		per := (n + doms - 1) / doms
		for i := 0; i < n; i++ {
			spec.Devices = append(spec.Devices, api.Device{Type: typ, ID: strconv.Itoa(i), Model: model,
				Topology: map[string]string{domLabel: name + "-d" + strconv.Itoa(i/per)}})
		}
	}
	devs("nvidia.com/gpu", "gpu", "model", "domains", api.TopologyNVLink)
	devs("google.com/tpu", "tpu", "tpu-model", "tpu-domains", api.TopologyICI)
	return spec
}

func (h *harness) taskFromArgs(t *testing.T, td *datadriven.TestData) api.Task {
	spec := api.Task{Resources: resource.List{}}
	if v, ok := arg(td, "prio"); ok {
		p, _ := strconv.Atoi(v)
		spec.Priority = &p
	}
	spec.Name, _ = arg(td, "name")
	for key, name := range map[string]resource.Name{"cpu": resource.CPU, "mem": resource.Memory, "gpu": "nvidia.com/gpu", "tpu": "google.com/tpu"} {
		if v, ok := arg(td, key); ok {
			spec.Resources[name] = quantity(t, name, v)
		}
	}
	spec.NodeSelector = kv(args(td, "selector"))
	spec.Tolerations = args(td, "tol")
	for key, dst := range map[string]*api.Duration{"duration": &spec.Duration, "timeout": &spec.Timeout, "qtimeout": &spec.QueueTimeout, "lease": &spec.Lease} {
		if v, ok := arg(td, key); ok {
			*dst = api.Duration(mustDur(t, v))
		}
	}
	spec.Depends = args(td, "depends")
	if v, ok := arg(td, "preemptible"); ok {
		b := v == "true"
		spec.Preemptible = &b
	}
	if v, ok := arg(td, "checkpoint"); ok {
		spec.Checkpoint = &api.Checkpoint{Signal: v}
		spec.Command = []string{"train"} // only a command is checkpointed
	}
	if v, ok := arg(td, "class"); ok {
		spec.Metadata = map[string]string{"class": v}
	}
	spec.Queue, _ = arg(td, "queue")
	if v, ok := arg(td, "value"); ok {
		n, _ := strconv.ParseInt(v, 10, 32)
		spec.PriorityValue = int32(n)
	}
	spec.PreemptionPolicy, _ = arg(td, "preemption")
	return spec
}

func formatOutput(o Output) string {
	var b strings.Builder
	for _, p := range o.Placements {
		var devs []string
		for _, d := range p.Devices {
			s := d.Type + "/" + d.ID
			if d.Share != 1000 {
				s += "(" + resource.FormatMilli(int64(d.Share)) + ")"
			}
			devs = append(devs, s)
		}
		sort.Strings(devs)
		fmt.Fprintf(&b, "placed %s on %s", p.Task, p.Node)
		if len(devs) > 0 {
			fmt.Fprintf(&b, " devices=[%s]", strings.Join(devs, " "))
		}
		if p.Chosen >= 0 {
			fmt.Fprintf(&b, " alternative=%d", p.Chosen)
		}
		fmt.Fprintf(&b, " level=%d waited=%s\n", p.Level, p.Delay)
	}
	for _, p := range o.Preemptions {
		if p.By == "" {
			fmt.Fprintf(&b, "preempt %s on %s for the round (%s)\n", p.Victim, p.Node, p.Reason)
		} else {
			fmt.Fprintf(&b, "preempt %s on %s for %s (%s)\n", p.Victim, p.Node, p.By, p.Reason)
		}
	}
	for _, tr := range o.Transitions {
		fmt.Fprintf(&b, "%s: %s -> %s", tr.Task, tr.From, tr.To)
		if tr.Reason != "" {
			fmt.Fprintf(&b, " (%s)", tr.Reason)
		}
		if tr.Attempt > 0 {
			fmt.Fprintf(&b, " attempt=%d", tr.Attempt)
		}
		b.WriteByte('\n')
	}
	for _, u := range o.Unschedulable {
		fmt.Fprintf(&b, "unschedulable %s (%d waiting): %s\n", u.Sample, u.Count, u.Reason)
	}
	return b.String()
}
