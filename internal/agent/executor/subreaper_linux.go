package executor

import "syscall"

// becomeSubreaper makes the shim the reaper of its task's orphaned
// descendants (PR_SET_CHILD_SUBREAPER), so that it sees them exit.
func becomeSubreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return e
	}
	return nil
}
