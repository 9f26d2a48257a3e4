package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/store"
)

// bigDisk is a StatFS for in-memory filesystems: plenty of room.
func bigDisk(string) (uint64, uint64, error) { return 1 << 40, 1 << 41, nil }

// TestCrashClonesOpenWithoutFalseAlarm commits from 4 goroutines into an
// in-memory filesystem and takes crash images of it at random moments:
// with only the synced data (a power cut) and with everything written (a
// kill -9). Every image must open, torn tail or not, without a damage
// report, and hold every commit acknowledged before the image was taken.
func TestCrashClonesOpenWithoutFalseAlarm(t *testing.T) {
	mem := vfs.NewCrashableMem()
	d, err := store.OpenDisk("/db", store.DiskOptions{FS: mem, StatFS: bigDisk})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var (
		mu    sync.Mutex
		acked []string
		stop  atomic.Bool
		wg    sync.WaitGroup
		tick  = make(chan struct{}, 1)
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%d-%06d", w, i)
				size := []int{50, 400, 3000, 70 << 10}[rng.IntN(4)]
				if err := d.Commit(context.Background(), []store.Record{{Kind: "task", Key: key, Value: value(key, size)}}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
				select {
				case tick <- struct{}{}:
				default:
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	rng := rand.New(rand.NewPCG(5, 6))
	torn := 0
	for img := range 24 {
		for { // let some commits through between images
			mu.Lock()
			n := len(acked)
			mu.Unlock()
			if n >= (img+1)*40 {
				break
			}
			<-tick
		}
		mu.Lock()
		before := append([]string(nil), acked...)
		mu.Unlock()
		cfg := vfs.CrashCloneCfg{}
		if img%2 == 1 {
			cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rng}
		}
		clone := mem.CrashClone(cfg)
		c, err := store.OpenDisk("/db", store.DiskOptions{FS: clone, StatFS: bigDisk})
		if err != nil {
			t.Fatalf("image %d (unsynced data kept: %d%%): %v", img, cfg.UnsyncedDataPercent, err)
		}
		if c.Recovery().TornTail {
			torn++
		}
		found := loadTasks(t, c)
		for _, k := range before {
			if !found[k] {
				t.Fatalf("image %d: acknowledged %s lost (%d of %d present)", img, k, len(found), len(before))
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := store.Check("/db", store.CheckOptions{FS: clone, SkipTables: true})
		if err != nil || !r.OK() {
			t.Fatalf("image %d: after reopening, check says: %v\n%s", img, err, r)
		}
	}
	t.Logf("24 crash images opened; %d had a torn tail", torn)
}
