package kubewire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// heldConn is a net.Conn whose writes are recorded and, while held, wait
// until released; it fails them once fail is set.
type heldConn struct {
	net.Conn // nil: only Write and Close are called
	mu       sync.Mutex
	writes   [][]byte
	entered  chan struct{} // a write began
	gate     chan struct{} // receives let held writes through
	hold     bool
	fail     error
	closed   bool
}

func newHeldConn(hold bool) *heldConn {
	return &heldConn{entered: make(chan struct{}, 100), gate: make(chan struct{}), hold: hold}
}

func (h *heldConn) Write(p []byte) (int, error) {
	h.entered <- struct{}{}
	h.mu.Lock()
	hold := h.hold
	h.mu.Unlock()
	if hold {
		<-h.gate
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return 0, h.fail
	}
	h.writes = append(h.writes, bytes.Clone(p))
	return len(p), nil
}

func (h *heldConn) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.gate) // a held write returns
	}
	return nil
}

func (h *heldConn) recorded() (n int, all []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.writes {
		all = append(all, w...)
	}
	return len(h.writes), all
}

// While one system call is in the kernel, later writes wait together and
// go out in one, in order; Close writes what is pending first.
func TestCoalescingConnGathersWritesWhileOneIsOut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the package's shared cluster runs beside
	h := newHeldConn(true)
	c := newCoalescingConn(h)
	mustWrite(t, c, "first ")
	<-h.entered // the flusher is in its write, held
	for i := range 5 {
		mustWrite(t, c, fmt.Sprintf("w%d ", i))
	}
	h.gate <- struct{}{} // the first write goes; the next takes the five
	h.gate <- struct{}{}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	n, all := h.recorded()
	if want := "first w0 w1 w2 w3 w4 "; string(all) != want || n != 2 {
		t.Fatalf("%d writes of %q; want 2 of %q", n, all, want)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a write after Close: %v, want net.ErrClosed", err)
	}
}

// A failed system call fails the writes after it, and Close says so.
func TestCoalescingConnFailureSticks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the package's shared cluster runs beside
	h := newHeldConn(false)
	boom := errors.New("connection reset")
	h.fail = boom
	c := newCoalescingConn(h)
	mustWrite(t, c, "lost")
	<-h.entered
	// Writes queued before the flusher saw the failure are dropped with
	// it; the first after it fails.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		_, err := c.Write([]byte("after"))
		if errors.Is(err, boom) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("a write after the failure: %v, want %v", err, boom)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err) // the connection's own Close: it closed
	}
	if n, _ := h.recorded(); n != 0 {
		t.Fatalf("%d writes recorded; every one failed", n)
	}
}

// Past maxPending, a Write waits until the flusher took the pending bytes.
func TestCoalescingConnBoundsWhatWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the package's shared cluster runs beside
	h := newHeldConn(true)
	c := newCoalescingConn(h)
	c.maxPending = 8
	mustWrite(t, c, "12345678") // taken by the flusher, held in its write
	<-h.entered
	mustWrite(t, c, "abcdefgh") // pending: 8 bytes
	done := make(chan error, 1)
	go func() { _, err := c.Write([]byte("X")); done <- err }()
	for deadline := time.Now().Add(10 * time.Second); c.waiting() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a write past maxPending did not wait")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("a write past maxPending returned (%v) while 8 bytes wait", err)
	default:
	}
	h.gate <- struct{}{} // the first write goes; the flusher takes the 8
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.gate <- struct{}{}
	h.gate <- struct{}{}
	c.Close()
	if _, all := h.recorded(); string(all) != "12345678abcdefghX" {
		t.Fatalf("wrote %q", all)
	}
}

// Over a real socket, with many writers at once, every byte arrives, each
// Write's bytes together and each writer's in its order.
func TestCoalescingConnKeepsOrderOverTCP(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the package's shared cluster runs beside
	ln := listenLoopback(t)
	got := make(chan []byte, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer s.Close()
		b, _ := io.ReadAll(s)
		got <- b
	}()
	d := &net.Dialer{Timeout: 10 * time.Second}
	raw, err := coalescingDial(d)(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 500
	var wg sync.WaitGroup
	var mu sync.Mutex // writers take turns, as HTTP/2's write lock makes them
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				mu.Lock()
				_, err := raw.Write(fmt.Appendf(nil, "<%02d:%04d>", w, i))
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	b := <-got
	next := make([]int, writers)
	for len(b) > 0 {
		var w, i int
		if len(b) < 9 {
			t.Fatalf("torn write at the end: %q", b)
		}
		if _, err := fmt.Sscanf(string(b[:9]), "<%02d:%04d>", &w, &i); err != nil || w >= writers {
			t.Fatalf("torn write at %q: %v", b[:min(len(b), 20)], err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: got its write %d, want %d", w, i, next[w])
		}
		next[w]++
		b = b[9:]
	}
	for w, n := range next {
		if n != each {
			t.Errorf("writer %d: %d of %d writes arrived", w, n, each)
		}
	}
}

// countingConn counts its Reads.
type countingConn struct {
	net.Conn
	mu    sync.Mutex
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// What waits in the socket is taken in one read of the connection, however
// small the reads above it; what came before the peer closed is read
// before the end.
func TestCoalescingConnReadsWhatWaitsAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the package's shared cluster runs beside
	ln := listenLoopback(t)
	const records, size = 20, 100
	sent := make(chan error, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		_, err = s.Write(bytes.Repeat([]byte("0123456789"), records*size/10))
		sent <- err
		s.Close()
	}()
	raw, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingConn{Conn: raw}
	c := newCoalescingConn(counted)
	defer c.Close()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// The peer's bytes and its FIN are in this socket once a read sees
	// them: wait for the first byte through the buffer, then count.
	var got []byte
	p := make([]byte, size/4)
	for {
		n, err := c.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > records*size {
			t.Fatalf("read %d bytes, more than the %d sent", len(got), records*size)
		}
	}
	if want := bytes.Repeat([]byte("0123456789"), records*size/10); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d sent in order", len(got), len(want))
	}
	counted.mu.Lock()
	reads := counted.reads
	counted.mu.Unlock()
	// Read by the quarter record, 80 reads above; below, the bytes as the
	// socket had them (loopback may split a write in two) and the end.
	if reads > 4 {
		t.Errorf("%d reads of the connection for %d small reads above it; want the socket's bytes taken at once", reads, records*4)
	}
}

// listenLoopback listens on a free loopback port until the test ends.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func mustWrite(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("write %q: %d, %v", s, n, err)
	}
}

// GatheringDial's connections gather their writes.
func TestGatheringDialGathers(t *testing.T) {
	ln := listenLoopback(t)
	c, err := GatheringDial(&net.Dialer{Timeout: 5 * time.Second})(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*coalescingConn); !ok {
		t.Fatalf("dialed a %T, want a *coalescingConn", c)
	}
}
