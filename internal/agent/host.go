package agent

import (
	"bufio"
	"bytes"
	"io/fs"
	"strconv"
	"strings"
	"sync"
)

// hostUsage samples the machine's CPU use (from /proc/stat deltas) and
// memory use (MemTotal - MemAvailable from /proc/meminfo) through root.
type hostUsage struct {
	root fs.FS

	mu              sync.Mutex
	lastIdle, lastT uint64
}

// sample returns the CPU fraction busy since the previous sample (0 on
// the first) and the bytes of memory in use. Unreadable files give zeros:
// usage is advisory.
func (h *hostUsage) sample() (cpu float64, mem int64) {
	if b, err := fs.ReadFile(h.root, "proc/stat"); err == nil {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		f := strings.Fields(string(line))
		if len(f) > 5 && f[0] == "cpu" {
			var total, idle uint64
			for i, v := range f[1:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				total += n
				if i == 3 || i == 4 { // idle, iowait
					idle += n
				}
			}
			h.mu.Lock()
			if dt := total - h.lastT; h.lastT != 0 && total > h.lastT {
				cpu = 1 - float64(idle-h.lastIdle)/float64(dt)
			}
			h.lastT, h.lastIdle = total, idle
			h.mu.Unlock()
		}
	}
	if b, err := fs.ReadFile(h.root, "proc/meminfo"); err == nil {
		var total, avail int64
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 {
				continue
			}
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "MemTotal:":
				total = v << 10
			case "MemAvailable:":
				avail = v << 10
			}
		}
		if total > avail {
			mem = total - avail
		}
	}
	return min(max(cpu, 0), 1), mem
}
