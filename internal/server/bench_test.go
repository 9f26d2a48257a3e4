package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBatchSubmit posts batches of 1,000 tasks to POST /api/v1/tasks
// on a real server over loopback and reports durable tasks/s (each 201
// means the batch is committed to disk). Bodies are built before the timer
// starts, so the figure is the server's, not the client's JSON writing.
func BenchmarkBatchSubmit(b *testing.B) {
	for _, clients := range []int{4, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchBatchSubmit(b, clients) })
	}
}

func benchBatchSubmit(b *testing.B, clients int) {
	t := &testing.T{}
	s := start(t, b.TempDir())
	defer s.stop(t)
	const batch = 1000
	bodies := make(chan []byte, b.N)
	for i := 0; i < b.N; i++ {
		var buf bytes.Buffer
		buf.WriteString(`{"tasks":[`)
		for k := 0; k < batch; k++ {
			if k > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"id":"b%d-%d","priority":3,"resources":{"cpu":"10m","memory":"16Mi"}}`, i, k)
		}
		buf.WriteString(`]}`)
		bodies <- buf.Bytes()
	}
	close(bodies)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range bodies {
				resp, err := hc.Post(s.base+"/api/v1/tasks", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
				done.Add(batch)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(done.Load())/el.Seconds(), "tasks/s")
}
