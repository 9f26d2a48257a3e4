package api

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

const gpu = resource.Name("nvidia.com/gpu")

func intp(v int) *int    { return &v }
func boolp(v bool) *bool { return &v }

// fullTask returns a valid task with every field set (lease excepted: a
// task with a command cannot be a lease).
func fullTask() *Task {
	return &Task{
		ID:       "train-1",
		Name:     "train resnet on imagenet",
		Queue:    "research",
		Priority: intp(PriorityHigh),
		Resources: resource.List{
			resource.CPU:    4000,
			resource.Memory: 16 << 30,
			gpu:             2000,
		},
		Alternatives: []Alternative{
			{Resources: resource.List{resource.CPU: 4000, "google.com/tpu": 4000}, Speed: 1.5},
			{Resources: resource.List{gpu: 500}},
		},
		NodeSelector: map[string]string{"zone": "eu-1", "nvidia.com/gpu.model": "V100|A100"},
		Tolerations:  []string{"gpu=true:NoSchedule", "dedicated", "*"},
		Command:      []string{"python", "train.py", "--epochs=10"},
		Env:          map[string]string{"EPOCHS": "10", "_X": ""},
		Duration:     Duration(30 * time.Minute),
		Timeout:      Duration(time.Hour),
		QueueTimeout: Duration(10 * time.Minute),
		Depends:      []string{"prep-1", "prep-2"},
		Preemptible:  boolp(false),
		Metadata:     map[string]string{"owner": "alice", "team/project": "vision"},
	}
}

// wantInvalid fails unless err is an invalid_argument error on field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want invalid_argument on %q", field)
	}
	if c := errs.CodeOf(err); c != errs.InvalidArgument {
		t.Errorf("code = %q, want %q (err: %v)", c, errs.InvalidArgument, err)
	}
	if f := errs.FieldOf(err); f != field {
		t.Errorf("field = %q, want %q (err: %v)", f, field, err)
	}
}

func TestTaskValidate(t *testing.T) {
	manyMeta := map[string]string{}
	for i := range MaxMetadata + 1 {
		manyMeta[fmt.Sprintf("k%d", i)] = "v"
	}
	alts := func(n int) []Alternative {
		a := make([]Alternative, n)
		for i := range a {
			a[i] = Alternative{Resources: resource.List{resource.CPU: 1000}}
		}
		return a
	}
	for _, c := range []struct {
		name  string
		edit  func(*Task)
		field string // "" means valid
	}{
		{"full", func(*Task) {}, ""},
		{"empty", func(t *Task) { *t = Task{} }, ""},
		{"id max length", func(t *Task) { t.ID = strings.Repeat("a", MaxIDLen); t.Depends = nil }, ""},
		{"id with colon and dots", func(t *Task) { t.ID = "ns:job.1_a" }, ""},
		{"id with spaces", func(t *Task) { t.ID = "my task" }, "id"},
		{"id too long", func(t *Task) { t.ID = strings.Repeat("a", MaxIDLen+1) }, "id"},
		{"id leading dash", func(t *Task) { t.ID = "-a" }, "id"},
		{"id trailing dot", func(t *Task) { t.ID = "a." }, "id"},
		{"name too long", func(t *Task) { t.Name = strings.Repeat("n", MaxIDLen+1) }, "name"},
		{"bad queue", func(t *Task) { t.Queue = "a/b" }, "queue"},
		{"priority 0", func(t *Task) { t.Priority = intp(0) }, ""},
		{"priority 3", func(t *Task) { t.Priority = intp(3) }, ""},
		{"priority -1", func(t *Task) { t.Priority = intp(-1) }, "priority"},
		{"priority 4", func(t *Task) { t.Priority = intp(4) }, "priority"},
		{"fractional gpu above one", func(t *Task) { t.Resources[gpu] = 1500 }, "resources.nvidia.com/gpu"},
		{"too many gpus", func(t *Task) { t.Resources[gpu] = (MaxDeviceCount + 1) * 1000 }, "resources.nvidia.com/gpu"},
		{"max gpus", func(t *Task) { t.Resources[gpu] = MaxDeviceCount * 1000 }, ""},
		{"fractional cpu", func(t *Task) { t.Resources[resource.CPU] = 1500 }, ""},
		{"negative cpu", func(t *Task) { t.Resources[resource.CPU] = -1 }, "resources.cpu"},
		{"max alternatives", func(t *Task) { t.Alternatives = alts(MaxAlternatives) }, ""},
		{"too many alternatives", func(t *Task) { t.Alternatives = alts(MaxAlternatives + 1) }, "alternatives"},
		{"alternative without resources", func(t *Task) { t.Alternatives[0].Resources = nil }, "alternatives[0].resources"},
		{"alternative empty resources", func(t *Task) { t.Alternatives[0].Resources = resource.List{} }, "alternatives[0].resources"},
		{"alternative fractional gpu", func(t *Task) { t.Alternatives[1].Resources[gpu] = 2500 }, "alternatives[1].resources.nvidia.com/gpu"},
		{"alternative speed 0", func(t *Task) { t.Alternatives[0].Speed = 0 }, ""},
		{"alternative speed NaN", func(t *Task) { t.Alternatives[0].Speed = math.NaN() }, "alternatives[0].speed"},
		{"alternative speed negative", func(t *Task) { t.Alternatives[0].Speed = -0.5 }, "alternatives[0].speed"},
		{"alternative speed +Inf", func(t *Task) { t.Alternatives[0].Speed = math.Inf(1) }, "alternatives[0].speed"},
		{"alternative speed huge", func(t *Task) { t.Alternatives[0].Speed = 1e7 }, "alternatives[0].speed"},
		{"alternative speed index", func(t *Task) { t.Alternatives[1].Speed = -1 }, "alternatives[1].speed"},
		{"device class", func(t *Task) { t.DeviceClasses = map[string]string{string(gpu): "h100"} }, ""},
		{"device class of an unrequested resource", func(t *Task) { t.DeviceClasses = map[string]string{"google.com/tpu": "v5"} }, "deviceClasses.google.com/tpu"},
		{"device class of cpu", func(t *Task) { t.DeviceClasses = map[string]string{"cpu": "fast"} }, "deviceClasses.cpu"},
		{"device class empty", func(t *Task) { t.DeviceClasses = map[string]string{string(gpu): ""} }, "deviceClasses." + string(gpu)},
		{"alternative device class", func(t *Task) { t.Alternatives[0].DeviceClasses = map[string]string{"google.com/tpu": "v5 e"} }, "alternatives[0].deviceClasses.google.com/tpu"},
		{"selector bad key", func(t *Task) { t.NodeSelector = map[string]string{"bad key": "v"} }, "nodeSelector.bad key"},
		{"selector bad prefix", func(t *Task) { t.NodeSelector = map[string]string{"Bad.com/k": "v"} }, "nodeSelector.Bad.com/k"},
		{"selector long bad key", func(t *Task) { t.NodeSelector = map[string]string{strings.Repeat("k", 100): "v"} }, "nodeSelector." + strings.Repeat("k", 80) + "…"},
		{"selector bad value", func(t *Task) { t.NodeSelector = map[string]string{"zone": "eu 1"} }, "nodeSelector.zone"},
		{"selector bad alternative value", func(t *Task) { t.NodeSelector = map[string]string{"zone": "a|b c"} }, "nodeSelector.zone"},
		{"selector alternative values", func(t *Task) { t.NodeSelector = map[string]string{"zone": "a|b"} }, ""},
		{"selector too many", func(t *Task) {
			t.NodeSelector = map[string]string{}
			for i := range MaxSelectorLabels + 1 {
				t.NodeSelector[fmt.Sprintf("k%d", i)] = "v"
			}
		}, "nodeSelector"},
		{"bad toleration effect", func(t *Task) { t.Tolerations = []string{"k=v:Bogus"} }, "tolerations[0]"},
		{"bad toleration key", func(t *Task) { t.Tolerations = []string{"ok", "bad key"} }, "tolerations[1]"},
		{"too many tolerations", func(t *Task) { t.Tolerations = make([]string, MaxTolerations+1) }, "tolerations"},
		{"empty program", func(t *Task) { t.Command = []string{"", "x"} }, "command[0]"},
		{"empty later argument", func(t *Task) { t.Command = []string{"x", ""} }, ""},
		{"argument too long", func(t *Task) { t.Command = []string{"x", strings.Repeat("a", 64<<10+1)} }, "command[1]"},
		{"too many arguments", func(t *Task) { t.Command = make([]string, MaxCommandArgs+1) }, "command"},
		{"env name with digit first", func(t *Task) { t.Env = map[string]string{"1X": "v"} }, "env.1X"},
		{"env name with dash", func(t *Task) { t.Env = map[string]string{"A-B": "v"} }, "env.A-B"},
		{"env empty name", func(t *Task) { t.Env = map[string]string{"": "v"} }, "env."},
		{"env value too long", func(t *Task) { t.Env = map[string]string{"A": strings.Repeat("a", 64<<10+1)} }, "env.A"},
		{"negative duration", func(t *Task) { t.Duration = -1 }, "duration"},
		{"negative timeout", func(t *Task) { t.Timeout = Duration(-time.Second) }, "timeout"},
		{"negative queue timeout", func(t *Task) { t.QueueTimeout = -1 }, "queueTimeout"},
		{"negative lease", func(t *Task) { t.Command = nil; t.Timeout = 0; t.Lease = -2 }, "lease"},
		{"a lease that never expires", func(t *Task) { t.Command = nil; t.Timeout = 0; t.Lease = NoExpiry }, ""},
		{"ANSI escape in the name", func(t *Task) { t.Name = "ok\x1b[2Jcleared" }, "name"},
		{"control character in the name", func(t *Task) { t.Name = "a\rb" }, "name"},
		{"NUL in a command argument", func(t *Task) { t.Command = []string{"sh", "-c\x00x"} }, "command[1]"},
		{"NUL in an env value", func(t *Task) { t.Env = map[string]string{"A": "x\x00"} }, "env.A"},
		{"NUL in a metadata key", func(t *Task) { t.Metadata = map[string]string{"k\x00": "v"} }, "metadata"},
		{"ESC in a metadata value", func(t *Task) { t.Metadata = map[string]string{"k": "\x1b]0;title\x07"} }, "metadata.k"},
		{"lease without command", func(t *Task) { t.Command = nil; t.Timeout = 0; t.Lease = Duration(time.Minute) }, ""},
		{"lease with timeout", func(t *Task) { t.Command = nil; t.Lease = Duration(time.Minute) }, "timeout"},
		{"lease with command", func(t *Task) { t.Lease = Duration(time.Minute) }, "lease"},
		{"duplicate dependency", func(t *Task) { t.Depends = []string{"a", "a"} }, "depends[1]"},
		{"self dependency", func(t *Task) { t.Depends = []string{"a", "train-1"} }, "depends[1]"},
		{"self dependency without id", func(t *Task) { t.ID = ""; t.Depends = []string{"a"} }, ""},
		{"bad dependency id", func(t *Task) { t.Depends = []string{"a", "b c"} }, "depends[1]"},
		{"empty dependency id", func(t *Task) { t.Depends = []string{""} }, "depends[0]"},
		{"typed dependencies", func(t *Task) { t.Depends = []string{"afterok:a", "afterany:b", "afternotok:c", "d"} }, ""},
		{"the same id typed twice", func(t *Task) { t.Depends = []string{"a", "afterany:a"} }, "depends[1]"},
		{"unknown dependency type", func(t *Task) { t.Depends = []string{"aftersome:a"} }, "depends[0]"},
		{"Slurm's after type", func(t *Task) { t.Depends = []string{"after:a"} }, "depends[0]"},
		{"typed dependency without id", func(t *Task) { t.Depends = []string{"afterany:"} }, "depends[0]"},
		{"typed self dependency", func(t *Task) { t.Depends = []string{"afternotok:train-1"} }, "depends[0]"},
		{"an id with a colon is an id", func(t *Task) { t.Depends = []string{"team:a"} }, ""},
		{"a user", func(t *Task) { t.User = "ann.lee@example.com" }, ""},
		{"a user with a space", func(t *Task) { t.User = "ann lee" }, "user"},
		{"a user with a slash", func(t *Task) { t.User = "../root" }, "user"},
		{"too many metadata", func(t *Task) { t.Metadata = manyMeta }, "metadata"},
		{"metadata empty key", func(t *Task) { t.Metadata = map[string]string{"": "v"} }, "metadata"},
		{"metadata key too long", func(t *Task) { t.Metadata = map[string]string{strings.Repeat("k", 254): "v"} }, "metadata"},
		{"metadata value too long", func(t *Task) { t.Metadata = map[string]string{"k": strings.Repeat("v", 64<<10+1)} }, "metadata.k"},
		{"checkpoint", func(t *Task) {
			t.Checkpoint = &Checkpoint{Signal: "SIGUSR1", Grace: Duration(2 * time.Minute), Dir: "runs/r-1.v2"}
		}, ""},
		{"checkpoint defaults", func(t *Task) { t.Checkpoint = &Checkpoint{} }, ""},
		{"checkpoint without command", func(t *Task) { t.Command = nil; t.Timeout = 0; t.Checkpoint = &Checkpoint{} }, "checkpoint"},
		{"checkpoint SIGKILL", func(t *Task) { t.Checkpoint = &Checkpoint{Signal: "SIGKILL"} }, "checkpoint.signal"},
		{"checkpoint lowercase signal", func(t *Task) { t.Checkpoint = &Checkpoint{Signal: "usr1"} }, "checkpoint.signal"},
		{"checkpoint negative grace", func(t *Task) { t.Checkpoint = &Checkpoint{Grace: -1} }, "checkpoint.grace"},
		{"checkpoint grace too long", func(t *Task) { t.Checkpoint = &Checkpoint{Grace: MaxCheckpointGrace + 1} }, "checkpoint.grace"},
		{"checkpoint absolute dir", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: "/etc"} }, "checkpoint.dir"},
		{"checkpoint dir escapes", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: "a/../../b"} }, "checkpoint.dir"},
		{"checkpoint dir empty segment", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: "a//b"} }, "checkpoint.dir"},
		{"checkpoint dir trailing slash", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: "a/"} }, "checkpoint.dir"},
		{"checkpoint dir space", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: "my run"} }, "checkpoint.dir"},
		{"checkpoint dir too long", func(t *Task) { t.Checkpoint = &Checkpoint{Dir: strings.Repeat("a", 513)} }, "checkpoint.dir"},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := fullTask()
			c.edit(task)
			err := task.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			wantInvalid(t, err, c.field)
		})
	}
}

func TestTaskValidateDoesNotModify(t *testing.T) {
	task := fullTask()
	if err := task.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fullTask(), task); d != "" {
		t.Errorf("Validate modified the task (-before +after):\n%s", d)
	}
}

func TestValidateRequest(t *testing.T) {
	for _, c := range []struct {
		l     resource.List
		field string
	}{
		{resource.List{gpu: 1500}, "resources.nvidia.com/gpu"},
		{resource.List{gpu: 1001}, "resources.nvidia.com/gpu"},
		{resource.List{gpu: 2000}, ""},
		{resource.List{gpu: 500}, ""},
		{resource.List{gpu: 1}, ""},
		{resource.List{gpu: 999}, ""},
		{resource.List{gpu: 1000}, ""},
		{resource.List{gpu: 0}, ""},
		{resource.List{gpu: MaxDeviceCount * 1000}, ""},
		{resource.List{gpu: (MaxDeviceCount + 1) * 1000}, "resources.nvidia.com/gpu"},
		{resource.List{gpu: -1000}, "resources.nvidia.com/gpu"},
		{resource.List{resource.CPU: 1500, resource.Memory: 1}, ""},
		{resource.List{resource.CPU: -1}, "resources.cpu"},
		{resource.List{resource.Memory: -1}, "resources.memory"},
		// Huge pages are bytes, not devices: any amount.
		{resource.List{"kubernetes.io/hugepages-2Mi": 32 << 20}, ""},
		{resource.List{"kubernetes.io/hugepages-1Gi": 5 << 40}, ""},
		{resource.List{"kubernetes.io/hugepages-2Mi": -1}, "resources.kubernetes.io/hugepages-2Mi"},
		{nil, ""},
	} {
		err := ValidateRequest("resources", c.l)
		if c.field == "" {
			if err != nil {
				t.Errorf("ValidateRequest(%v) = %v, want nil", c.l, err)
			}
			continue
		}
		if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != c.field {
			t.Errorf("ValidateRequest(%v) = %v, want invalid_argument on %q", c.l, err, c.field)
		}
	}
}

func TestTaskDefaults(t *testing.T) {
	var task Task
	if got := task.PriorityOrDefault(); got != PriorityMedium {
		t.Errorf("PriorityOrDefault() = %d, want %d", got, PriorityMedium)
	}
	if !task.IsPreemptible() {
		t.Error("IsPreemptible() = false for an unset field, want true")
	}
	task.Priority, task.Preemptible = intp(PriorityUrgent), boolp(false)
	if got := task.PriorityOrDefault(); got != PriorityUrgent {
		t.Errorf("PriorityOrDefault() = %d, want %d", got, PriorityUrgent)
	}
	if task.IsPreemptible() {
		t.Error("IsPreemptible() = true with preemptible false")
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("a", 79) + "é" // é straddles byte 80
	got := truncate(s)
	if want := strings.Repeat("a", 79) + "…"; got != want {
		t.Errorf("truncate = %q, want %q", got, want)
	}
	if got := truncate("short"); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
}
