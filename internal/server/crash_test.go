package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildBinary builds cmd/hetsched into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the server for this test: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "hetsched")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/hetsched/hetsched/cmd/hetsched").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs `hetsched server` and returns its base URL.
func startProcess(t *testing.T, bin, dir, nodes string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "server", "--listen", "127.0.0.1:0", "--data-dir", dir, "--nodes", nodes)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			cmd.Wait()
			t.Fatalf("server exited: %s", stderr.String())
		}
		_, rest, found := strings.Cut(l, "http://")
		if !found {
			t.Fatalf("unexpected first line %q", l)
		}
		addr, _, _ := strings.Cut(rest, " ")
		return cmd, "http://" + addr
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("server did not start: %s", stderr.String())
	}
	return nil, ""
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
	bin := buildBinary(t)
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
		cmd, base := startProcess(t, bin, dir, nodes)
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
		cmd.Process.Kill()
		cmd.Wait()
		stop()
		wg.Wait()
	}
	cmd, base := startProcess(t, bin, dir, nodes)
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	verify(t, hc, base, acked, 5)
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
