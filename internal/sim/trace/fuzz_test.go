package trace

import (
	"bytes"
	"testing"
)

// checkJobs fails unless every job of a successfully read workload has a
// valid task.
func checkJobs(t *testing.T, w Workload) {
	t.Helper()
	for _, j := range w.Arrivals {
		if err := j.Task.Validate(); err != nil {
			t.Fatalf("job %s: invalid task: %v", j.ID, err)
		}
		if j.At < 0 || j.Duration < 0 {
			t.Fatalf("job %s: arrival %v, duration %v", j.ID, j.At, j.Duration)
		}
	}
}

func checkNodes(t *testing.T, c Cluster) {
	t.Helper()
	for _, n := range c.Nodes {
		if err := n.Validate(); err != nil {
			t.Fatalf("node %s: invalid: %v", n.Name, err)
		}
	}
}

// FuzzReadOpenbPods feeds arbitrary bytes to the openb pod reader: it
// must not panic, and what it accepts must be valid tasks.
func FuzzReadOpenbPods(f *testing.F) {
	f.Add([]byte(openbPods))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-0,6000,12288,1,460\n"))
	f.Add([]byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n\"p\",1,1,1,1,\"A|B\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadOpenbPods(bytes.NewReader(data))
		if err == nil {
			checkJobs(t, w)
		}
	})
}

// FuzzReadOpenbNodes does the same for node lists.
func FuzzReadOpenbNodes(f *testing.F) {
	f.Add([]byte(openbNodes))
	f.Add([]byte("model,gpu,sn,memory_mib,cpu_milli\nT4,1,n1,1024,8000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadOpenbNodes(bytes.NewReader(data))
		if err == nil {
			checkNodes(t, c)
		}
	})
}

// FuzzReadPhilly does the same for Philly's job list.
func FuzzReadPhilly(f *testing.F) {
	f.Add([]byte(phillyExcerpt))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ReadPhilly(bytes.NewReader(data))
		if err == nil {
			checkJobs(t, w)
			for i := 1; i < len(w.Arrivals); i++ {
				if w.Arrivals[i].At < w.Arrivals[i-1].At {
					t.Fatalf("job %s arrives before %s", w.Arrivals[i].ID, w.Arrivals[i-1].ID)
				}
			}
		}
	})
}

// FuzzReadGavel does the same for the throughput table and a trace read
// with it (the input holds both, split at the first NUL byte).
func FuzzReadGavel(f *testing.F) {
	f.Add([]byte(gavelThroughputs + "\x00" + gavelTrace))
	f.Fuzz(func(t *testing.T, data []byte) {
		table, trace, _ := bytes.Cut(data, []byte{0})
		th, err := ReadGavelThroughputs(bytes.NewReader(table))
		if err != nil {
			return
		}
		w, err := ReadGavelTrace(bytes.NewReader(trace), th)
		if err == nil {
			checkJobs(t, w)
		}
	})
}

// FuzzReadPAIMachines does the same for the PAI machine list.
func FuzzReadPAIMachines(f *testing.F) {
	f.Add([]byte("machine,gpu_type,cap_cpu,cap_mem,cap_gpu\nm-cpu,CPU,96,512,0\nm-p100,P100,64,512,2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadPAIMachines(bytes.NewReader(data))
		if err == nil {
			checkNodes(t, c)
		}
	})
}

// FuzzParseSynthSpec checks that any spec either fails or yields a
// config that validates and generates without panicking.
func FuzzParseSynthSpec(f *testing.F) {
	f.Add("jobs=5,rate=0.5,mean=90,dist=constant,cpu=1,pinned=0.5,queues=3,seed=-9")
	f.Add("")
	f.Fuzz(func(t *testing.T, spec string) {
		cfg, seed, err := ParseSynthSpec(spec)
		if err != nil || cfg.Validate() != nil {
			return
		}
		cfg.Jobs = min(cfg.Jobs, 50)
		checkJobs(t, Synthetic(cfg, seed))
	})
}
