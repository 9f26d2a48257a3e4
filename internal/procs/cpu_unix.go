//go:build unix

package procs

import (
	"syscall"
	"time"
)

// ProcessCPU is this process's user+system CPU so far; ok is false where
// the system does not say.
func ProcessCPU() (cpu time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
