package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/netaddr"
)

// PprofHandler serves net/http/pprof's profiles under /debug/pprof/. It is
// never on the API's handler tree: Run serves it on its own listener
// (Options.PprofListen), off by default.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Sampling rates turned on with the profiling listener: one in
// pprofMutexFraction contended lock events, and goroutine blocking events
// sampled about once per pprofBlockRate nanoseconds blocked.
const (
	pprofMutexFraction = 100
	pprofBlockRate     = 100_000
)

// servePprof serves PprofHandler on addr, which must be a loopback address
// (the profiles show internals and the endpoints cost CPU), until ctx
// ends. It turns on mutex and block profiling. It returns the bound
// address.
func servePprof(ctx context.Context, addr string) (net.Addr, error) {
	if !netaddr.Loopback(addr) {
		return nil, errs.Invalid("pprof", "the profiling listener is served on loopback only; got %q", addr)
	}
	a, err := serveSide(ctx, "pprof", addr, PprofHandler())
	if err == nil {
		runtime.SetMutexProfileFraction(pprofMutexFraction)
		runtime.SetBlockProfileRate(pprofBlockRate)
	}
	return a, err
}

// serveSide serves h on a listener of its own at addr (flag field) until
// ctx ends, and returns the bound address. The API server runs on if it
// fails later: what it serves is best effort.
func serveSide(ctx context.Context, field, addr string, h http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, field, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return ln.Addr(), nil
}
