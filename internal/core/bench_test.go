package core_test

// Benchmarks of the core's placement paths through its exported API only
// (so that the same file measures any revision of the core side by side):
//
//	BenchmarkScheduleFleet  one dispatch of a mixed backlog on a mixed fleet
//	BenchmarkPlaceChurn     a full cluster: one task ends, a waiting one is placed
//	BenchmarkGang           gang tries that start and gang tries rolled back
//	BenchmarkPreempt        urgent arrivals on a full cluster of tenant work
//
// Run them with -benchtime 2x (each iteration is large); ns/task and
// ns/try are the core's cost per unit of work.

import (
	"strconv"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/benchcore"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

var benchEpoch = time.Unix(1_700_000_000, 0)

func benchCore(b *testing.B, cfg core.Config, nodes []api.Node) *core.Core {
	b.Helper()
	c, err := core.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := range nodes {
		if err := c.UpsertNode(benchEpoch, &nodes[i]); err != nil {
			b.Fatal(err)
		}
	}
	c.TakeOutput()
	return c
}

func prioPtr(p int) *int { return &p }

// BenchmarkScheduleFleet: 50,000 mixed tasks (benchcore's fleet shapes and
// tiers) on 2,000 mixed nodes, placed by one Tick after they were all
// submitted.
func BenchmarkScheduleFleet(b *testing.B) {
	for _, policy := range []string{"least-allocated", "binpack", "round-robin"} {
		b.Run(policy, func(b *testing.B) {
			const tasks = 50_000
			var elapsed time.Duration
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				cfg := core.DefaultConfig()
				cfg.Policy = policy
				for l := 2; l < 4; l++ {
					cfg.Tiers[l].BatchSize = 1 << 20
					cfg.Tiers[l].Window = time.Hour
					cfg.Tiers[l].AgingAfter = 0
				}
				c := benchCore(b, cfg, benchcore.FleetNodes(2000))
				shapes := []api.Task{
					{Resources: resource.List{resource.CPU: 500, resource.Memory: 1 << 30}},
					{Resources: resource.List{resource.CPU: 1000, resource.Memory: 2 << 30}},
					{Resources: resource.List{resource.CPU: 1000, resource.Memory: 4 << 30, "nvidia.com/gpu": 250}},
					{Resources: resource.List{resource.CPU: 2000, resource.Memory: 8 << 30, "nvidia.com/gpu": 1000},
						Alternatives: []api.Alternative{{Resources: resource.List{resource.CPU: 2000, "google.com/tpu": 1000}, Speed: 1.2}}},
				}
				specs := make([]api.Task, tasks)
				for i := range specs {
					specs[i] = shapes[i%len(shapes)]
					specs[i].ID = "t" + strconv.Itoa(i)
					specs[i].Priority = prioPtr(2 + i%2)
				}
				b.StartTimer()
				start := time.Now()
				for i := range specs {
					if err := c.Submit(benchEpoch, &specs[i]); err != nil {
						b.Fatal(err)
					}
				}
				now := benchEpoch
				for {
					now = now.Add(time.Millisecond)
					c.Tick(now)
					if len(c.TakeOutput().Placements) == 0 {
						break
					}
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*tasks), "ns/task")
		})
	}
}

// BenchmarkPlaceChurn: 500 nodes of 16 CPUs full of 1-CPU tasks with
// 20,000 waiting; each cycle one running task finishes and a waiting one
// takes its place.
func BenchmarkPlaceChurn(b *testing.B) {
	const nodes, waiting, cycles = 500, 20_000, 20_000
	var elapsed time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		ns := make([]api.Node, nodes)
		for i := range ns {
			ns[i] = api.Node{Name: "n" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 16000, resource.Memory: 64 << 30}}
		}
		c := benchCore(b, core.DefaultConfig(), ns)
		var running []string
		id := 0
		for i := 0; i < nodes*16+waiting; i++ {
			spec := api.Task{ID: "t" + strconv.Itoa(id), Priority: prioPtr(1), Resources: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30}}
			id++
			if err := c.Submit(benchEpoch, &spec); err != nil {
				b.Fatal(err)
			}
			for _, p := range c.TakeOutput().Placements {
				running = append(running, p.Task)
			}
		}
		now := benchEpoch
		b.StartTimer()
		start := time.Now()
		for k := 0; k < cycles; k++ {
			now = now.Add(time.Microsecond)
			if err := c.TaskFinished(now, running[0], core.Result{}); err != nil {
				b.Fatal(err)
			}
			running = running[1:]
			for _, p := range c.TakeOutput().Placements {
				running = append(running, p.Task)
			}
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*cycles), "ns/task")
}

// BenchmarkGang: 400 GPU nodes (8 GPUs in two NVLink domains, 16 per
// rack), 4 of them in pool "small". Gangs of 8 members arrive one after
// another: every even one asks a GPU per member and starts; every odd one
// asks 8 GPUs per member in pool "small" (minMember 8): its try places 4
// members and is rolled back, and then it is cancelled. Started gangs
// finish once 1,600 members run.
func BenchmarkGang(b *testing.B) {
	const nodes, gangs, members = 400, 1000, 8
	var elapsed time.Duration
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		ns := make([]api.Node, nodes)
		for i := range ns {
			pool := "big"
			if i%100 == 0 {
				pool = "small"
			}
			ns[i] = api.Node{Name: "g" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30},
				Labels: map[string]string{"rack": "r" + strconv.Itoa(i/16), "pool": pool}}
			for d := 0; d < 8; d++ {
				ns[i].Devices = append(ns[i].Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(d), Model: "H100",
					Topology: map[string]string{"nvlink": "nv" + strconv.Itoa(d/4)}})
			}
		}
		c := benchCore(b, core.DefaultConfig(), ns)
		b.StartTimer()
		start := time.Now()
		now := benchEpoch
		var placed []string
		for g := 0; g < gangs; g++ {
			now = now.Add(time.Millisecond)
			jid := "j" + strconv.Itoa(g)
			ids := make([]string, members)
			for m := range ids {
				ids[m] = jid + "-" + strconv.Itoa(m)
			}
			if err := c.AddJob(now, core.JobSpec{ID: jid, Gang: &core.GangSpec{Members: ids, MinMember: members}}); err != nil {
				b.Fatal(err)
			}
			for _, id := range ids {
				spec := api.Task{ID: id, Priority: prioPtr(2), Resources: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30, "nvidia.com/gpu": 1000}}
				if g%2 == 1 {
					spec.Resources["nvidia.com/gpu"] = 8000
					spec.NodeSelector = map[string]string{"pool": "small"}
				}
				if err := c.SubmitJobTask(now, jid, &spec); err != nil {
					b.Fatal(err)
				}
			}
			c.Tick(now.Add(20 * time.Millisecond))
			out := c.TakeOutput()
			for _, p := range out.Placements {
				placed = append(placed, p.Task)
			}
			if g%2 == 1 {
				if len(out.Placements) != 0 {
					b.Fatalf("gang %s placed %d members", jid, len(out.Placements))
				}
				for _, id := range ids {
					if t, _ := c.Task(id); t.State().Terminal() {
						continue // failed with the first cancelled member
					}
					if err := c.Cancel(now, id, ""); err != nil {
						b.Fatal(err)
					}
				}
			}
			for len(placed) > 1600 {
				if err := c.TaskFinished(now, placed[0], core.Result{}); err != nil {
					b.Fatal(err)
				}
				placed = placed[1:]
			}
			c.TakeOutput()
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*gangs), "ns/gang")
}

// BenchmarkPreempt: benchcore's urgent arrivals on a full 2,000-node fleet
// of four tenants' work (priority preemption and reclaim), and the same
// with no queues.
func BenchmarkPreempt(b *testing.B) {
	for _, tenants := range []int{4, 0} {
		b.Run("tenants="+strconv.Itoa(tenants), func(b *testing.B) {
			var p50, p99 int64
			for n := 0; n < b.N; n++ {
				r, err := benchcore.Preempt(benchcore.Options{Policy: "least-allocated"}, 2000, 300, tenants)
				if err != nil {
					b.Fatal(err)
				}
				if r.Placed != r.Arrivals {
					b.Fatalf("%d of %d arrivals placed", r.Placed, r.Arrivals)
				}
				p50 += r.P50Ns
				p99 += r.P99Ns
			}
			b.ReportMetric(float64(p50)/float64(b.N), "p50-ns/arrival")
			b.ReportMetric(float64(p99)/float64(b.N), "p99-ns/arrival")
		})
	}
}
