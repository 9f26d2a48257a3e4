package core

import (
	"strconv"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// BenchmarkCheckNode: one node check per node of 400, for a 2-GPU request
// on GPU nodes with half their GPUs taken ("gpu") and for a CPU request on
// CPU nodes ("cpu"); ns/node is what every search pays per node it
// visits. "direct" is checkNode (the core's filters called by their types,
// then the policy's); "interface" runs the same filters as one
// []FilterPlugin, the alternative coreFilters' comment weighs.
func BenchmarkCheckNode(b *testing.B) {
	for _, kind := range []string{"gpu", "cpu"} {
		c, t, nodes := checkNodeCluster(b, kind == "gpu")
		o := &t.cls.opts[0]
		sc := c.pl.beginSearch(false, nil)
		perNode := func(b *testing.B) {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(nodes)), "ns/node")
		}
		b.Run(kind+"/direct", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for _, n := range nodes {
					c.pl.checkNode(sc, t, o, n)
				}
			}
			perNode(b)
		})
		b.Run(kind+"/interface", func(b *testing.B) {
			fs := append(c.cf.list(), c.policy.Filters...)
			for i := 0; i < b.N; i++ {
				for _, n := range nodes {
					for _, f := range fs {
						if st := f.Filter(&sc.cs, t, o, n); !st.IsSuccess() {
							break
						}
					}
				}
			}
			perNode(b)
		})
	}
}

// checkNodeCluster is BenchmarkCheckNode's core: 400 nodes of 64 CPUs,
// with 8 GPUs each (half of them taken) when gpus, and the task to check.
func checkNodeCluster(b *testing.B, gpus bool) (*Core, *Task, []*Node) {
	c, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	for i := 0; i < 400; i++ {
		spec := &api.Node{Name: "n" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30}}
		for d := 0; gpus && d < 8; d++ {
			spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(d), Model: "H100",
				Topology: map[string]string{"nvlink": "nv" + strconv.Itoa(d/4)}})
		}
		if err := c.UpsertNode(now, spec); err != nil {
			b.Fatal(err)
		}
	}
	p := 2
	for i := 0; gpus && i < 1600; i++ {
		if err := c.Submit(now, &api.Task{ID: "f" + strconv.Itoa(i), Priority: &p, Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}); err != nil {
			b.Fatal(err)
		}
	}
	c.Tick(now.Add(time.Second))
	probe := &api.Task{ID: "probe", Priority: &p, Resources: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30}}
	if gpus {
		probe.Resources["nvidia.com/gpu"] = 2000
	}
	if err := c.Submit(now.Add(time.Second), probe); err != nil {
		b.Fatal(err)
	}
	t, _ := c.Task("probe")
	return c, t, c.idx.order
}
