package store

import "time"

// SetFailedCloseWait shortens how long Close waits for a failed store; it
// returns a function restoring the previous value.
func SetFailedCloseWait(d time.Duration) (restore func()) {
	prev := failedCloseWait
	failedCloseWait = d
	return func() { failedCloseWait = prev }
}
