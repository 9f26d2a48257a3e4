// Package hostinfo reads the facts of the machine a process runs on that
// both the node agent (the node's capacity) and the server (its memory
// limit) need: CPUs and memory, from /proc/meminfo and the cgroup (v2 or
// v1) limits the process runs under. It reads through an fs.FS rooted at
// "/", so tests run the parsers over fixture trees; nothing here writes.
package hostinfo

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/resource"
)

// Host reads CPU and memory capacity from root (normally os.DirFS("/")).
type Host struct {
	Root fs.FS
	// NumCPU is the CPUs the OS reports (runtime.NumCPU()); the cgroup
	// limit, when lower, wins.
	NumCPU int
}

// Capacity returns cpu (milli) and memory (bytes): the smaller of what the
// machine has and what the process's cgroup (v2 or v1) allows.
func (h Host) Capacity() (resource.List, error) {
	memTotal, err := meminfoTotal(h.Root)
	if err != nil {
		return nil, err
	}
	cpuMilli := int64(h.NumCPU) * 1000
	self := selfCgroup(h.Root) // read once for both limits
	if q, ok := cgroupCPU(h.Root, self); ok && q < cpuMilli {
		cpuMilli = q
	}
	if m, ok := cgroupMemory(h.Root, self); ok && m < memTotal {
		memTotal = m
	}
	if cpuMilli <= 0 {
		return nil, fmt.Errorf("no CPUs found")
	}
	return resource.List{resource.CPU: cpuMilli, resource.Memory: memTotal}, nil
}

func meminfoTotal(root fs.FS) (int64, error) {
	f, err := root.Open("proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading /proc/meminfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for lines := 0; sc.Scan() && lines < 1000; lines++ {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: unexpected MemTotal line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 || kb > math.MaxInt64>>10 {
			return 0, fmt.Errorf("/proc/meminfo: bad MemTotal %q", fields[0])
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
}

// selfCgroup is this process's cgroup per controller, as
// /proc/self/cgroup names it ("" keys cgroup v2's unified hierarchy; v1's
// lines key each of their controllers); nil when it cannot be read.
func selfCgroup(root fs.FS) map[string]string {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case f[0] == "0" && f[1] == "":
			out[""] = f[2]
		default:
			for _, c := range strings.Split(f[1], ",") {
				out[c] = f[2]
			}
		}
	}
	return out
}

// cgroupDirs are the directories of this process's cgroup for
// controller ("" for cgroup v2's unified hierarchy, "cpu" or "memory"
// for v1's) under mount (sys/fs/cgroup, or sys/fs/cgroup/cpu), from the
// process's own up to the mount's root, as /proc/self/cgroup names it
// (self; the Go runtime and cAdvisor read it the same way): a limit
// anywhere on the way binds the process. Unknown: the mount's root alone.
func cgroupDirs(self map[string]string, mount, controller string) []string {
	p, ok := self[controller]
	if !ok {
		return []string{mount}
	}
	var dirs []string
	for p = path.Clean("/" + p); ; p = path.Dir(p) {
		dirs = append(dirs, path.Join(mount, p))
		if p == "/" {
			return dirs
		}
	}
}

// cgroupCPU reads the CPU quota in millicores, the least on the way from
// this process's cgroup to the root: cgroup v2 cpu.max ("max 100000" or
// "200000 100000"), else v1 cfs_quota/period.
func cgroupCPU(root fs.FS, self map[string]string) (int64, bool) {
	best, found := int64(0), false
	keep := func(v int64, ok bool) {
		if ok && (!found || v < best) {
			best, found = v, true
		}
	}
	if exists(root, "sys/fs/cgroup/cgroup.controllers") || exists(root, "sys/fs/cgroup/cpu.max") {
		for _, dir := range cgroupDirs(self, "sys/fs/cgroup", "") {
			if b, err := fs.ReadFile(root, path.Join(dir, "cpu.max")); err == nil {
				if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
					keep(quotaMilli(f[0], f[1]))
				}
			}
		}
		return best, found
	}
	for _, dir := range cgroupDirs(self, "sys/fs/cgroup/cpu", "cpu") {
		q, err1 := fs.ReadFile(root, path.Join(dir, "cpu.cfs_quota_us"))
		p, err2 := fs.ReadFile(root, path.Join(dir, "cpu.cfs_period_us"))
		if err1 == nil && err2 == nil {
			keep(quotaMilli(strings.TrimSpace(string(q)), strings.TrimSpace(string(p))))
		}
	}
	return best, found
}

func exists(root fs.FS, name string) bool {
	_, err := fs.Stat(root, name)
	return err == nil
}

func quotaMilli(quota, period string) (int64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 || q > math.MaxInt64/1000 {
		return 0, false // -1 (v1 "no limit") and garbage alike
	}
	return q * 1000 / p, true
}

// cgroupMemory reads the memory limit: v2 memory.max, else v1
// memory.limit_in_bytes (v1 reports "no limit" as a huge number, which
// loses against MemTotal anyway).
func cgroupMemory(root fs.FS, self map[string]string) (int64, bool) {
	files := []string{}
	for _, dir := range cgroupDirs(self, "sys/fs/cgroup", "") {
		files = append(files, path.Join(dir, "memory.max"))
	}
	for _, dir := range cgroupDirs(self, "sys/fs/cgroup/memory", "memory") {
		files = append(files, path.Join(dir, "memory.limit_in_bytes"))
	}
	best, found := int64(0), false
	for _, p := range files {
		b, err := fs.ReadFile(root, p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 { // "max", garbage
			continue
		}
		if !found || v < best {
			best, found = v, true
		}
	}
	return best, found
}

// Local is this machine, as the OS reports it.
func Local() Host { return Host{Root: os.DirFS("/"), NumCPU: runtime.NumCPU()} }

// Memory is this machine's memory in bytes, capped by this process's
// cgroup.
func Memory() (int64, error) {
	c, err := Local().Capacity()
	if err != nil {
		return 0, err
	}
	return c[resource.Memory], nil
}
