package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/autoscale"
	"github.com/hetsched/hetsched/internal/resource"
)

// passFleet is 10,000 autoscaled services of 10 replicas each (100,000
// replicas, issue 44 §5), their replicas and their CPU samples.
func passFleet(b *testing.B) ([]*Controller, [][]Replica, [][][]autoscale.Sample) {
	const services, per = 10_000, 10
	cs := make([]*Controller, services)
	live := make([][]Replica, services)
	samples := make([][][]autoscale.Sample, services)
	for i := range services {
		svc := api.Service{Name: fmt.Sprint("svc-", i), Replicas: per, Template: api.ServiceTemplate{Command: []string{"./serve"}, Resources: resource.List{"cpu": 1000},
			Readiness: &api.Probe{TCP: &api.TCPProbe{Port: 8080}},
		}, Autoscale: &api.Autoscale{Min: 2, Max: 40, Metrics: []api.AutoscaleMetric{{Resource: "cpu", Target: "70%"}}}}
		c, err := New(svc)
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
		use := 0.2 + float64(i%10)*0.1 // 20 % to 110 %: some scale up, some down, some stay
		ss := make([]autoscale.Sample, per)
		for k := range per {
			live[i] = append(live[i], Replica{ID: fmt.Sprint(svc.Name, "-", k), Revision: c.revision, Running: true, Started: true, Ready: true, Address: "10.0.0.1"})
			ss[k] = autoscale.Sample{Ready: true, Value: use, Request: 1}
		}
		samples[i] = [][]autoscale.Sample{ss}
	}
	return cs, live, samples
}

// BenchmarkAutoscalePass is one controller pass over 10,000 services and
// 100,000 replicas: every service's autoscaler, replica plan, endpoints
// and status. The floor, BenchmarkAutoscalePassFloor, only sums the
// samples the pass reads.
func BenchmarkAutoscalePass(b *testing.B) {
	cs, live, samples := passFleet(b)
	now := t0
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(15 * time.Second)
		for i, c := range cs {
			c.Step(now, live[i], samples[i])
		}
	}
}

func BenchmarkAutoscalePassFloor(b *testing.B) {
	_, live, samples := passFleet(b)
	b.ResetTimer()
	var sink float64
	for b.Loop() {
		for i := range live {
			for _, s := range samples[i][0] {
				sink += s.Value / s.Request
			}
		}
	}
	_ = sink
}
