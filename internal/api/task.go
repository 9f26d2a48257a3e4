package api

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Priorities: a smaller number is more important.
const (
	PriorityUrgent = 0
	PriorityHigh   = 1
	PriorityMedium = 2
	PriorityLow    = 3
	// DefaultPriority applies when a task names none.
	DefaultPriority = PriorityMedium
)

// TierNames maps a priority to its tier's name.
var TierNames = [4]string{"urgent", "high", "medium", "low"}

// Task is a unit of work as submitted (API.md "Task").
type Task struct {
	ID    string `json:"id,omitempty"`
	Name  string `json:"name,omitempty"`
	Queue string `json:"queue,omitempty"`
	// User is who submitted the task: set by the server from the
	// caller's token (a token's user, else its tenant); with
	// authentication off, the name the client gives (the CLI sends
	// $USER). Accounting and `get tasks --user` go by it.
	User         string        `json:"user,omitempty"`
	Priority     *int          `json:"priority,omitempty"`
	Resources    resource.List `json:"resources,omitempty"`
	Alternatives []Alternative `json:"alternatives,omitempty"`
	// DeviceClasses narrows a device request to the devices of a class
	// (Device.Classes): resource name -> class, for example
	// {"nvidia.com/gpu": "h100-80g"}. Alternatives carry their own.
	DeviceClasses map[string]string `json:"deviceClasses,omitempty"`
	NodeSelector  map[string]string `json:"nodeSelector,omitempty"`
	// NodeAffinity restricts the nodes further, as Kubernetes' required
	// node affinity: the node must match at least one term, each a label
	// selector (ParseSelector: =, !=, in, notin, exists, !, >, <) all of
	// whose requirements hold.
	NodeAffinity []string          `json:"nodeAffinity,omitempty"`
	Tolerations  []string          `json:"tolerations,omitempty"`
	Command      []string          `json:"command,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Duration     Duration          `json:"duration,omitempty"`
	Timeout      Duration          `json:"timeout,omitempty"`
	QueueTimeout Duration          `json:"queueTimeout,omitempty"`
	Lease        Duration          `json:"lease,omitempty"`
	Depends      []string          `json:"depends,omitempty"`
	Preemptible  *bool             `json:"preemptible,omitempty"`
	// Requeue false means the task must not run twice: when its node is
	// lost or evicts it (notready, a device fault, preemption) it fails
	// with the reason instead of going back to pending (Slurm's
	// --no-requeue). Default true.
	Requeue *bool `json:"requeue,omitempty"`
	// Locality prefers the nodes holding the task's data (by name or by
	// labels) for up to LocalityWait (default 3s) after it becomes
	// pending; then any node will do (delay scheduling).
	Locality     *Locality `json:"locality,omitempty"`
	LocalityWait Duration  `json:"localityWait,omitempty"`
	// Shards fans a job's task out into tasks <id>-0 … <id>-(N-1); Inputs
	// fans it out into one task per input, each preferring the nodes that
	// hold it. Tasks that depend on <id> depend on every shard. Only in a
	// job (Job.Expand).
	Shards   int               `json:"shards,omitempty"`
	Inputs   []Input           `json:"inputs,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Placement constraints (constraints.go, API.md "Placement
	// constraints"); Metadata doubles as the task's labels.
	HostPorts             []HostPort       `json:"hostPorts,omitempty"`
	Affinity              []AffinityTerm   `json:"affinity,omitempty"`
	AntiAffinity          []AffinityTerm   `json:"antiAffinity,omitempty"`
	Spread                []Spread         `json:"spread,omitempty"`
	PreferredNodeAffinity []NodePreference `json:"preferredNodeAffinity,omitempty"`
	// PreemptionPolicy "never": the task waits rather than evict anything.
	PreemptionPolicy string `json:"preemptionPolicy,omitempty"`
	// PriorityValue orders tasks of one priority tier for preemption, as
	// a Kubernetes pod's priority does: a task may evict tasks of a less
	// important tier, or of its own tier with a smaller value (default 0).
	PriorityValue int32 `json:"priorityValue,omitempty"`
	// Checkpoint says how the task saves its progress when it is stopped
	// to run again later (preempted, drained, its agent stopped): the
	// signal its command gets, how long it may take to exit, and the
	// directory its progress lives in across attempts.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Service names the service a replica task belongs to (set by the
	// server on the replicas it makes; refused on a task submitted
	// otherwise). Liveness, Readiness and Startup are a replica's probes,
	// run by its agent (a service's template gives them; only a replica
	// has them).
	Service   string `json:"service,omitempty"`
	Liveness  *Probe `json:"liveness,omitempty"`
	Readiness *Probe `json:"readiness,omitempty"`
	Startup   *Probe `json:"startup,omitempty"`
}

// Checkpoint is how a task is stopped to resume later (API.md
// "checkpoint").
//   - Signal is sent to the command's process group instead of SIGTERM
//     when the task is stopped to run again (not when it is cancelled or
//     times out, which get SIGTERM); one of CheckpointSignals.
//   - Grace is how long the command may take to exit after it; then it is
//     SIGKILLed. 0: the agent's --grace.
//   - Dir, when set, is a relative path naming the task's checkpoint
//     directory under the agents' --checkpoint-root (a filesystem every
//     node mounts at the same path, so it follows the task between
//     nodes), inside the task's tenant's part of it; the command finds it
//     in HETSCHED_CHECKPOINT_DIR. Without it, the task's attempts on one
//     node share one work directory.
type Checkpoint struct {
	Signal string   `json:"signal,omitempty"`
	Grace  Duration `json:"grace,omitempty"`
	Dir    string   `json:"dir,omitempty"`
}

// CheckpointSignals are the signals a checkpoint may name.
var CheckpointSignals = []string{"SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// MaxCheckpointGrace bounds Checkpoint.Grace.
const MaxCheckpointGrace = Duration(time.Hour)

// maxCheckpointDir bounds Checkpoint.Dir's length.
const maxCheckpointDir = 512

// SignalOrDefault is the checkpoint's signal, SIGTERM when it names none.
func (c *Checkpoint) SignalOrDefault() string {
	if c.Signal == "" {
		return "SIGTERM"
	}
	return c.Signal
}

func (c *Checkpoint) validate() error {
	if c.Signal != "" && !slices.Contains(CheckpointSignals, c.Signal) {
		return errs.Invalid("checkpoint.signal", "must be one of %s, got %q", strings.Join(CheckpointSignals, ", "), truncate(c.Signal))
	}
	if c.Grace < 0 || c.Grace > MaxCheckpointGrace {
		return errs.Invalid("checkpoint.grace", "must be between 0 (the agent's grace) and %s, got %s", MaxCheckpointGrace.D(), c.Grace.D())
	}
	return ValidateCheckpointDir("checkpoint.dir", c.Dir)
}

// ValidateCheckpointDir checks a checkpoint directory: empty, or a clean
// relative path of segments made of letters, digits, '-', '_', '.' and ':'
// (none "." or ".."), at most 512 bytes.
func ValidateCheckpointDir(field, dir string) error {
	if dir == "" {
		return nil
	}
	if len(dir) > maxCheckpointDir {
		return errs.Invalid(field, "longer than %d bytes", maxCheckpointDir)
	}
	if strings.HasPrefix(dir, "/") {
		return errs.Invalid(field, "must be relative to the agents' --checkpoint-root, got an absolute path")
	}
	for _, seg := range strings.Split(dir, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errs.Invalid(field, "must be a clean relative path (no empty, \".\" or \"..\" segments), got %q", truncate(dir))
		}
		for _, c := range []byte(seg) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
				return errs.Invalid(field, "may hold only letters, digits, '-', '_', '.', ':' and '/', got %q", truncate(dir))
			}
		}
	}
	return nil
}

// Locality names where a task's data is: node names, or node labels that
// every holder carries.
type Locality struct {
	Nodes  []string          `json:"nodes,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (l *Locality) validate(field string) error {
	if len(l.Nodes) == 0 && len(l.Labels) == 0 {
		return errs.Invalid(field, "name nodes or labels")
	}
	if len(l.Nodes) > MaxLocalityNodes {
		return errs.Invalid(field+".nodes", "at most %d nodes", MaxLocalityNodes)
	}
	for i, n := range l.Nodes {
		if err := ValidateID(fmt.Sprintf("%s.nodes[%d]", field, i), n); err != nil {
			return err
		}
	}
	if len(l.Labels) > MaxSelectorLabels {
		return errs.Invalid(field+".labels", "at most %d labels", MaxSelectorLabels)
	}
	for _, k := range sortedKeys(l.Labels) {
		if err := ValidateLabelKey(k); err != nil {
			return errs.Invalid(field+".labels."+truncate(k), "%v", err)
		}
		if err := ValidateLabelValue(l.Labels[k]); err != nil {
			return errs.Invalid(field+".labels."+k, "%v", err)
		}
	}
	return nil
}

// Input is one input of a sharded task and where it is held.
type Input struct {
	Name     string    `json:"name"`
	Locality *Locality `json:"locality,omitempty"`
}

// DefaultLocalityWait is how long a task with a locality waits for its
// preferred nodes before taking any node.
const DefaultLocalityWait = 3 * 1e9

// Alternative is another way to run the same task, with its expected speed
// relative to the task's own resources (1.0).
type Alternative struct {
	Resources resource.List `json:"resources"`
	Speed     float64       `json:"speed,omitempty"`
	// DeviceClasses is the alternative's Task.DeviceClasses.
	DeviceClasses map[string]string `json:"deviceClasses,omitempty"`
}

// PriorityOrDefault returns the task's priority, DefaultPriority if unset.
func (t *Task) PriorityOrDefault() int {
	if t.Priority == nil {
		return DefaultPriority
	}
	return *t.Priority
}

// IsPreemptible reports whether the task may be evicted (default true).
func (t *Task) IsPreemptible() bool { return t.Preemptible == nil || *t.Preemptible }

// Requeues reports whether an evicted task goes back to pending (default
// true).
func (t *Task) Requeues() bool { return t.Requeue == nil || *t.Requeue }

// Limits on what one task may carry; every loop over a task's lists is
// bounded by these.
const (
	MaxIDLen          = 253
	MaxAlternatives   = 8
	MaxSelectorLabels = 32
	MaxAffinityTerms  = 8
	MaxTolerations    = 256
	MaxCommandArgs    = 4096
	MaxEnv            = 1024
	MaxDepends        = MaxShards // a fan-in may wait for every shard of a task
	MaxMetadata       = 256
	MaxShards         = 10_000 // tasks one sharded task may become
	MaxLocalityNodes  = 64
	MaxDeviceCount    = 1024 // whole devices of one type in one request
	maxStringLen      = 64 << 10
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Label keys and values are checked on every node and pod the Kubernetes
// front end translates, and on every submitted task: by hand, not by the
// regexp engine (a pattern is in each function's comment, and a property
// test holds them to it).

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// validLabelName matches ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$ (a
// label key's name, and a label value when not empty).
func validLabelName(s string) bool {
	if s == "" || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// validDNSSubdomain matches
// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$: dot-
// separated lower-case labels, each starting and ending with a letter or
// digit.
func validDNSSubdomain(s string) bool {
	lowerAlnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if c := s[i]; !lowerAlnum(c) && c != '-' {
				return false
			}
			continue
		}
		// s[start:i] is one label.
		if i == start || !lowerAlnum(s[start]) || !lowerAlnum(s[i-1]) {
			return false
		}
		start = i + 1
	}
	return true
}

// ValidateUser checks a user name ("" is none).
func ValidateUser(field, user string) error {
	if user == "" {
		return nil
	}
	if len(user) > MaxIDLen || !alnum(user[0]) || strings.IndexFunc(user, func(r rune) bool {
		return r >= 0x80 || !(alnum(byte(r)) || strings.ContainsRune("-_.@", r))
	}) >= 0 {
		return errs.Invalid(field, "%q must be 1-%d letters, digits, '-', '_', '.' or '@', starting with a letter or digit", truncate(user), MaxIDLen)
	}
	return nil
}

// ValidateID checks a client-chosen id.
func ValidateID(field, id string) error {
	if len(id) > MaxIDLen || !validID(id) {
		return errs.Invalid(field, "%q must be 1-%d letters, digits, '-', '_', '.' or ':', starting and ending with a letter or digit", truncate(id), MaxIDLen)
	}
	return nil
}

// validID matches ^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$ without the
// regexp engine (it runs for every submitted task).
func validID(id string) bool {
	if id == "" {
		return false
	}
	if !alnum(id[0]) || !alnum(id[len(id)-1]) {
		return false
	}
	for i := 1; i < len(id)-1; i++ {
		if c := id[i]; !alnum(c) && c != '-' && c != '_' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

// ValidateLabelKey checks a label key: [prefix/]name, as in Kubernetes.
func ValidateLabelKey(k string) error {
	name := k
	if p, n, ok := strings.Cut(k, "/"); ok {
		if len(p) == 0 || len(p) > 253 || !validDNSSubdomain(p) {
			return fmt.Errorf("label key %q: prefix %q is not a DNS subdomain", truncate(k), truncate(p))
		}
		name = n
	}
	if len(name) == 0 || len(name) > 63 || !validLabelName(name) {
		return fmt.Errorf("label key %q: name must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", truncate(k))
	}
	return nil
}

// ValidateLabelValue checks a label value (empty allowed).
func ValidateLabelValue(v string) error {
	if len(v) > 63 || v != "" && !validLabelName(v) {
		return fmt.Errorf("label value %q must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", truncate(v))
	}
	return nil
}

// truncate shortens s to at most 80 bytes for a message, cutting at a rune
// boundary so that the result stays valid UTF-8.
// sortedKeys returns m's keys in order, so that the first error reported
// does not depend on map order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedNames(l resource.List) []resource.Name {
	names := make([]resource.Name, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	i := 80
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// Validate checks every field and returns the first problem as an
// *errs.Error naming the field. It does not modify t.
func (t *Task) Validate() error {
	if err := t.validateProbes(); err != nil {
		return err
	}
	if t.ID != "" {
		if err := ValidateID("id", t.ID); err != nil {
			return err
		}
	}
	if len(t.Name) > MaxIDLen {
		return errs.Invalid("name", "at most %d characters", MaxIDLen)
	}
	if err := ValidateUser("user", t.User); err != nil {
		return err
	}
	if err := ValidateText("name", t.Name); err != nil {
		return err
	}
	if t.Queue != "" {
		if err := ValidateID("queue", t.Queue); err != nil {
			return err
		}
	}
	if t.Priority != nil && (*t.Priority < 0 || *t.Priority > 3) {
		return errs.Invalid("priority", "must be 0 (urgent), 1 (high), 2 (medium) or 3 (low), got %d", *t.Priority)
	}
	if err := ValidateRequest("resources", t.Resources); err != nil {
		return err
	}
	if err := validateDeviceClasses("deviceClasses", t.DeviceClasses, t.Resources); err != nil {
		return err
	}
	if len(t.Alternatives) > MaxAlternatives {
		return errs.Invalid("alternatives", "at most %d alternatives, got %d", MaxAlternatives, len(t.Alternatives))
	}
	for i, a := range t.Alternatives {
		f := fmt.Sprintf("alternatives[%d]", i)
		if len(a.Resources) == 0 {
			return errs.Invalid(f+".resources", "an alternative must request resources")
		}
		if err := ValidateRequest(f+".resources", a.Resources); err != nil {
			return err
		}
		if a.Speed < 0 || math.IsNaN(a.Speed) || math.IsInf(a.Speed, 0) || a.Speed > 1e6 {
			return errs.Invalid(f+".speed", "must be a positive number relative to resources (0 or absent means 1.0), got %v", a.Speed)
		}
		if err := validateDeviceClasses(f+".deviceClasses", a.DeviceClasses, a.Resources); err != nil {
			return err
		}
	}
	if len(t.NodeSelector) > MaxSelectorLabels {
		return errs.Invalid("nodeSelector", "at most %d labels", MaxSelectorLabels)
	}
	for _, k := range sortedKeys(t.NodeSelector) {
		v := t.NodeSelector[k]
		if err := ValidateLabelKey(k); err != nil {
			return errs.Invalid("nodeSelector."+truncate(k), "%v", err)
		}
		// A value may list alternatives separated by '|' ("V100|A100").
		for _, alt := range strings.Split(v, "|") {
			if err := ValidateLabelValue(alt); err != nil {
				return errs.Invalid("nodeSelector."+k, "%v", err)
			}
		}
	}
	if len(t.NodeAffinity) > MaxAffinityTerms {
		return errs.Invalid("nodeAffinity", "at most %d terms", MaxAffinityTerms)
	}
	for i, term := range t.NodeAffinity {
		sel, err := ParseSelector(term)
		if err != nil {
			return errs.Invalid(fmt.Sprintf("nodeAffinity[%d]", i), "%v", err)
		}
		if sel.Empty() {
			return errs.Invalid(fmt.Sprintf("nodeAffinity[%d]", i), "an empty term would match every node: leave it out")
		}
	}
	if t.Shards != 0 || t.Inputs != nil {
		return errs.Invalid("shards", "only a job's task may be sharded (POST /api/v1/jobs)")
	}
	if t.Locality != nil {
		if err := t.Locality.validate("locality"); err != nil {
			return err
		}
	}
	if t.LocalityWait < 0 {
		return errs.Invalid("localityWait", "must not be negative")
	}
	if len(t.Tolerations) > MaxTolerations {
		return errs.Invalid("tolerations", "at most %d tolerations", MaxTolerations)
	}
	for i, s := range t.Tolerations {
		if _, err := ParseToleration(s); err != nil {
			return errs.Invalid(fmt.Sprintf("tolerations[%d]", i), "%v", err)
		}
	}
	if len(t.Command) > MaxCommandArgs {
		return errs.Invalid("command", "at most %d arguments", MaxCommandArgs)
	}
	for i, a := range t.Command {
		if len(a) > maxStringLen {
			return errs.Invalid(fmt.Sprintf("command[%d]", i), "longer than %d bytes", maxStringLen)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return errs.Invalid(fmt.Sprintf("command[%d]", i), "holds a NUL byte, which no program argument can carry")
		}
	}
	if len(t.Command) > 0 && t.Command[0] == "" {
		return errs.Invalid("command[0]", "the program must not be empty")
	}
	if len(t.Env) > MaxEnv {
		return errs.Invalid("env", "at most %d variables", MaxEnv)
	}
	for _, k := range sortedKeys(t.Env) {
		v := t.Env[k]
		if !envName.MatchString(k) || len(k) > 256 {
			return errs.Invalid("env."+truncate(k), "not a valid environment variable name")
		}
		if len(v) > maxStringLen {
			return errs.Invalid("env."+k, "longer than %d bytes", maxStringLen)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return errs.Invalid("env."+k, "holds a NUL byte, which no environment variable can carry")
		}
	}
	for _, d := range []struct {
		f string
		v Duration
	}{{"duration", t.Duration}, {"timeout", t.Timeout}, {"queueTimeout", t.QueueTimeout}, {"lease", t.Lease}} {
		if d.v < 0 && !(d.f == "lease" && d.v == NoExpiry) {
			return errs.Invalid(d.f, "must not be negative, got %s", d.v.D())
		}
	}
	if len(t.Command) > 0 && t.Lease != 0 {
		return errs.Invalid("lease", "a task with a command is not a lease; drop lease or command")
	}
	if t.Lease != 0 && t.Timeout != 0 {
		return errs.Invalid("timeout", "a lease ends when it is completed, cancelled or not renewed; timeout applies to tasks that run a command")
	}
	if err := validateDepends("depends", t.Depends, t.ID, ""); err != nil {
		return err
	}
	if t.Checkpoint != nil {
		if len(t.Command) == 0 {
			return errs.Invalid("checkpoint", "only a task with a command can be checkpointed")
		}
		if err := t.Checkpoint.validate(); err != nil {
			return err
		}
	}
	if err := t.validateConstraints(); err != nil {
		return err
	}
	if len(t.Metadata) > MaxMetadata {
		return errs.Invalid("metadata", "at most %d entries", MaxMetadata)
	}
	for _, k := range sortedKeys(t.Metadata) {
		v := t.Metadata[k]
		if len(k) == 0 || len(k) > 253 {
			return errs.Invalid("metadata", "keys must be 1-253 characters")
		}
		if err := ValidateText("metadata", k); err != nil {
			return errs.Invalid("metadata", "key %q: %s", k, errs.Clip(err.(*errs.Error).Message))
		}
		if len(v) > maxStringLen {
			return errs.Invalid("metadata."+k, "longer than %d bytes", maxStringLen)
		}
		if strings.ContainsAny(v, "\x00\x1b") {
			return errs.Invalid("metadata."+k, "holds a NUL or an escape character (ESC), which would reach terminals")
		}
	}
	return nil
}

// ValidateRequest checks a resource request: device resources ask for a
// fraction of one device (0 < q < 1) or whole devices.
func ValidateRequest(field string, l resource.List) error {
	ok := true
	for n, q := range l {
		if requestProblem(n, q) != "" {
			ok = false
			break
		}
	}
	if ok {
		return nil
	}
	for _, n := range sortedNames(l) { // report the first problem in name order
		if p := requestProblem(n, l[n]); p != "" {
			return errs.Invalid(field+"."+string(n), "%s", p)
		}
	}
	return nil
}

func requestProblem(n resource.Name, q int64) string {
	counted := n.IsExtended() && n.Scale() == resource.Milli // huge pages are bytes
	switch {
	case q < 0:
		return "must not be negative"
	case counted && q > 1000 && q%1000 != 0:
		return resource.FormatMilli(q) + ": a device request is a fraction of one device (below 1) or a whole number of devices"
	case counted && q/1000 > MaxDeviceCount:
		return fmt.Sprintf("at most %d devices", MaxDeviceCount)
	}
	return ""
}

// ValidateText checks a name meant for people and terminals: valid UTF-8
// without control characters (C0, DEL, C1; an ANSI escape starts with
// ESC), which would rewrite the terminal of whoever lists it.
func ValidateText(field, s string) error {
	if !utf8.ValidString(s) {
		return errs.Invalid(field, "not valid UTF-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return errs.Invalid(field, "holds the control character %U at byte %d (escape sequences and control characters reach terminals)", r, i)
		}
	}
	return nil
}

// MaxDeviceClasses bounds a device's classes and an option's
// deviceClasses.
const MaxDeviceClasses = 16

// ValidateDeviceClass checks a device class name (a label value, not
// empty).
func ValidateDeviceClass(c string) error {
	if c == "" {
		return fmt.Errorf("a device class must not be empty")
	}
	return ValidateLabelValue(c)
}

// validateDeviceClasses checks an option's deviceClasses: each names an
// extended resource the option requests, and a valid class.
func validateDeviceClasses(field string, dc map[string]string, req resource.List) error {
	if len(dc) > MaxDeviceClasses {
		return errs.Invalid(field, "at most %d entries", MaxDeviceClasses)
	}
	for _, k := range sortedKeys(dc) {
		if _, ok := req[resource.Name(k)]; !ok || !resource.Name(k).IsExtended() {
			return errs.Invalid(field+"."+truncate(k), "names no device resource the request asks for")
		}
		if err := ValidateDeviceClass(dc[k]); err != nil {
			return errs.Invalid(field+"."+k, "%v", err)
		}
	}
	return nil
}
