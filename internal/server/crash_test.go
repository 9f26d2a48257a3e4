package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// startProcess runs `hetsched server` on dir with the nodes file.
func startProcess(t *testing.T, bin, dir, nodes string) *childproc.Child {
	t.Helper()
	c, err := childproc.Start(bin, time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", dir, "--nodes", nodes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKill9LosesNothingAcknowledged submits (and cancels) tasks from 8
// clients, kills the server process with SIGKILL at a random moment,
// restarts it on the same data directory and checks that every
// acknowledged task is there, in its last acknowledged state (cancelled when
// a cancel was acknowledged), exactly once. Five rounds.
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts and kills real server processes")
	}
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte(nodesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var mu sync.Mutex
	acked := map[string]string{} // id -> "submitted" or "cancelled"
	hc := &http.Client{Timeout: 5 * time.Second}
	for round := 0; round < 5; round++ {
		srv := startProcess(t, bin, dir, nodes)
		base := srv.URL
		verify(t, hc, base, acked, round)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					id := fmt.Sprintf("r%d-c%d-%d", round, c, i)
					body := fmt.Sprintf(`{"id":%q,"priority":3,"resources":{"cpu":"10m"}}`, id)
					resp, err := hc.Post(base+"/api/v1/tasks", "application/json", strings.NewReader(body))
					if err != nil {
						return // killed
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 201 {
						continue
					}
					mu.Lock()
					acked[id] = "submitted"
					mu.Unlock()
					if i%4 == 0 {
						req, _ := http.NewRequest("DELETE", base+"/api/v1/tasks/"+id, nil)
						resp, err := hc.Do(req)
						if err != nil {
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == 200 {
							mu.Lock()
							acked[id] = "cancelled"
							mu.Unlock()
						}
					}
				}
			}(c)
		}
		time.Sleep(time.Duration(150+rng.IntN(350)) * time.Millisecond)
		srv.Kill()
		stop()
		wg.Wait()
	}
	srv := startProcess(t, bin, dir, nodes)
	defer func() {
		srv.Signal(os.Interrupt)
		srv.Wait()
	}()
	verify(t, hc, srv.URL, acked, 5)
}

// verify lists every task and checks the acknowledged ones.
func verify(t *testing.T, hc *http.Client, base string, acked map[string]string, round int) {
	t.Helper()
	seen := map[string]string{}
	cursor := ""
	for pages := 0; pages < 10000; pages++ {
		url := base + "/api/v1/tasks?limit=10000"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Tasks []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"tasks"`
			Cursor string `json:"cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			if _, dup := seen[tk.ID]; dup {
				t.Fatalf("round %d: task %s listed twice", round, tk.ID)
			}
			seen[tk.ID] = tk.State
		}
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
	}
	lost, wrong := 0, 0
	for id, want := range acked {
		got, ok := seen[id]
		switch {
		case !ok:
			lost++
			if lost <= 3 {
				t.Errorf("round %d: acknowledged task %s lost", round, id)
			}
		case want == "cancelled" && got != "cancelled":
			wrong++
			if wrong <= 3 {
				t.Errorf("round %d: %s was cancelled (acknowledged) but is %s", round, id, got)
			}
		}
	}
	if lost+wrong > 0 {
		t.Fatalf("round %d: %d lost, %d in the wrong state, of %d acknowledged", round, lost, wrong, len(acked))
	}
	t.Logf("round %d: %d acknowledged, %d stored, all present", round, len(acked), len(seen))
}
