package hostinfo

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/resource"
)

const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"

func TestHostCapacityTakesTheSmallerOfMachineAndCgroup(t *testing.T) {
	cases := []struct {
		name      string
		files     map[string]string
		cpu, mem  int64
		wantError bool
	}{
		{"no cgroup", map[string]string{}, 8000, 16384000 << 10, false},
		{"v2 unlimited", map[string]string{"sys/fs/cgroup/cpu.max": "max 100000\n", "sys/fs/cgroup/memory.max": "max\n"}, 8000, 16384000 << 10, false},
		{"v2 limits", map[string]string{"sys/fs/cgroup/cpu.max": "250000 100000\n", "sys/fs/cgroup/memory.max": "4294967296\n"}, 2500, 4 << 30, false},
		{"v2 limit above machine", map[string]string{"sys/fs/cgroup/cpu.max": "1600000 100000\n"}, 8000, 16384000 << 10, false},
		{"v1 limits", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1500, 1 << 30, false},
		{"v1 no quota", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 8000, 16384000 << 10, false},
		{"garbage cgroup ignored", map[string]string{"sys/fs/cgroup/cpu.max": "lots\n", "sys/fs/cgroup/memory.max": "-5\n"}, 8000, 16384000 << 10, false},
		// issue 45 §5: the process's own cgroup, from /proc/self/cgroup,
		// and the least limit on the way up to the root.
		{"v2 nested", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
			"sys/fs/cgroup/cgroup.controllers": "cpu memory\n", "sys/fs/cgroup/cpu.max": "max 100000\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/cpu.max": "50000 100000\n", "sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max": "2147483648\n"}, 500, 2 << 30, false},
		{"v1 nested", map[string]string{"proc/self/cgroup": "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us": "300000\n", "sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us": "100000\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n"}, 3000, 512 << 20, false},
	}
	for _, c := range cases {
		fsys := fstest.MapFS{"proc/meminfo": {Data: []byte(meminfo)}}
		for k, v := range c.files {
			fsys[k] = &fstest.MapFile{Data: []byte(v)}
		}
		got, err := Host{Root: fsys, NumCPU: 8}.Capacity()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := resource.List{resource.CPU: c.cpu, resource.Memory: c.mem}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", c.name, diff)
		}
	}
	for _, bad := range []string{"", "MemTotal: lots kB\n", "MemTotal: 5 MB\n"} {
		if _, err := (Host{Root: fstest.MapFS{"proc/meminfo": {Data: []byte(bad)}}, NumCPU: 2}).Capacity(); err == nil {
			t.Errorf("meminfo %q accepted", bad)
		}
	}
	if _, err := (Host{Root: fstest.MapFS{}, NumCPU: 2}).Capacity(); err == nil {
		t.Error("missing /proc/meminfo accepted")
	}
}

func TestHostOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("not Linux: no /proc/meminfo")
	}
	got, err := Host{Root: os.DirFS("/"), NumCPU: 2}.Capacity()
	if err != nil || got[resource.CPU] <= 0 || got[resource.CPU] > 2000 || got[resource.Memory] <= 0 {
		t.Fatalf("%v %v", got, err)
	}
}
