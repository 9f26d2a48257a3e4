package kubewire

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"sync"
	"time"
)

// coalescingConn is a connection to the API server whose writes are
// gathered: Write copies the bytes into a pending buffer and returns, and
// one flusher at a time writes all that is pending in one system call.
//
// Go's HTTP/2 transport flushes each frame group on its own (a Binding's
// HEADERS, then its DATA, then a watch stream's WINDOW_UPDATE), each one
// TLS record and one write(2), under the connection's write lock: the
// writes of 128 bind workers queue behind each other's system calls. On
// loopback a write also does the receiver's TCP work, so write(2) was a
// tenth of hetsched kube's CPU in bench kube's window. Here, while one
// write is in the kernel the next frames pile up and go out together (a
// Binding's HEADERS and DATA at least); a lone write goes out at once
// (there is no timer and no delay: the flusher starts with the first
// pending byte, after letting the goroutines already runnable add
// theirs). Measured (BENCHMARKS.md, run AD): 3.5 writes per pod became
// 1.8, and side by side 3-9 % less CPU per pod; with the runnable
// goroutines let in first and reads buffered (run AE), 1.0 writes and
// 3.0-3.1 reads per pod instead of 1.7-1.8 and 3.2-3.5, and 4-5 % less
// CPU per pod again.
//
// Obligations kept for the TLS and HTTP/2 layers above:
//   - bytes go out in the order written; each Write's bytes together;
//   - a failed system call fails every later Write and Close with its
//     error (HTTP/2 then drops the connection, as it does on a direct
//     failure);
//   - at most maxPending bytes wait: a Write past it waits until the
//     flusher took them (the kernel's socket buffer did the same);
//   - Close waits up to closeFlushWait for what is pending (TLS writes
//     its close_notify just before) and then closes the connection;
//   - deadlines pass through to the connection: a write deadline bounds
//     the flusher's system call, whose failure then fails later Writes
//     (and drops what was pending with it: TLS's close_notify, written
//     just before it sets a deadline of now, may not go out, and the
//     peer sees the connection close without it).
//
// Reads are buffered: one read(2) takes all the socket holds (up to
// readBuffer bytes), where TLS alone asks for a record at a time, its
// header first. Data read comes before a read's error, and a read
// deadline bounds the system call as before.
type coalescingConn struct {
	net.Conn
	maxPending int
	in         *bufio.Reader

	mu       sync.Mutex
	changed  sync.Cond // the flusher took the pending bytes, failed or stopped
	pending  []byte
	spare    []byte // the last flushed buffer, reused
	flushing bool   // a flusher goroutine runs
	err      error  // sticky: the first write failure, or net.ErrClosed
	waiters  int    // Writes waiting for room
}

const (
	// defaultMaxPending bounds the bytes waiting to be written.
	defaultMaxPending = 1 << 20
	// closeFlushWait bounds how long Close waits for pending bytes.
	closeFlushWait = time.Second
	// keptBuffer is the largest buffer kept for reuse after a flush.
	keptBuffer = 256 << 10
	// readBuffer is the most one read(2) takes from the socket.
	readBuffer = 64 << 10
)

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, maxPending: defaultMaxPending, in: bufio.NewReaderSize(c, readBuffer)}
	cc.changed.L = &cc.mu
	return cc
}

// coalescingDial dials with d and gathers the connection's writes.
func coalescingDial(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return newCoalescingConn(c), nil
	}
}

// Write queues p to be written and returns; see the type's obligations.
func (c *coalescingConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && len(c.pending) > 0 && len(c.pending)+len(p) > c.maxPending {
		c.waiters++
		c.changed.Wait()
		c.waiters--
	}
	if c.err != nil {
		return 0, c.err
	}
	c.pending = append(c.pending, p...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// Read reads what is buffered, or fills the buffer with one read of the
// connection. (One reader at a time, as TLS reads.)
func (c *coalescingConn) Read(p []byte) (int, error) { return c.in.Read(p) }

// waiting is how many Writes wait for room.
func (c *coalescingConn) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters
}

// flush writes what is pending until nothing is, or a write fails. It
// first lets every goroutine already runnable run (the bind workers an
// answer just woke, say): their writes join the first system call. That
// is no timer: with nothing else runnable it goes on at once.
func (c *coalescingConn) flush() {
	runtime.Gosched()
	c.mu.Lock()
	for len(c.pending) > 0 && c.err == nil {
		out := c.pending
		c.pending = c.spare[:0]
		c.spare = nil
		c.changed.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(out)
		c.mu.Lock()
		if err != nil && c.err == nil {
			c.err = err
		}
		if cap(out) <= keptBuffer {
			c.spare = out[:0]
		}
	}
	c.pending = nil
	c.flushing = false
	c.changed.Broadcast()
	c.mu.Unlock()
}

// Close waits, boundedly, for the pending bytes to be written, then closes
// the connection; later Writes fail with net.ErrClosed.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if c.flushing && c.err == nil {
		timedOut := false
		t := time.AfterFunc(closeFlushWait, func() {
			c.mu.Lock()
			timedOut = true
			c.changed.Broadcast()
			c.mu.Unlock()
		})
		for c.flushing && c.err == nil && !timedOut {
			c.changed.Wait()
		}
		t.Stop()
	}
	if c.err == nil {
		c.err = net.ErrClosed
	}
	c.changed.Broadcast()
	c.mu.Unlock()
	// A flusher still in its system call returns when the connection
	// closes.
	return c.Conn.Close()
}
