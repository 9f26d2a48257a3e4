package up

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// killShims SIGKILLs the task shims of up's agents: the children of this
// process whose last argument is an attempt directory under agentsDir (the
// executor starts each shim as `SHIM... DIR`). The executor then finds the
// shim dead without a result, SIGKILLs the command's process group and
// records the attempt lost — its contract for a shim that died (reboot,
// SIGKILL) — so a task that ignores SIGTERM ends now instead of after its
// grace, and the agent's stop finishes. A pid that is our unreaped child
// cannot be reused, so the signal reaches no other process. It returns
// how many it signalled.
//
// The agent has no "kill now" of its own (its stop sends SIGTERM and waits
// for the grace); this stands in for one from outside.
func killShims(agentsDir string) int {
	self := os.Getpid()
	prefix := filepath.Clean(agentsDir) + string(filepath.Separator)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || !strings.HasPrefix(args[len(args)-1], prefix) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
