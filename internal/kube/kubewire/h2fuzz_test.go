package kubewire

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzH2BinderReadsAnyAnswer (issue 42 §2): whatever frames a server
// answers a Binding with (the input read as frames: type, flags, a stream
// id, a payload), the binder's reader neither panics nor hangs: the bind
// returns (answered, failed, or at its deadline) and the connection's
// goroutines end when it is closed. x/net's framer parses the bytes; this
// fuzzes what the binder does with the frames it is handed. The server is
// an in-memory pipe speaking HTTP/2 without TLS, and a bind's deadline is
// 100 ms, so that the fuzzer runs hundreds of inputs a second.
func FuzzH2BinderReadsAnyAnswer(f *testing.F) {
	frame := func(typ http2.FrameType, flags http2.Flags, id uint16, payload []byte) []byte {
		b := []byte{byte(typ), byte(flags), 0, 0, 0, 0}
		binary.BigEndian.PutUint16(b[2:], id)
		binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
		return append(b, payload...)
	}
	// 201 on stream 1 (":status: 201" as an indexed field), a GOAWAY, a
	// PING, a WINDOW_UPDATE of 0, a RST_STREAM, DATA on a stream never
	// opened, a HEADERS without END_HEADERS, and nothing.
	f.Add(frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersEndStream, 1, []byte{0x89}))
	f.Add(frame(http2.FrameGoAway, 0, 0, []byte{0, 0, 0, 0, 0, 0, 0, 0}))
	f.Add(frame(http2.FramePing, 0, 0, []byte("12345678")))
	f.Add(frame(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 0}))
	f.Add(frame(http2.FrameRSTStream, 0, 1, []byte{0, 0, 0, 7}))
	f.Add(frame(http2.FrameData, http2.FlagDataEndStream, 9, []byte("x")))
	f.Add(frame(http2.FrameHeaders, 0, 1, []byte{0x88}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 1<<16 {
			return
		}
		var servers sync.WaitGroup
		b := &h2Binder{
			target: "pipe", authority: "pipe", prefix: "/api/v1", userAgent: "fuzz",
			creds: &h2Credentials{static: "Bearer t"}, plaintext: true, now: time.Now,
			stallAfter: 50 * time.Millisecond, pingWait: 50 * time.Millisecond,
			dial: func(context.Context, string, string) (net.Conn, error) {
				c, s := net.Pipe()
				servers.Go(func() { servePipe(s, raw) })
				return c, nil
			},
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.bind(ctx, "ns", "p", []byte("body"))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the bind did not return after its deadline")
		}
		closed := make(chan struct{})
		go func() {
			b.close() // waits for the connections' readers
			servers.Wait()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the binder's connections did not end when it was closed")
		}
	})
}

// servePipe is the fuzz's server on an in-memory pipe: it reads the
// client's preface, sends its SETTINGS, and answers the first HEADERS
// with raw, read as frames (type, flags, a 16-bit stream id, a 16-bit
// length, the payload), while it keeps reading until the pipe closes.
func servePipe(c net.Conn, raw []byte) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	// Every write beside the reads: a pipe's write waits for its reader,
	// and the client writes its SETTINGS before it reads the server's.
	var writing sync.WaitGroup
	defer writing.Wait()
	writing.Go(func() { fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100}) })
	answered := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if _, ok := f.(*http2.MetaHeadersFrame); !ok || answered {
			continue
		}
		answered = true
		writing.Go(func() {
			for b := raw; len(b) >= 6; {
				n := min(int(binary.BigEndian.Uint16(b[4:6])), len(b)-6)
				if fr.WriteRawFrame(http2.FrameType(b[0]), http2.Flags(b[1]), uint32(binary.BigEndian.Uint16(b[2:4])), b[6:6+n]) != nil {
					return
				}
				b = b[6+n:]
			}
		})
	}
}
