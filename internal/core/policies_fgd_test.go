package core

import (
	"encoding/csv"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// The FGD paper's protocol (ATC'23 §6, and its simulator's
// TunePodsByNodeTotalResource/SortClusterPods): pods are sorted by name and
// shuffled with the seed, then pods drawn at random from the original list
// are appended until the arrived GPU requests would pass 130% of the
// cluster's GPU capacity; every pod is placed once, in that order, with no
// departures; a pod that fits nowhere is skipped. The GPU allocation ratio
// is the allocated milli-GPUs over the capacity.

type fgdNode struct {
	name     string
	cpu, mem int64 // milli-CPU, MiB
	gpus     int
	model    string
}

type fgdPod struct {
	name          string
	cpu, mem      int64 // milli-CPU, MiB
	numGPU, milli int64 // milli per GPU
	spec          string
}

func (p fgdPod) gpuMilli() int64 { return p.numGPU * p.milli }

// fgdTrial runs one seed of the protocol with the policy and returns the
// GPU allocation ratio (%) and the number of pods submitted.
func fgdTrial(t testing.TB, policy string, nodes []fgdNode, pods []fgdPod, seed int64, tune float64) (float64, int) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Policy = policy
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	var capMilli int64
	for _, n := range nodes {
		spec := &api.Node{Name: n.name, Labels: map[string]string{"gpu.model": n.model},
			Capacity: resource.List{resource.CPU: n.cpu, resource.Memory: n.mem << 20}}
		for i := 0; i < n.gpus; i++ {
			spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(i), Model: n.model})
		}
		if err := c.UpsertNode(now, spec); err != nil {
			t.Fatal(err)
		}
		capMilli += int64(n.gpus) * 1000
	}
	// Workload: shuffle (pods are in name order), then tune up to the ratio.
	rng := rand.New(rand.NewSource(seed))
	order := append([]fgdPod(nil), pods...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var arrived int64
	for _, p := range order {
		arrived += p.gpuMilli()
	}
	target := tune * float64(capMilli)
	for i := 0; ; i++ {
		p := pods[rng.Intn(len(pods))]
		// The reference tests the per-GPU share against the target (sic).
		if float64(arrived+p.milli) > target {
			break
		}
		p.name = fmt.Sprintf("%s-tuned-%d", p.name, i)
		order = append(order, p)
		arrived += p.gpuMilli()
	}
	prio := api.PriorityHigh
	var arr, got int64
	next := 0.5
	for _, p := range order {
		arr += p.gpuMilli()
		res := resource.List{resource.CPU: p.cpu, resource.Memory: p.mem << 20}
		if g := p.gpuMilli(); g > 0 {
			res["nvidia.com/gpu"] = g
		}
		spec := &api.Task{ID: p.name, Priority: &prio, Resources: res}
		if p.spec != "" {
			spec.NodeSelector = map[string]string{"gpu.model": p.spec}
		}
		if err := c.Submit(now, spec); err != nil {
			t.Fatal(err)
		}
		for _, pl := range c.TakeOutput().Placements {
			for _, d := range pl.Devices {
				got += int64(d.Share)
			}
		}
		if tk, ok := c.Task(p.name); ok && os.Getenv("FGD_DEBUG") != "" && tk.node == nil && arr < capMilli*9/10 {
			t.Logf("unplaced at %.1f%%: %+v (%s)", 100*float64(arr)/float64(capMilli), p, tk.reason)
		}
		if os.Getenv("FGD_DEBUG") != "" && float64(arr) >= next*float64(capMilli) {
			t.Logf("%s arrived %.0f%%: alloc %.2f%%", policy, next*100, 100*float64(got)/float64(capMilli))
			next += 0.1
		}
	}
	var alloc int64
	for _, n := range c.Nodes() {
		for i := range n.devices {
			alloc += int64(n.devices[i].Used)
		}
	}
	if os.Getenv("FGD_DEBUG") != "" {
		var fullFree, partial, partialMilli, lowCPUFree int64
		for _, n := range c.Nodes() {
			nf := int64(0)
			for i := range n.devices {
				f := int64(n.devices[i].Free())
				nf += f
				if f == 1000 {
					fullFree++
				} else if f > 0 {
					partial++
					partialMilli += f
				}
			}
			if n.freeDim(0) < 4000 {
				lowCPUFree += nf
			}
		}
		st := c.Stats()
		t.Logf("%s: fullFree %d partial %d (%d milli) gpuFreeOnCPUFullNodes %d placed %d of %d", policy, fullFree, partial, partialMilli, lowCPUFree, st.Placed, len(order))
	}
	return 100 * float64(alloc) / float64(capMilli), len(order)
}

func meanSD(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	if len(xs) > 1 {
		v /= float64(len(xs) - 1)
	}
	return m, math.Sqrt(v)
}

// synthFGD builds an openb-like cluster and workload: 8-GPU and 2-GPU
// nodes, and pods that are mostly whole GPUs and fractional shares.
func synthFGD(seed int64) ([]fgdNode, []fgdPod) {
	rng := rand.New(rand.NewSource(seed))
	var nodes []fgdNode
	for i := 0; i < 60; i++ {
		n := fgdNode{name: fmt.Sprintf("n%03d", i), cpu: 96000, mem: 393216, gpus: 8, model: "G2"}
		if i%3 == 2 {
			n = fgdNode{name: fmt.Sprintf("n%03d", i), cpu: 104000, mem: 524288, gpus: 2, model: "T4"}
		}
		nodes = append(nodes, n)
	}
	shares := []int64{810, 470, 320, 650, 230, 460}
	var pods []fgdPod
	for i := 0; i < 500; i++ {
		p := fgdPod{name: fmt.Sprintf("p%04d", i), mem: 16384}
		switch r := rng.Intn(100); {
		case r < 45:
			p.cpu, p.numGPU, p.milli = []int64{11300, 3152, 12000}[rng.Intn(3)], 1, 1000
		case r < 85:
			p.cpu, p.numGPU, p.milli = []int64{3152, 8000, 11908}[rng.Intn(3)], 1, shares[rng.Intn(len(shares))]
		case r < 95:
			p.cpu = []int64{12500, 32000}[rng.Intn(2)]
		default:
			p.cpu, p.numGPU, p.milli = 32000, []int64{2, 4, 8}[rng.Intn(3)], 1000
		}
		pods = append(pods, p)
	}
	return nodes, pods
}

// TestFGDPolicyOrdering: on an openb-like synthetic cluster at 130% GPU
// demand, FGD allocates at least as much as best-fit, and best-fit more
// than random (means over shuffles).
func TestFGDPolicyOrdering(t *testing.T) {
	nodes, pods := synthFGD(1)
	mean := map[string]float64{}
	for _, pol := range []string{"random", "best-fit", "gpu-packing", "dot-product", "fgd", "fgd-ref"} {
		var xs []float64
		for seed := int64(42); seed < 46; seed++ {
			a, _ := fgdTrial(t, pol, nodes, pods, seed, 1.3)
			xs = append(xs, a)
		}
		m, sd := meanSD(xs)
		mean[pol] = m
		t.Logf("%-12s %.2f ± %.2f", pol, m, sd)
	}
	if !(mean["fgd"] >= mean["best-fit"] && mean["best-fit"] > mean["random"]) {
		t.Fatalf("want fgd ≥ best-fit > random, got %v", mean)
	}
}

const openbDir = "../../../shared/traces/alibaba-openb-2023"

func readCSV(t *testing.T, path string) []map[string]string {
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("trace not available: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func atoi(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFGDReproductionLocal replays the paper's openb `default` experiment
// (GPU nodes, 130% arrived GPU demand) when the trace is present.
// By default one seed of random and best-fit, each of which must land
// within 2 points of the paper's; FGD_SEEDS sets the number of seeds (the
// paper uses 10, seeds 42..51), FGD_POLICIES the comma-separated policies
// (fgd: about 14 s a seed; it must beat best-fit's number).
func TestFGDReproductionLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := openbDir
	if d := os.Getenv("FGD_TRACE_DIR"); d != "" {
		dir = d
	}
	var nodes []fgdNode
	for _, r := range readCSV(t, dir+"/openb_node_list_gpu_node.csv") {
		nodes = append(nodes, fgdNode{name: r["sn"], cpu: atoi(t, r["cpu_milli"]), mem: atoi(t, r["memory_mib"]),
			gpus: int(atoi(t, r["gpu"])), model: r["model"]})
	}
	var pods []fgdPod
	for _, r := range readCSV(t, dir+"/openb_pod_list_default.csv") {
		pods = append(pods, fgdPod{name: r["name"], cpu: atoi(t, r["cpu_milli"]), mem: atoi(t, r["memory_mib"]),
			numGPU: atoi(t, r["num_gpu"]), milli: atoi(t, r["gpu_milli"]), spec: r["gpu_spec"]})
	}
	seeds := 1
	if s := os.Getenv("FGD_SEEDS"); s != "" {
		seeds = int(atoi(t, s))
	}
	pols := []string{"random", "best-fit"}
	if s := os.Getenv("FGD_POLICIES"); s != "" {
		pols = strings.Split(s, ",")
	}
	paper := map[string]float64{"random": 87.47, "dot-product": 90.85, "gpu-packing": 92.00, "best-fit": 93.08, "fgd": 95.39, "fgd-ref": 95.39}
	for _, pol := range pols {
		var xs []float64
		start := time.Now()
		n := 0
		for s := 0; s < seeds; s++ {
			a, k := fgdTrial(t, pol, nodes, pods, int64(42+s), 1.3)
			xs = append(xs, a)
			n += k
		}
		m, sd := meanSD(xs)
		el := time.Since(start)
		t.Logf("%-12s %6.2f ± %.2f (paper %.2f)  seeds %d  %v/placement  %v", pol, m, sd, paper[pol], seeds,
			el/time.Duration(n), xs)
		switch pol {
		case "random", "best-fit":
			if math.Abs(m-paper[pol]) > 2 {
				t.Errorf("%s: %.2f, more than 2 points from the paper's %.2f", pol, m, paper[pol])
			}
		case "fgd":
			if m < paper["best-fit"] {
				t.Errorf("fgd: %.2f, below the paper's best-fit %.2f", m, paper["best-fit"])
			}
		}
	}
}
