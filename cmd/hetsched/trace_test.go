package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/telemetry"
	"github.com/hetsched/hetsched/internal/up"
)

// otlpReceiver is a fake OTLP/HTTP trace collector on loopback: it keeps
// every span it is sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	url   string
}

func startReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "no such route", http.StatusNotFound)
			return
		}
		var body io.Reader = io.LimitReader(r.Body, 16<<20)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rcv.spans = append(rcv.spans, ss.Spans...)
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	rcv.url = "http://" + ln.Addr().String()
	return rcv
}

// byName returns the received spans of one trace by name.
func (r *otlpReceiver) byName(traceID []byte) map[string][]*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]*tracepb.Span{}
	for _, s := range r.spans {
		if bytes.Equal(s.TraceId, traceID) {
			out[s.Name] = append(out[s.Name], s)
		}
	}
	return out
}

// TestTraceFromSubmitToTheTasksCommand: with OTEL_EXPORTER_OTLP_ENDPOINT
// set, `up` exports by OTLP over HTTP (to a fake collector on loopback)
// one trace that starts at the client's traceparent: the server's span of
// the submit call, the submission, the placement and the run; the task's
// real command finds the same trace in TRACEPARENT, under the placement.
func TestTraceFromSubmitToTheTasksCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a task's command")
	}
	rcv := startReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.url)
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_off") // only what the client sampled
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := telemetry.Setup(context.Background(), telemetry.Config{ServiceName: "hetsched-test"})
	if err != nil || !tr.Enabled {
		t.Fatalf("tracing: %v (enabled %v)", err, tr != nil && tr.Enabled)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out childproc.SyncBuffer
	go func() {
		done <- up.Run(ctx, &out, up.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Grace: time.Second, Tracing: tr,
			Shim: []string{exe, "agent-shim"}, ShimEnv: []string{asCLI + "=1"}, Ready: func(u string) { ready <- u }})
	}()
	defer func() { cancel(); <-done }()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("up: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("up not ready in 60s:\n%s", out.String())
	}

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	file := filepath.Join(t.TempDir(), "traceparent")
	body := `{"id":"traced","priority":0,"resources":{"cpu":"100m"},"command":["sh","-c","printf %s \"$TRACEPARENT\" > ` + file + `"]}`
	req, _ := http.NewRequest("POST", base+"/api/v1/tasks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	var got []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got, err = os.ReadFile(file); err == nil && len(got) > 0 || time.Now().After(deadline) {
			break
		}
	}
	parts := strings.Split(string(got), "-")
	if len(parts) != 4 || parts[1] != traceID || parts[3] != "01" {
		t.Fatalf("the command's TRACEPARENT %q is not in trace %s", got, traceID)
	}

	id, _ := hex.DecodeString(traceID)
	want := []string{"POST /api/v1/tasks", "hetsched.submit", "hetsched.task.place", "hetsched.task.run"}
	var spans map[string][]*tracepb.Span
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		spans = rcv.byName(id)
		all := true
		for _, n := range want {
			all = all && len(spans[n]) > 0
		}
		if all || time.Now().After(deadline) {
			break
		}
	}
	for _, n := range want {
		if len(spans[n]) == 0 {
			t.Errorf("no %q span in trace %s; got %v", n, traceID, keys(spans))
		}
	}
	if s := spans["POST /api/v1/tasks"]; len(s) > 0 && hex.EncodeToString(s[0].ParentSpanId) != clientSpan {
		t.Errorf("the server's span's parent is %x, not the client's span", s[0].ParentSpanId)
	}
	if s := spans["hetsched.task.place"]; len(s) > 0 && hex.EncodeToString(s[0].SpanId) != parts[2] {
		t.Errorf("the command's parent span %s is not the placement's %x", parts[2], s[0].SpanId)
	}
}

func keys(m map[string][]*tracepb.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
