package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// cpuProfileSignals are the signals that start and stop a windowed CPU
// profile (--cpu-profile-window): hetsched-bench kube sends the first when
// its pods are created and the second once they are all bound, so that the
// profile covers what the benchmark measures and nothing of the start, the
// lists or the pods' removal.
var cpuProfileSignals = [2]os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}

// windowedCPUProfile profiles into path between a SIGUSR1 and the next
// SIGUSR2 (one window; later signals are ignored) until ctx ends. The
// returned stop ends the watch and, where the window is still open,
// writes the profile; it returns what went wrong, if anything did.
// changed, when not nil, is called from the watch each time the profile
// starts (true) or stops (false).
// Signals are caught from the call on, so a signal sent after it can
// never end the process.
func windowedCPUProfile(ctx context.Context, path string, warn io.Writer, changed func(running bool)) (stop func() error) {
	f, err := os.Create(path)
	if err != nil {
		return func() error { return fmt.Errorf("--cpu-profile: %w", err) }
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, cpuProfileSignals[:]...)
	ctx, cancel := context.WithCancel(ctx)
	var running, closed bool
	var failed error
	// end stops the profile and closes the file; only one goroutine runs
	// it at a time (the watch below, then stop once the watch is over).
	end := func() {
		if running {
			pprof.StopCPUProfile()
			running = false
			if changed != nil {
				changed(false)
			}
		}
		if !closed {
			closed = true
			if err := f.Close(); err != nil && failed == nil {
				failed = fmt.Errorf("--cpu-profile: %w", err)
			}
		}
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				switch {
				case closed:
				case s == cpuProfileSignals[0] && !running:
					if err := pprof.StartCPUProfile(f); err != nil {
						failed = fmt.Errorf("--cpu-profile: %w", err)
						fmt.Fprintln(warn, "hetsched kube:", failed)
					} else {
						running = true
						if changed != nil {
							changed(true)
						}
					}
				case s == cpuProfileSignals[1] && running:
					end()
				}
			}
		}
	}()
	return func() error {
		cancel()
		<-finished
		signal.Stop(sig)
		end()
		return failed
	}
}
