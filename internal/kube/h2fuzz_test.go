package kube

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// FuzzH2BinderReadsAnyAnswer (issue 42 §2): whatever frames a server
// answers a Binding with (the input read as frames: type, flags, a stream
// id, a payload), the binder's reader neither panics nor hangs: the bind
// returns (answered, failed, or at its deadline) and the connection's
// goroutines end when it is closed. x/net's framer parses the bytes; this
// fuzzes what the binder does with the frames it is handed.
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
		checkLeaksAtCleanup(t)
		_, cfg := newFakeH2(t, func(_ int, fr http2.Frame, w *fakeH2Writer) {
			if _, ok := fr.(*http2.MetaHeadersFrame); !ok {
				return
			}
			for b := raw; len(b) >= 6; {
				n := min(int(binary.BigEndian.Uint16(b[4:6])), len(b)-6)
				if w.fr.WriteRawFrame(http2.FrameType(b[0]), http2.Flags(b[1]), uint32(binary.BigEndian.Uint16(b[2:4])), b[6:6+n]) != nil {
					return
				}
				b = b[6+n:]
			}
		})
		p := h2TestPoster(t, cfg)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.h2.bind(ctx, "ns", "p", []byte("body"))
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the bind did not return after its deadline")
		}
	})
}
