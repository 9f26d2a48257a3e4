package core

import (
	"fmt"
	"strconv"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// The property tests' inputs (property_test.go): random clusters, specs
// and input sequences as plain data, and the specs they build.

const (
	gpuRes = "nvidia.com/gpu"
	tpuRes = "google.com/tpu"
	licRes = "example.com/license" // a pooled extended resource: no devices

	hostLabel = "kubernetes.io/hostname" // an identity label by default

	selNowhere = 10 // taskParams.Sel matching no node
)

var (
	propGPUReqs  = []int64{250, 500, 1000, 2000, 4000}
	propTPUReqs  = []int64{500, 1000, 2000, 4000}
	propDurs     = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second, 30 * time.Second}
	propStates   = []string{api.NodeReady, api.NodeNotReady, api.NodeCordoned, api.NodeDraining}
	propExits    = []int{0, 0, 0, 1, 137}
	propTaints   = []string{"", "dedicated=ml:NoSchedule", "spot:PreferNoSchedule", "maint:NoExecute"}
	propTols     = []string{"", "dedicated=ml", "*", "maint", "dedicated:NoSchedule"}
	propNames    = []string{"", "train", "infer"}
	propSpeeds   = []float64{0, 0.5, 1, 2}
	propGPUModel = []string{"A", "B"}
	propTPUModel = []string{"v4", "v5"}
)

// taskParams describes a task spec; the id and the dependency are resolved
// when the spec is submitted.
type taskParams struct {
	Prio                         int // -1: unset (default)
	CPU                          int // quarter cores
	Mem                          int // 512Mi units
	GPU, TPU                     int // index into propGPUReqs/propTPUReqs, -1 none
	Lic                          int // licenses, 0 none
	Alt                          int // 0 none, 1 cpu only, 2 tpu, 3 gpu, 4 two alternatives
	Speed                        int
	Sel                          int // nodeSelector choice (see buildTaskSpec), 0 none
	Tol                          int // index into propTols
	QTimeout, Lease, Timeout, Du int // index into propDurs
	Dep                          int // -1 none, else picks an earlier task
	Preempt                      int // 0 unset, 1 true, 2 false
	Name                         int
	Cons                         consParams
}

// nodeParams describes a node spec.
type nodeParams struct {
	CPU, MemGi      int
	GPUs            int // -1: no GPU type at all
	GPUModel        int // 0 A, 1 B, 2 mixed
	GPUDoms         int
	TPUs            int // -1: no TPU type at all
	TPUDoms         int
	Lic             int // license capacity, 0 none
	Zone            int // 0 none, 1 z1, 2 z2
	Pool            bool
	Taint           int
	Unhealthy       int // -1 none, else the index of a device listed unhealthy
	State           int // index into propStates, -1 unset
	ExplicitZeroGPU bool
	Host            int // kubernetes.io/hostname: 0 none, 1 the node's name, 2 "shared"
}

type opKind uint8

const (
	opSubmit opKind = iota
	opCancel
	opStarted
	opFinished
	opRenew
	opTick
	opNodeState
	opDeviceHealth
	opUpsertNode
	opRemoveNode
	opAddNode
	opObserve
	opSettle // let time pass until nothing is due, then check liveness
	numOpKinds
)

var opKindNames = [numOpKinds]string{"submit", "cancel", "started", "finished", "renew", "tick", "state", "health", "upsert", "remove", "add", "observe", "settle"}

// op is one input, as data.
type op struct {
	Kind    opKind
	Adv     time.Duration // time advance before the op
	Task    taskParams
	Node    nodeParams
	Mut     int // UpsertNode mutation kind
	Pick    int
	Pick2   int
	Sel     int // task subset for task ops
	Exit    int
	Timeout bool
	State   int
	Util    int // percent
}

// GoString keeps rapid's draw log short.
func (o op) GoString() string {
	return fmt.Sprintf("{%s +%v pick=%d/%d sel=%d}", opKindNames[o.Kind], o.Adv, o.Pick, o.Pick2, o.Sel)
}

func drawTaskParams(t *rapid.T) taskParams {
	p := taskParams{Prio: -1, GPU: -1, TPU: -1, Dep: -1}
	if rapid.IntRange(0, 4).Draw(t, "prioSet") > 0 {
		p.Prio = rapid.IntRange(0, 3).Draw(t, "prio")
	}
	if rapid.IntRange(0, 3).Draw(t, "bare") > 0 { // else a device-only request
		p.CPU = rapid.IntRange(0, 32).Draw(t, "cpu")
		p.Mem = rapid.IntRange(0, 16).Draw(t, "mem")
	}
	switch rapid.IntRange(0, 5).Draw(t, "devs") {
	case 1, 2:
		p.GPU = rapid.IntRange(0, len(propGPUReqs)-1).Draw(t, "gpu")
	case 3:
		p.TPU = rapid.IntRange(0, len(propTPUReqs)-1).Draw(t, "tpu")
	case 4:
		p.GPU = rapid.IntRange(0, len(propGPUReqs)-1).Draw(t, "gpu")
		p.TPU = rapid.IntRange(0, len(propTPUReqs)-1).Draw(t, "tpu")
	}
	if rapid.IntRange(0, 7).Draw(t, "licSet") == 0 {
		p.Lic = rapid.IntRange(1, 3).Draw(t, "lic")
	}
	if rapid.IntRange(0, 3).Draw(t, "altSet") == 0 {
		p.Alt = rapid.IntRange(1, 4).Draw(t, "alt")
		p.Speed = rapid.IntRange(0, len(propSpeeds)-1).Draw(t, "speed")
	}
	if rapid.IntRange(0, 2).Draw(t, "selSet") == 0 {
		p.Sel = rapid.IntRange(1, 9).Draw(t, "sel")
	}
	if rapid.IntRange(0, 3).Draw(t, "tolSet") == 0 {
		p.Tol = rapid.IntRange(1, len(propTols)-1).Draw(t, "tol")
	}
	dur := func(label string) int {
		if rapid.IntRange(0, 3).Draw(t, label+"Set") > 0 {
			return 0
		}
		return rapid.IntRange(1, len(propDurs)-1).Draw(t, label)
	}
	p.QTimeout, p.Lease, p.Timeout, p.Du = dur("qtimeout"), dur("lease"), dur("timeout"), dur("duration")
	if rapid.IntRange(0, 4).Draw(t, "depSet") == 0 {
		p.Dep = rapid.IntRange(0, 1<<20).Draw(t, "dep")
	}
	p.Preempt = rapid.IntRange(0, 2).Draw(t, "preempt")
	p.Name = rapid.IntRange(0, len(propNames)-1).Draw(t, "name")
	if rapid.IntRange(0, 2).Draw(t, "consSet") == 0 {
		p.Cons = drawConsParams(t)
	}
	return p
}

func drawNodeParams(t *rapid.T) nodeParams {
	p := nodeParams{GPUs: -1, TPUs: -1, Unhealthy: -1, State: -1}
	p.CPU = rapid.IntRange(1, 32).Draw(t, "cpu")
	p.MemGi = rapid.IntRange(1, 64).Draw(t, "memGi")
	if rapid.IntRange(0, 2).Draw(t, "gpuSet") > 0 {
		p.GPUs = rapid.IntRange(0, 8).Draw(t, "gpus")
		p.GPUModel = rapid.IntRange(0, 2).Draw(t, "gpuModel")
		p.GPUDoms = rapid.IntRange(1, 3).Draw(t, "gpuDoms")
		p.ExplicitZeroGPU = p.GPUs == 0 && rapid.Bool().Draw(t, "zeroGPU")
	}
	if rapid.IntRange(0, 2).Draw(t, "tpuSet") == 0 {
		p.TPUs = rapid.IntRange(0, 4).Draw(t, "tpus")
		p.TPUDoms = rapid.IntRange(1, 2).Draw(t, "tpuDoms")
	}
	if rapid.IntRange(0, 4).Draw(t, "licSet") == 0 {
		p.Lic = rapid.IntRange(1, 4).Draw(t, "lic")
	}
	p.Zone = rapid.IntRange(0, 2).Draw(t, "zone")
	p.Pool = rapid.IntRange(0, 3).Draw(t, "pool") == 0
	if rapid.IntRange(0, 3).Draw(t, "taintSet") == 0 {
		p.Taint = rapid.IntRange(1, len(propTaints)-1).Draw(t, "taint")
	}
	if rapid.IntRange(0, 7).Draw(t, "unhealthySet") == 0 {
		p.Unhealthy = rapid.IntRange(0, 11).Draw(t, "unhealthy")
	}
	if rapid.IntRange(0, 9).Draw(t, "stateSet") == 0 {
		p.State = rapid.IntRange(0, len(propStates)-1).Draw(t, "state")
	}
	p.Host = rapid.IntRange(0, 2).Draw(t, "host")
	return p
}

// opWeights sets how often each kind is drawn.
type opWeights [numOpKinds]int

var defaultWeights = opWeights{
	opSubmit: 30, opCancel: 5, opStarted: 10, opFinished: 10, opRenew: 4, opTick: 15,
	opNodeState: 5, opDeviceHealth: 5, opUpsertNode: 5, opRemoveNode: 3, opAddNode: 4, opObserve: 4,
}

// churnWeights: a fixed cluster, many tasks coming and going.
var churnWeights = opWeights{
	opSubmit: 40, opCancel: 8, opStarted: 15, opFinished: 20, opRenew: 2, opTick: 15,
}

func drawOp(t *rapid.T, w *opWeights) op {
	total := 0
	for _, x := range w {
		total += x
	}
	r := rapid.IntRange(0, total-1).Draw(t, "kind")
	var o op
	for k, x := range w {
		if r < x {
			o.Kind = opKind(k)
			break
		}
		r -= x
	}
	o.Pick = rapid.IntRange(0, 1<<20).Draw(t, "pick")
	switch o.Kind {
	case opTick:
		if rapid.IntRange(0, 9).Draw(t, "long") == 0 {
			o.Adv = time.Duration(rapid.IntRange(1, 30).Draw(t, "secs")) * time.Second
		} else {
			o.Adv = time.Duration(rapid.IntRange(0, 50).Draw(t, "ms")) * time.Millisecond
		}
	default:
		if rapid.IntRange(0, 3).Draw(t, "advSet") == 0 {
			o.Adv = time.Duration(rapid.IntRange(0, 5000).Draw(t, "us")) * time.Microsecond
		}
	}
	switch o.Kind {
	case opSubmit:
		o.Task = drawTaskParams(t)
	case opCancel, opStarted, opFinished, opRenew:
		o.Sel = rapid.IntRange(0, 9).Draw(t, "sel")
		o.Exit = rapid.IntRange(0, len(propExits)-1).Draw(t, "exit")
		o.Timeout = rapid.IntRange(0, 9).Draw(t, "timedOut") == 0
	case opNodeState:
		o.State = rapid.IntRange(0, len(propStates)-1).Draw(t, "state")
	case opDeviceHealth:
		o.Pick2 = rapid.IntRange(0, 1<<20).Draw(t, "pick2")
	case opUpsertNode:
		o.Mut = rapid.IntRange(0, 11).Draw(t, "mut")
		o.Pick2 = rapid.IntRange(0, 1<<20).Draw(t, "pick2")
	case opAddNode:
		o.Node = drawNodeParams(t)
	case opObserve:
		o.Util = rapid.IntRange(0, 120).Draw(t, "util")
		o.Pick2 = rapid.IntRange(0, 1<<20).Draw(t, "pick2")
	}
	return o
}

func drawOps(t *rapid.T, w *opWeights, max int) []op {
	// A plain length draw shrinks well (rapid cuts the tail); lengths lean
	// short, so max is set well above the length that matters.
	n := rapid.IntRange(0, max).Draw(t, "nops")
	gen := rapid.Custom(func(t *rapid.T) op { return drawOp(t, w) })
	ops := make([]op, n)
	for i := range ops {
		ops[i] = gen.Draw(t, "op")
	}
	return ops
}

// drawConfig draws a policy and, now and then, tighter limits that reach
// the deferral, retry and batching paths.
func drawConfig(t *rapid.T) Config {
	cfg := DefaultConfig()
	cfg.Policy = rapid.SampledFrom(Policies()).Draw(t, "policy")
	// gavel-rounds places in rounds: short ones, so that a settled core
	// has had one (the settling follows wakeups within 100ms).
	cfg.GavelRound = time.Duration(rapid.IntRange(1, 50).Draw(t, "gavelRound")) * time.Millisecond
	cfg.LASPromote = rapid.IntRange(0, 3).Draw(t, "lasPromote")
	if rapid.IntRange(0, 3).Draw(t, "tweak") == 3 {
		cfg.MaxPlacementsPerCall = rapid.IntRange(1, 4).Draw(t, "maxPlacements")
		cfg.SampleSize = rapid.IntRange(1, 3).Draw(t, "sample")
		cfg.MaxVisit = cfg.SampleSize + rapid.IntRange(0, 2).Draw(t, "visitExtra")
		cfg.PreemptMinRuntime = time.Duration(rapid.IntRange(0, 2).Draw(t, "minRuntime")) * 5 * time.Millisecond
		cfg.PreemptMaxVisit = rapid.IntRange(1, 8).Draw(t, "preemptVisit")
		for l := 2; l < 4; l++ {
			cfg.Tiers[l].BatchSize = rapid.IntRange(0, 4).Draw(t, "batch")
			cfg.Tiers[l].Window = time.Duration(rapid.IntRange(0, 30).Draw(t, "window")) * time.Millisecond
			cfg.Tiers[l].AgingAfter = time.Duration(rapid.IntRange(0, 30).Draw(t, "aging")) * time.Millisecond
		}
	}
	return cfg
}

// buildTaskSpec makes the api.Task of p with id; deps are earlier ids.
func buildTaskSpec(p taskParams, id string, earlier []string) *api.Task {
	spec := &api.Task{ID: id, Resources: resource.List{}}
	if p.Prio >= 0 {
		prio := p.Prio
		spec.Priority = &prio
	}
	if p.CPU > 0 {
		spec.Resources[resource.CPU] = int64(p.CPU) * 250
	}
	if p.Mem > 0 {
		spec.Resources[resource.Memory] = int64(p.Mem) << 29
	}
	if p.GPU >= 0 {
		spec.Resources[gpuRes] = propGPUReqs[p.GPU]
	}
	if p.TPU >= 0 {
		spec.Resources[tpuRes] = propTPUReqs[p.TPU]
	}
	if p.Lic > 0 {
		spec.Resources[licRes] = int64(p.Lic) * 1000
	}
	alt := func(k int) api.Alternative {
		l := resource.List{resource.CPU: int64(1+k) * 500}
		switch k {
		case 2:
			l[tpuRes] = 1000
		case 3:
			l[gpuRes] = 500
		}
		return api.Alternative{Resources: l, Speed: propSpeeds[p.Speed]}
	}
	switch p.Alt {
	case 1, 2, 3:
		spec.Alternatives = []api.Alternative{alt(p.Alt)}
	case 4:
		spec.Alternatives = []api.Alternative{alt(3), alt(2)}
	}
	switch p.Sel {
	case 1:
		spec.NodeSelector = map[string]string{"zone": "z1"}
	case 2:
		spec.NodeSelector = map[string]string{gpuRes + ".model": "A"}
	case 3:
		spec.NodeSelector = map[string]string{gpuRes + ".model": "A|B"}
	case 4:
		spec.NodeSelector = map[string]string{"pool": "gold"}
	case 5:
		spec.NodeSelector = map[string]string{"zone": "z2", gpuRes + ".model": "B"}
	case 6:
		spec.NodeSelector = map[string]string{NodeNameLabel: "n0"}
	case 7:
		spec.NodeSelector = map[string]string{hostLabel: "n1|n2|m0"}
	case 8:
		spec.NodeSelector = map[string]string{hostLabel: "shared", "zone": "z1"}
	case 9:
		spec.NodeSelector = map[string]string{NodeNameLabel: "n1|n2", hostLabel: "n1|shared"}
	case selNowhere:
		spec.NodeSelector = map[string]string{"zone": "nowhere"}
	}
	if p.Tol > 0 {
		spec.Tolerations = []string{propTols[p.Tol]}
	}
	spec.QueueTimeout = api.Duration(propDurs[p.QTimeout])
	spec.Lease = api.Duration(propDurs[p.Lease])
	spec.Timeout = api.Duration(propDurs[p.Timeout])
	spec.Duration = api.Duration(propDurs[p.Du])
	if p.Dep >= 0 && len(earlier) > 0 {
		spec.Depends = []string{earlier[p.Dep%len(earlier)]}
	}
	switch p.Preempt {
	case 1, 2:
		b := p.Preempt == 1
		spec.Preemptible = &b
	}
	spec.Name = propNames[p.Name]
	p.Cons.apply(spec)
	return spec
}

func buildNodeSpec(p nodeParams, name string) *api.Node {
	spec := &api.Node{Name: name, Capacity: resource.List{
		resource.CPU:    int64(p.CPU) * 1000,
		resource.Memory: int64(p.MemGi) << 30,
	}}
	for i := 0; i < p.GPUs; i++ {
		model := propGPUModel[p.GPUModel%2]
		if p.GPUModel == 2 && i%2 == 1 {
			model = "B"
		}
		spec.Devices = append(spec.Devices, api.Device{Type: gpuRes, ID: "g" + strconv.Itoa(i), Model: model,
			Topology: map[string]string{api.TopologyNVLink: name + "-nv" + strconv.Itoa(i%p.GPUDoms)}})
	}
	if p.ExplicitZeroGPU {
		spec.Capacity[gpuRes] = 0
	}
	for i := 0; i < p.TPUs; i++ {
		spec.Devices = append(spec.Devices, api.Device{Type: tpuRes, ID: "t" + strconv.Itoa(i), Model: propTPUModel[i%2],
			Topology: map[string]string{api.TopologyICI: name + "-ici" + strconv.Itoa(i%p.TPUDoms)}})
	}
	if p.Lic > 0 {
		spec.Capacity[licRes] = int64(p.Lic) * 1000
	}
	if p.Unhealthy >= 0 && p.Unhealthy < len(spec.Devices) {
		spec.Devices[p.Unhealthy].Unhealthy = true
	}
	spec.Labels = map[string]string{}
	if p.Zone > 0 {
		spec.Labels["zone"] = "z" + strconv.Itoa(p.Zone)
	}
	if p.Pool {
		spec.Labels["pool"] = "gold"
	}
	switch p.Host {
	case 1:
		spec.Labels[hostLabel] = name
	case 2:
		spec.Labels[hostLabel] = "shared"
	}
	if p.Taint > 0 {
		spec.Taints = []string{propTaints[p.Taint]}
	}
	if p.State >= 0 {
		spec.State = propStates[p.State]
	}
	return spec
}

func cloneNodeSpec(n *api.Node) *api.Node {
	c := *n
	c.Labels = map[string]string{}
	for k, v := range n.Labels {
		c.Labels[k] = v
	}
	c.Taints = append([]string(nil), n.Taints...)
	c.Capacity = resource.List{}
	for k, v := range n.Capacity {
		c.Capacity[k] = v
	}
	c.Devices = nil
	for _, d := range n.Devices {
		nd := d
		nd.Topology = map[string]string{}
		for k, v := range d.Topology {
			nd.Topology[k] = v
		}
		c.Devices = append(c.Devices, nd)
	}
	return &c
}

func cloneTaskSpec(s *api.Task) *api.Task {
	c := *s
	cloneList := func(l resource.List) resource.List {
		if l == nil {
			return nil
		}
		m := resource.List{}
		for k, v := range l {
			m[k] = v
		}
		return m
	}
	c.Resources = cloneList(s.Resources)
	c.Alternatives = nil
	for _, a := range s.Alternatives {
		c.Alternatives = append(c.Alternatives, api.Alternative{Resources: cloneList(a.Resources), Speed: a.Speed})
	}
	if s.NodeSelector != nil {
		c.NodeSelector = map[string]string{}
		for k, v := range s.NodeSelector {
			c.NodeSelector[k] = v
		}
	}
	c.Tolerations = append([]string(nil), s.Tolerations...)
	c.Depends = append([]string(nil), s.Depends...)
	if s.Priority != nil {
		p := *s.Priority
		c.Priority = &p
	}
	if s.Preemptible != nil {
		b := *s.Preemptible
		c.Preemptible = &b
	}
	cloneConstraints(&c, s)
	return &c
}

// mutateNode changes spec in place the way kind says; a, b pick what.
func mutateNode(spec *api.Node, kind, a int) {
	switch kind {
	case 0, 1: // remove a device
		if len(spec.Devices) > 0 {
			i := a % len(spec.Devices)
			spec.Devices = append(spec.Devices[:i], spec.Devices[i+1:]...)
		}
	case 2: // shrink cpu (possibly to zero)
		c := spec.Capacity[resource.CPU]
		spec.Capacity[resource.CPU] = int64(a%int(c/250+1)) * 250
	case 3: // shrink memory
		m := spec.Capacity[resource.Memory] >> 29
		spec.Capacity[resource.Memory] = int64(a%int(m+1)) << 29
	case 4: // relabel
		switch a % 3 {
		case 0:
			delete(spec.Labels, "zone")
		case 1:
			spec.Labels["zone"] = "z1"
		case 2:
			spec.Labels["zone"] = "z2"
		}
	case 5: // taint or untaint
		if len(spec.Taints) > 0 {
			spec.Taints = nil
		} else {
			spec.Taints = []string{propTaints[1+a%(len(propTaints)-1)]}
		}
	case 6: // grow
		spec.Capacity[resource.CPU] += 4000
		spec.Capacity[resource.Memory] += 8 << 30
	case 7: // add a device
		typ, prefix, topo := gpuRes, "g", api.TopologyNVLink
		if a%3 == 0 {
			typ, prefix, topo = tpuRes, "t", api.TopologyICI
		}
		id := prefix + "x" + strconv.Itoa(a%1000)
		for _, d := range spec.Devices {
			if d.Type == typ && d.ID == id {
				return
			}
		}
		model := "A"
		if typ == tpuRes {
			model = "v4"
		}
		spec.Devices = append(spec.Devices, api.Device{Type: typ, ID: id, Model: model,
			Topology: map[string]string{topo: spec.Name + "-x"}})
	case 8: // change a device's model
		if len(spec.Devices) > 0 {
			d := &spec.Devices[a%len(spec.Devices)]
			switch d.Model {
			case "A":
				d.Model = "B"
			case "B":
				d.Model = "A"
			}
		}
	case 9: // list a device unhealthy, or healthy again
		if len(spec.Devices) > 0 {
			d := &spec.Devices[a%len(spec.Devices)]
			d.Unhealthy = !d.Unhealthy
		}
	case 10: // a state in the spec
		spec.State = propStates[a%len(propStates)]
	case 11: // same spec again
	}
}

func drawCluster(t *rapid.T) []nodeParams {
	n := rapid.IntRange(1, 5).Draw(t, "nodes")
	gen := rapid.Custom(drawNodeParams)
	ps := make([]nodeParams, n)
	for i := range ps {
		if i > 0 && rapid.IntRange(0, 2).Draw(t, "same") == 0 {
			ps[i] = ps[i-1] // interchangeable nodes share a group
			continue
		}
		ps[i] = gen.Draw(t, "node")
	}
	return ps
}

// drawSettledOps draws ops with a settle op somewhere in the middle and one
// at the end.
func drawSettledOps(t *rapid.T, w *opWeights) []op {
	ops := drawOps(t, w, 400)
	at := rapid.IntRange(0, len(ops)).Draw(t, "settleAt")
	settle := op{Kind: opSettle, Adv: time.Minute}
	ops = append(ops[:at], append([]op{settle}, ops[at:]...)...)
	return append(ops, settle)
}
