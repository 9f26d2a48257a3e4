package kubewire

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/net/http2"
)

// The h2Binder's connection as read: one goroutine (readLoop) reads the
// server's frames, ends the streams with their answers and keeps the
// connection as HTTP/2 requires (h2bind.go states the obligations).

// finish ends a stream with err (nil: its answer is complete).
func (c *h2Conn) finish(id uint32, err error) {
	c.mu.Lock()
	st := c.streams[id]
	if st != nil {
		delete(c.streams, id)
		c.cond.Broadcast()
	}
	drained := c.goAway != 0 && len(c.streams) == 0
	c.mu.Unlock()
	if st != nil {
		st.err = err
		close(st.done)
	}
	if drained {
		c.close(errH2Unsent)
	}
}

// stream is the open stream id, or nil.
func (c *h2Conn) stream(id uint32) *h2Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// readLoop reads the server's frames until the connection fails.
func (c *h2Conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		var se http2.StreamError
		if errors.As(err, &se) {
			// One stream's answer is malformed: that stream ends.
			c.write(func() error { return c.fr.WriteRSTStream(se.StreamID, se.Code) })
			c.finish(se.StreamID, fmt.Errorf("%w: %v", errH2Lost, err))
			continue
		}
		if err != nil {
			c.mu.Lock()
			unexpected := c.err == nil // not closed by the binder
			c.mu.Unlock()
			if unexpected {
				c.b.event("lost")
			}
			c.close(fmt.Errorf("%w: %v", errH2Lost, err))
			return
		}
		c.lastRead.Store(c.b.now().UnixNano())
		if err := c.handle(f); err != nil {
			c.write(func() error { return c.fr.WriteGoAway(0, http2.ErrCodeProtocol, nil) })
			c.close(fmt.Errorf("%w: %v", errH2Lost, err))
			return
		}
	}
}

// handle acts on one frame of the server's.
func (c *h2Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		st := c.stream(f.StreamID)
		if st == nil {
			return nil // given up (reset) meanwhile
		}
		if st.status == 0 {
			code, err := strconv.Atoi(f.PseudoValue("status"))
			if err != nil || code < 100 || code > 999 {
				c.finish(f.StreamID, fmt.Errorf("%w: bad :status %q", errH2Lost, f.PseudoValue("status")))
				return nil
			}
			if code < 200 {
				return nil // informational: the answer follows
			}
			st.status = code
		}
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
	case *http2.DataFrame:
		c.received(int64(f.Length))
		st := c.stream(f.StreamID)
		if st == nil {
			return nil
		}
		if room := h2MaxBody - len(st.body); room > 0 {
			d := f.Data()
			st.body = append(st.body, d[:min(len(d), room)]...)
		}
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
	case *http2.RSTStreamFrame:
		err := fmt.Errorf("%w: stream reset (%v)", errH2Lost, f.ErrCode)
		if f.ErrCode == http2.ErrCodeRefusedStream {
			err = errH2Unsent
		}
		c.finish(f.StreamID, err)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.settings(f); err != nil {
			return err
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			c.write(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.GoAwayFrame:
		c.b.event("goaway")
		c.goingAway(f.LastStreamID)
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.mu.Lock()
			c.sendWin += int64(f.Increment)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		// A stream's window: a body is sent whole within a new stream's.
	}
	return nil
}

// received counts n bytes of DATA against the connection's receive
// window and tops it up when half of it is used.
func (c *h2Conn) received(n int64) {
	c.mu.Lock()
	c.recvUnacked += n
	top := c.recvUnacked
	if top < h2ConnWindow/2 {
		c.mu.Unlock()
		return
	}
	c.recvUnacked = 0
	c.mu.Unlock()
	c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(top)) })
}

// settings applies the server's SETTINGS and acknowledges them.
func (c *h2Conn) settings(f *http2.SettingsFrame) error {
	var tableSize *uint32
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		// The framer checks a SETTINGS frame's shape, not its values (a
		// frame size under 16 KiB, a window over 2^31-1).
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = int(min(s.Val, 1<<20))
		case http2.SettingInitialWindowSize:
			// Open streams' windows move by the difference; bodies are sent
			// whole, so only new streams' matter.
			c.peerStreamWin = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		case http2.SettingHeaderTableSize:
			v := s.Val
			tableSize = &v
		}
		return nil
	})
	c.cond.Broadcast()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.write(func() error {
		if tableSize != nil {
			c.henc.SetMaxDynamicTableSize(min(*tableSize, 4096))
		}
		return c.fr.WriteSettingsAck()
	})
	return nil
}

// goingAway: streams above last were never processed (they go again on
// a new connection); the rest are answered, and then the connection ends.
func (c *h2Conn) goingAway(last uint32) {
	c.mu.Lock()
	c.goAway = last + 1
	var unsent []uint32
	for id := range c.streams {
		if id > last {
			unsent = append(unsent, id)
		}
	}
	c.cond.Broadcast()
	idle := len(c.streams) == 0 // else the last stream's finish closes it
	c.mu.Unlock()
	for _, id := range unsent {
		c.finish(id, errH2Unsent)
	}
	if idle {
		c.close(errH2Unsent)
	}
}
