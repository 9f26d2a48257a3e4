package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/resource"
)

// TestAppendJSONMatchesMarshal: Task.AppendJSON writes exactly what
// json.Marshal writes, for the decoder's seeds and for generated tasks
// (plain and escaped strings, every optional field).
func TestAppendJSONMatchesMarshal(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, task *Task) {
		want, err := json.Marshal(task)
		if err != nil {
			t.Fatalf("%v", err)
		}
		prefix := []byte("xx")
		got, err := task.AppendJSON(prefix)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if !bytes.Equal(got[2:], want) || string(got[:2]) != "xx" {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got[2:], want)
		}
	}
	for _, s := range taskSeeds {
		var task Task
		if err := json.Unmarshal([]byte(s), &task); err == nil {
			check(t, &task)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		task := genTask().Draw(rt, "task")
		check(rt, &task)
	})
}

// genTask generates the tasks of the encoder and decoder tests: plain and
// escaped strings, every optional field, nested ones included (about one
// task in ten has alternatives, a locality or inputs, which AppendJSON
// hands to encoding/json). TestGenTaskSetsEveryField checks that it
// reaches every field of Task, so a new field must be added here.
func genTask() *rapid.Generator[Task] {
	return rapid.Custom(func(rt *rapid.T) Task {
		text := func(label string) string {
			return rapid.StringOf(rapid.RuneFrom([]rune("ab-_.:/ Z9\"\\<>&\u00e9\u2028\x01"))).Draw(rt, label)
		}
		plain := func(label string) string {
			return rapid.StringMatching(`[a-z0-9.-]{0,8}`).Draw(rt, label)
		}
		pick := func(label string) func(string) string {
			if rapid.Bool().Draw(rt, label) {
				return text
			}
			return plain
		}
		s := pick("escaped")
		strs := func(label string) []string {
			n := rapid.IntRange(0, 3).Draw(rt, label)
			if n == 0 && rapid.Bool().Draw(rt, label+"-nil") {
				return nil
			}
			out := make([]string, n)
			for i := range out {
				out[i] = s(label)
			}
			return out
		}
		smap := func(label string) map[string]string {
			n := rapid.IntRange(0, 3).Draw(rt, label)
			if n == 0 && rapid.Bool().Draw(rt, label+"-nil") {
				return nil
			}
			m := map[string]string{}
			for i := 0; i < n; i++ {
				m[s(label+"-k")] = s(label + "-v")
			}
			return m
		}
		dur := func(label string) Duration {
			return Duration(rapid.SampledFrom([]time.Duration{0, time.Nanosecond, 1500 * time.Nanosecond, 5 * time.Minute, -time.Second}).Draw(rt, label))
		}
		res := func(label string) resource.List {
			n := rapid.IntRange(0, 3).Draw(rt, label)
			if n == 0 {
				return nil
			}
			l := resource.List{}
			for _, name := range []resource.Name{"cpu", "memory", "nvidia.com/gpu"}[:n] {
				l[name] = rapid.Int64Range(0, 1<<40).Draw(rt, label+"-q")
			}
			return l
		}
		locality := func(label string) *Locality {
			if !rapid.Bool().Draw(rt, label) {
				return nil
			}
			return &Locality{Nodes: strs(label + "-nodes"), Labels: smap(label + "-labels")}
		}
		task := Task{ID: s("id"), Name: s("name"), Queue: s("queue"), User: s("user"), NodeSelector: smap("sel"), Tolerations: strs("tol"),
			Command: strs("cmd"), Env: smap("env"), Duration: dur("d"), Timeout: dur("t"), QueueTimeout: dur("qt"), Lease: dur("l"),
			Depends: strs("dep"), LocalityWait: dur("lw"), Shards: rapid.IntRange(-2, 3).Draw(rt, "shards"), Metadata: smap("md")}
		if rapid.Bool().Draw(rt, "prio") {
			p := rapid.IntRange(-1, 5).Draw(rt, "p")
			task.Priority = &p
		}
		if rapid.Bool().Draw(rt, "pre") {
			v := rapid.Bool().Draw(rt, "pv")
			task.Preemptible = &v
		}
		if rapid.Bool().Draw(rt, "req") {
			v := rapid.Bool().Draw(rt, "rv")
			task.Requeue = &v
		}
		task.Resources = res("res")
		if rapid.IntRange(0, 4).Draw(rt, "checkpoint") == 0 {
			task.Checkpoint = &Checkpoint{Signal: rapid.SampledFrom([]string{"", "SIGUSR1", "SIGKILL"}).Draw(rt, "ck-sig"),
				Grace: dur("ck-grace"), Dir: rapid.SampledFrom([]string{"", "run/1", "../x", "a b"}).Draw(rt, "ck-dir")}
		}
		if rapid.IntRange(0, 4).Draw(rt, "affinity") == 0 {
			task.NodeAffinity = []string{rapid.SampledFrom([]string{"zone in (a,b)", "gpu.memory>40960,!spot", "a=b"}).Draw(rt, "term")}
		}
		if rapid.IntRange(0, 4).Draw(rt, "classes") == 0 {
			task.DeviceClasses = map[string]string{rapid.SampledFrom([]string{"nvidia.com/gpu", "google.com/tpu"}).Draw(rt, "class-res"): rapid.SampledFrom([]string{"h100", "a.b-c"}).Draw(rt, "class")}
		}
		if rapid.IntRange(0, 4).Draw(rt, "constraints") == 0 {
			genConstraints(rt, &task, s, smap)
		}
		if rapid.IntRange(0, 4).Draw(rt, "replica") == 0 {
			genProbes(rt, &task, s, dur)
		}
		if rapid.IntRange(0, 9).Draw(rt, "rare") == 0 {
			for i := rapid.IntRange(0, 2).Draw(rt, "alts"); i > 0; i-- {
				a := Alternative{Resources: res("alt-res"), Speed: rapid.SampledFrom([]float64{0, 0.5, 1.5, 3}).Draw(rt, "speed")}
				if rapid.Bool().Draw(rt, "alt-classes") {
					a.DeviceClasses = map[string]string{"google.com/tpu": "v5e"}
				}
				task.Alternatives = append(task.Alternatives, a)
			}
			task.Locality = locality("loc")
			for i := rapid.IntRange(0, 2).Draw(rt, "inputs"); i > 0; i-- {
				task.Inputs = append(task.Inputs, Input{Name: s("input"), Locality: locality("input-loc")})
			}
		}
		return task
	})
}

// genProbes makes task a service's replica with probes.
func genProbes(rt *rapid.T, task *Task, s func(string) string, dur func(string) Duration) {
	task.Service = s("service")
	probe := func(label string) *Probe {
		if rapid.IntRange(0, 2).Draw(rt, label) == 0 {
			return nil
		}
		d := func(l string) *Duration {
			if !rapid.Bool().Draw(rt, label+l) {
				return nil
			}
			v := dur(label + l + "-v")
			return &v
		}
		p := &Probe{InitialDelay: d("-delay"), Period: d("-period"), Timeout: d("-timeout"),
			FailureThreshold: rapid.IntRange(-1, 3).Draw(rt, label+"-fail"), SuccessThreshold: rapid.IntRange(-1, 3).Draw(rt, label+"-ok")}
		switch rapid.IntRange(0, 2).Draw(rt, label+"-kind") {
		case 0:
			p.HTTP = &HTTPProbe{Path: s(label + "-path"), Port: rapid.IntRange(-1, 70000).Draw(rt, label+"-port")}
		case 1:
			p.TCP = &TCPProbe{Port: rapid.IntRange(-1, 70000).Draw(rt, label+"-port")}
		default:
			p.Exec = &ExecProbe{Command: []string{s(label + "-cmd")}}
		}
		return p
	}
	task.Liveness, task.Readiness, task.Startup = probe("live"), probe("ready"), probe("start")
}

// genConstraints sets the placement constraints of task.
func genConstraints(rt *rapid.T, task *Task, s func(string) string, smap func(string) map[string]string) {
	for i := rapid.IntRange(0, 2).Draw(rt, "ports"); i > 0; i-- {
		task.HostPorts = append(task.HostPorts, HostPort{Port: rapid.Int32Range(-1, 70000).Draw(rt, "port"),
			Protocol: rapid.SampledFrom([]string{"", "TCP", "UDP", "tcp"}).Draw(rt, "proto"), HostIP: rapid.SampledFrom([]string{"", "10.0.0.1", "x"}).Draw(rt, "ip")})
	}
	term := func(label string) AffinityTerm {
		return AffinityTerm{TaskSelector: TaskSelector{Selector: smap(label + "-sel"), Match: rapid.SampledFrom([]string{"", "app in (a,b)", "!x", "(("}).Draw(rt, label+"-match")},
			TopologyKey: s(label + "-key"), Required: rapid.Bool().Draw(rt, label+"-req"), Weight: rapid.Int32Range(-1, 101).Draw(rt, label+"-w")}
	}
	for i := rapid.IntRange(0, 2).Draw(rt, "aff"); i > 0; i-- {
		task.Affinity = append(task.Affinity, term("aff"))
	}
	for i := rapid.IntRange(0, 2).Draw(rt, "anti"); i > 0; i-- {
		task.AntiAffinity = append(task.AntiAffinity, term("anti"))
	}
	for i := rapid.IntRange(0, 2).Draw(rt, "spread"); i > 0; i-- {
		task.Spread = append(task.Spread, Spread{TaskSelector: TaskSelector{Selector: smap("sp-sel"), Match: s("sp-match")}, TopologyKey: s("sp-key"),
			MaxSkew: rapid.Int32Range(0, 3).Draw(rt, "skew"), WhenUnsatisfiable: rapid.SampledFrom([]string{"", "wait", "place", "x"}).Draw(rt, "when"),
			MinDomains: rapid.Int32Range(-1, 3).Draw(rt, "mind"), NodeAffinityPolicy: rapid.SampledFrom([]string{"", "honor", "ignore", "x"}).Draw(rt, "nap"),
			NodeTaintsPolicy: rapid.SampledFrom([]string{"", "honor", "ignore"}).Draw(rt, "ntp")})
	}
	for i := rapid.IntRange(0, 2).Draw(rt, "prefs"); i > 0; i-- {
		task.PreferredNodeAffinity = append(task.PreferredNodeAffinity, NodePreference{Weight: rapid.Int32Range(0, 101).Draw(rt, "pw"),
			Selector: rapid.SampledFrom([]string{"zone=a", "", "gpu>3"}).Draw(rt, "psel")})
	}
	task.PreemptionPolicy = rapid.SampledFrom([]string{"", "never", "Never"}).Draw(rt, "pp")
	task.PriorityValue = rapid.Int32().Draw(rt, "pv")
}

func BenchmarkTaskJSON(b *testing.B) {
	p := 3
	task := Task{ID: "lg1-2-3", Priority: &p, Resources: resource.List{"cpu": 10}, Lease: Duration(5 * time.Minute)}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = task.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&task)
		}
	})
}

// TestAppendJSONStringMatchesEncodingJSON: the one string writer used by
// the hand-written encoders gives encoding/json's bytes, escapes included.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain-node-1", `quo"te`, `back\slash`, "<a>&b", "tab\tnew\nline", "é日本", "\x7f", "bad\xffutf8", "\u2028"} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want x%s", s, got, want)
		}
	}
}
