package store_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/store/storetest"
)

func openDisk(t *testing.T, dir string) store.Store {
	t.Helper()
	s, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDiskContract(t *testing.T) { storetest.Run(t, openDisk) }

func TestOpenDiskNeedsDir(t *testing.T) {
	if _, err := store.OpenDisk("", store.DiskOptions{}); err == nil {
		t.Fatal("OpenDisk(\"\") succeeded")
	}
	f := t.TempDir() + "/file"
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenDisk(f, store.DiskOptions{}); err == nil {
		t.Fatal("OpenDisk on a regular file succeeded")
	}
}

// childEnv makes the test binary act as a writer process (see TestMain).
const childEnv = "HETSCHED_STORE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		crashChild(dir)
		return
	}
	if dir := os.Getenv(fillChildEnv); dir != "" {
		fillChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild commits records from 8 goroutines until it is killed, and
// prints "ack KEY" for each commit that returned nil.
func crashChild(dir string) {
	s, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	run := os.Getenv("HETSCHED_STORE_CRASH_RUN")
	var mu sync.Mutex
	out := os.Stdout
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				var recs []store.Record
				n := 1 + i%5
				for j := 0; j < n; j++ {
					key := fmt.Sprintf("r%s-w%d-%d-%d", run, w, i, j)
					recs = append(recs, store.Record{Kind: "task", Key: key, Value: []byte("v-" + key)})
				}
				if err := s.Commit(context.Background(), recs); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				mu.Lock()
				for _, r := range recs {
					fmt.Fprintf(out, "ack %s\n", r.Key)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
}

// TestCrashLosesNothingAcknowledged kills a writer process with SIGKILL at
// random moments, five times over the same directory, and checks after
// each restart that every acknowledged record is there with its value.
func TestCrashLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the crash test starts and kills real processes")
	}
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked := map[string]bool{}
	for run := 0; run < 5; run++ {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir, fmt.Sprintf("HETSCHED_STORE_CRASH_RUN=%d", run))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Let it write for a while (at least until the first ack), then kill.
		first := <-lines
		deadline := time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		runAcks := 0
		record := func(l string) {
			if k, ok := strings.CutPrefix(l, "ack "); ok {
				acked[k] = true
				runAcks++
			}
		}
		record(first)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("writer exited early: %s", stderr.String())
				}
				record(l)
			case <-deadline:
				break wait
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		for l := range lines { // acks already in the pipe count too
			record(l)
		}
		cmd.Wait()
		if runAcks == 0 {
			t.Fatalf("run %d: no commit acknowledged", run)
		}
		if r, err := store.Check(dir, store.CheckOptions{SkipTables: true}); err != nil || !r.Opens {
			t.Fatalf("run %d: a store after kill -9 must open without repair: %v\n%s", run, err, r)
		}
		s := openDisk(t, dir)
		found := map[string]bool{}
		if err := s.Load(context.Background(), "task", func(k string, v []byte) error {
			if string(v) != "v-"+k {
				t.Errorf("run %d: %s has value %q", run, k, v)
			}
			found[k] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		lost := 0
		for k := range acked {
			if !found[k] {
				lost++
				if lost < 5 {
					t.Errorf("run %d: acknowledged record %s lost", run, k)
				}
			}
		}
		if lost > 0 {
			t.Fatalf("run %d: %d of %d acknowledged records lost", run, lost, len(acked))
		}
		t.Logf("run %d: killed after %d acks; %d acknowledged so far, %d records on disk", run, runAcks, len(acked), len(found))
	}
}
