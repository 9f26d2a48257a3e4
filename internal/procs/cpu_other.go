//go:build !unix

package procs

import "time"

// ProcessCPU is this process's user+system CPU so far; ok is false where
// the system does not say (here).
func ProcessCPU() (cpu time.Duration, ok bool) { return 0, false }
