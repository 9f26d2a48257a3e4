package kube

import (
	"fmt"
	"sync"
	"testing"
)

// TestDirtySetLosesNoKeyWhileTaken: keys marked while the reconcile loop
// takes (and a burst's map is replaced) all come out of some take, and
// only once each.
func TestDirtySetLosesNoKeyWhileTaken(t *testing.T) {
	d := newDirtySet()
	const writers, each = 4, 5000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				d.addPodKey(fmt.Sprintf("ns/p-%d-%d", w, i))
			}
		})
	}
	seen := map[string]int{}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-d.notify:
		}
		pods, _, _, _ := d.take()
		for _, k := range pods {
			seen[k]++
		}
	}
	if len(seen) != writers*each {
		t.Fatalf("%d keys taken, want %d", len(seen), writers*each)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s taken %d times", k, n)
		}
	}
	d.addPodKey("ns/late")
	if pods, _, _, _ := d.take(); len(pods) != 1 || pods[0] != "ns/late" {
		t.Fatalf("after the burst, take returned %v", pods)
	}
}
