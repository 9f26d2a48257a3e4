package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/store"
)

// BenchmarkCommit measures durable commits (fsync) of 400-byte records:
// records per second with 1 and with 16 concurrent committers, in commits
// of 1 and of 1,000 records. Group commit shows as the 16-writer rows
// beating the 1-writer rows.
func BenchmarkCommit(b *testing.B) {
	val := make([]byte, 400)
	for _, batch := range []int{1, 1000} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("batch=%d/writers=%d", batch, writers), func(b *testing.B) {
				s, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var next atomic.Int64
				var records atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for w := 0; w < writers; w++ {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						recs := make([]store.Record, batch)
						for next.Add(1) <= int64(b.N) {
							for i := range recs {
								recs[i] = store.Record{Kind: "task", Key: fmt.Sprintf("w%d-%d-%d", w, records.Load(), i), Value: val}
							}
							if err := s.Commit(context.Background(), recs); err != nil {
								b.Error(err)
								return
							}
							records.Add(int64(batch))
						}
					}(w)
				}
				wg.Wait()
				el := time.Since(start)
				b.ReportMetric(float64(records.Load())/el.Seconds(), "records/s")
				b.ReportMetric(float64(b.N)/el.Seconds(), "commits/s")
			})
		}
	}
}
