package kube

import (
	"context"
	"sync"
	"testing"
)

// TestLatestWritesTheLatestOneAtATime: values set while a key's write
// runs replace each other; the writer then writes the last of them, and
// never two writes of a key at once; another key has its own writer.
func TestLatestWritesTheLatestOneAtATime(t *testing.T) {
	var l latest[int]
	var bg sync.WaitGroup
	ctx := context.Background()
	entered, release := make(chan int), make(chan struct{})
	var mu sync.Mutex
	got := map[string][]int{}
	running := map[string]int{}
	write := func(_ context.Context, key string, v int) {
		mu.Lock()
		running[key]++
		if running[key] > 1 {
			t.Errorf("two writes of %s at once", key)
		}
		mu.Unlock()
		if key == "a" && v == 1 {
			entered <- v
			<-release // the first write of a blocks while more values come
		}
		mu.Lock()
		running[key]--
		got[key] = append(got[key], v)
		mu.Unlock()
	}
	l.set(ctx, &bg, "a", 1, write)
	<-entered
	for v := 2; v <= 5; v++ {
		l.set(ctx, &bg, "a", v, write)
	}
	l.set(ctx, &bg, "b", 7, write)
	close(release)
	bg.Wait()
	if a := got["a"]; len(a) != 2 || a[0] != 1 || a[1] != 5 {
		t.Errorf("writes of a: %v, want [1 5] (2..4 replaced while 1 was written)", a)
	}
	if b := got["b"]; len(b) != 1 || b[0] != 7 {
		t.Errorf("writes of b: %v, want [7]", b)
	}
	if len(l.busy) != 0 || len(l.want) != 0 {
		t.Errorf("after the writers ended: busy %v, want %v", l.busy, l.want)
	}
}
