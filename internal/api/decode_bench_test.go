package api

import (
	"testing"

	"github.com/hetsched/hetsched/internal/jsonread"
)

// BenchmarkDecodeTask decodes the tasks the API sees (DecodeTask, without
// Validate): a batch submission's small lease, and a task with every
// nested object (alternatives, locality, inputs' shape, a checkpoint).
func BenchmarkDecodeTask(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"lease", `{"id":"lg1-2-3","priority":3,"resources":{"cpu":"10m","memory":"16Mi"},"lease":"5m0s"}`},
		{"nested", `{"id":"train-1","name":"resnet","queue":"team-a","priority":1,"resources":{"cpu":"4","memory":"16Gi","nvidia.com/gpu":2},` +
			`"alternatives":[{"resources":{"cpu":"2","google.com/tpu":1},"speed":1.4},{"resources":{"cpu":"8"},"speed":0.2,"deviceClasses":{"google.com/tpu":"v5e"}}],` +
			`"command":["python3","train.py","--epochs","3"],"env":{"EPOCHS":"3","DATA":"/d"},"timeout":"30m","depends":["prep"],` +
			`"locality":{"nodes":["n1","n2"],"labels":{"rack":"r1"}},"localityWait":"3s","metadata":{"team":"vision"},` +
			`"checkpoint":{"signal":"SIGUSR1","grace":"1m","dir":"run/1"}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeTask(jsonread.New([]byte(c.body))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
