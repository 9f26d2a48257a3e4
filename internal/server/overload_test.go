package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOverloadShedsLowTierFirst: with 40 submissions allowed in flight,
// low-tier requests that wait for a placement that cannot come fill half
// of it and the rest of them are refused with 429 and Retry-After; urgent
// requests arriving meanwhile are all admitted and placed at once.
func TestOverloadShedsLowTierFirst(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir(), MaxInFlight: 40})
	defer s.stop(t)
	post := func(body string, wait string) (int, http.Header, []byte, time.Duration) {
		start := time.Now()
		resp, err := client.Post(s.base+"/api/v1/schedule?wait="+wait, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, nil, nil, 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, b, time.Since(start)
	}
	// 60 low-tier requests for a task no node can hold, each waiting 4 s.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	retryAfter := 0
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h, _, _ := post(fmt.Sprintf(`{"id":"low%d","priority":3,"resources":{"cpu":"1000"}}`, i), "4s")
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			if code == http.StatusTooManyRequests && h.Get("Retry-After") != "" {
				retryAfter++
			}
		}()
	}
	// Let the low tier saturate its share, then send urgent work.
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		shed := codes[http.StatusTooManyRequests]
		mu.Unlock()
		if shed >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	type placed struct {
		State     string    `json:"state"`
		Submitted time.Time `json:"submitted"`
		Scheduled time.Time `json:"scheduled"`
	}
	var uwg sync.WaitGroup
	for i := 0; i < 10; i++ {
		uwg.Add(1)
		go func() {
			defer uwg.Done()
			code, _, b, took := post(fmt.Sprintf(`{"id":"urgent%d","priority":0,"resources":{"cpu":"100m"}}`, i), "2s")
			var p placed
			json.Unmarshal(b, &p)
			if code != http.StatusOK || p.State != "scheduled" {
				t.Errorf("urgent%d: %d %s", i, code, b)
				return
			}
			if d := p.Scheduled.Sub(p.Submitted); d > 5*time.Millisecond {
				t.Errorf("urgent%d: scheduled %v after it was submitted", i, d)
			}
			if took > 2*time.Second {
				t.Errorf("urgent%d: answered in %v", i, took)
			}
		}()
	}
	uwg.Wait()
	wg.Wait()
	// Half of 40 in flight for the low tier: 20 admitted (202 when their
	// wait ran out, still pending), 40 shed.
	if codes[http.StatusAccepted] != 20 || codes[http.StatusTooManyRequests] != 40 || retryAfter != 40 {
		t.Errorf("low tier: %v, %d with Retry-After; want 20×202, 40×429", codes, retryAfter)
	}
	var text string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		text = string(scrape(t, s.base))
		if strings.Contains(text, `hetsched_submissions_shed_total{tier="low"} 40`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(text, `hetsched_submissions_shed_total{tier="low"} 40`) || !strings.Contains(text, `hetsched_submissions_shed_total{tier="urgent"} 0`) {
		t.Errorf("shed metrics:\n%s", grepLines(text, "shed"))
	}
	// Once the waits are over, nothing holds a place: a low-tier request
	// is admitted again.
	if code, _, b, _ := post(`{"id":"again","priority":3,"resources":{"cpu":"100m"}}`, "2s"); code != http.StatusOK {
		t.Errorf("after the overload: %d %s", code, b)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestScheduleOverH2C: the server speaks HTTP/2 without TLS (prior
// knowledge) as well as HTTP/1.1; a schedule request over h2c is placed.
func TestScheduleOverH2C(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir()})
	defer s.stop(t)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := hc.Post(s.base+"/api/v1/schedule", "application/json", strings.NewReader(`{"priority":0,"resources":{"cpu":"1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !strings.Contains(string(b), `"scheduled"`) {
		t.Fatalf("%s %d %s", resp.Proto, resp.StatusCode, b)
	}
}
