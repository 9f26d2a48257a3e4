// Package childproc runs hetsched binaries as child processes for tests
// and benchmarks: build the binary, start it, wait for the URL it prints,
// read its memory, kill it.
//
// Contracts: every wait has a deadline; Kill reaps the child.
package childproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Build compiles cmd/hetsched into dir and returns the binary's path.
func Build(dir string) (string, error) { return BuildCommand(dir, "hetsched") }

// BuildCommand builds the module's command name (cmd/NAME) into dir and
// returns its path.
func BuildCommand(dir, name string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go tool is needed to build %s: %w", name, err)
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/hetsched/hetsched/cmd/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// Child is a running child process that printed its URL.
type Child struct {
	cmd    *exec.Cmd
	URL    string
	Line   string // the first line it printed
	stderr *SyncBuffer
}

// Start runs bin with args and waits (up to timeout) for a first stdout
// line holding "http://ADDR" or "https://ADDR" (the first of them).
func Start(bin string, timeout time.Duration, args ...string) (*Child, error) {
	cmd := exec.Command(bin, args...)
	cmd.WaitDelay = 5 * time.Second // a grandchild holding the pipes cannot block Wait
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, stderr: &SyncBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			_ = cmd.Wait()
			return nil, fmt.Errorf("%s %s exited: %s", bin, strings.Join(args, " "), c.stderr.String())
		}
		u, found := firstURL(l)
		if !found {
			c.Kill()
			return nil, fmt.Errorf("unexpected first line %q", l)
		}
		c.URL, c.Line = u, l
		return c, nil
	case <-time.After(timeout):
		c.Kill()
		return nil, fmt.Errorf("%s did not start within %v: %s", bin, timeout, c.stderr.String())
	}
}

// firstURL is the first http:// or https:// URL of line, up to a space.
func firstURL(line string) (string, bool) {
	i := strings.Index(line, "http://")
	if j := strings.Index(line, "https://"); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return "", false
	}
	u, _, _ := strings.Cut(line[i:], " ")
	return u, true
}

// SyncBuffer is a bytes.Buffer that one goroutine may write while others
// read it (the child's stderr copier, a server's printed lines in tests).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait reaps the child after it exits.
func (c *Child) Wait() error { return c.cmd.Wait() }

// Stderr is what the child wrote to standard error so far.
func (c *Child) Stderr() string { return c.stderr.String() }

// Kill sends SIGKILL and reaps the child.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// Memory is a process's resident memory in bytes: now and at its peak.
type Memory struct {
	RSS  int64 `json:"rss_bytes"`
	Peak int64 `json:"peak_rss_bytes"`
}

// ReadMemory reads VmRSS and VmHWM of pid from /proc.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("reading process memory (Linux /proc needed): %w", err)
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n << 10
		case "VmHWM":
			m.Peak = n << 10
		}
	}
	return m, nil
}

// ReadCPU returns the CPU time (user + system) the process has used so
// far, from /proc/PID/stat (clock ticks of 10ms: USER_HZ is 100 on Linux).
func ReadCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading process CPU time (Linux /proc needed): %w", err)
	}
	// The command name (field 2) may hold spaces; fields after ")" count
	// from 3 (state).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// ReadWriteBytes returns the bytes pid has caused to be written to storage
// so far (write_bytes of /proc/PID/io: what reached the block layer, WAL
// and compactions included).
func ReadWriteBytes(pid int) (int64, error) {
	io, err := readIO(pid, "write_bytes")
	return io[0], err
}

// Syscalls counts a process's read and write system calls so far (syscr
// and syscw of /proc/PID/io: reads and writes of every kind, sockets
// included).
type Syscalls struct {
	Reads  int64 `json:"reads"`
	Writes int64 `json:"writes"`
}

// ReadSyscalls reads pid's Syscalls from /proc.
func ReadSyscalls(pid int) (Syscalls, error) {
	io, err := readIO(pid, "syscr", "syscw")
	return Syscalls{Reads: io[0], Writes: io[1]}, err
}

// readIO returns the named counters of /proc/PID/io, in order.
func readIO(pid int, names ...string) ([]int64, error) {
	out := make([]int64, len(names))
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return out, fmt.Errorf("reading process I/O (Linux /proc needed): %w", err)
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if i := slices.Index(names, k); ok && i >= 0 {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return out, fmt.Errorf("/proc/%d/io: %s: %w", pid, k, err)
			}
			out[i] = n
			found++
		}
	}
	if found < len(names) {
		return out, fmt.Errorf("/proc/%d/io lacks one of %v", pid, names)
	}
	return out, nil
}

// FreePorts returns n distinct loopback ports free now: each is listened
// on, then all are closed, for a child to bind a moment later.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
