//go:build unix

package store

import (
	"io"
	"os"
	"syscall"
)

// lockHolder returns the pid of the process holding the fcntl lock on path
// (Pebble's LOCK file), or 0 when it cannot tell.
func lockHolder(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}
