package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// describeKinds are describe's kinds.
const describeKinds = "task, job, node, queue or service"

// Describe prints one object of kind (task, job, node or queue; plurals
// too) as a page to read, like kubectl describe; -o json and yaml print
// the server's object, -o name its kind/NAME.
func Describe(ctx context.Context, c *Client, w io.Writer, kind, name, output string) error {
	var path string
	switch strings.TrimSuffix(kind, "s") {
	case "task":
		path = "/api/v1/tasks/" + url.PathEscape(name)
	case "job":
		path = "/api/v1/jobs/" + url.PathEscape(name)
	case "node":
		path = "/api/v1/nodes/" + url.PathEscape(name)
	case "queue":
		return describeQueue(ctx, c, w, name, output)
	case "service":
		path = "/api/v1/services/" + url.PathEscape(name)
	default:
		return fmt.Errorf("describe: unknown kind %q (%s)", kind, describeKinds)
	}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", path, nil, &raw); err != nil {
		return err
	}
	k := strings.TrimSuffix(kind, "s")
	switch output {
	case JSON, YAML:
		return printTasksRaw(w, raw, output)
	case Name:
		_, err := fmt.Fprintln(w, k+"/"+name)
		return err
	}
	p := &page{w: w, now: time.Now()}
	var err error
	switch k {
	case "task":
		err = describeTask(p, raw)
	case "job":
		err = describeJob(p, raw)
	case "service":
		err = describeService(ctx, c, p, raw)
	default:
		err = describeNode(ctx, c, p, raw)
	}
	if err != nil {
		return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	return p.err
}

// page writes a describe page: "Key:  value" lines aligned, and indented
// tables.
type page struct {
	w   io.Writer
	now time.Time
	err error
}

// keyWidth is the column where a page's values start.
const keyWidth = 17

func (p *page) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// field writes "Key:  value" ("-" for an empty value).
func (p *page) field(key, value string) {
	p.printf("%-*s%s\n", keyWidth, key+":", dash(value))
}

// when writes a time field with its age: "2026-…Z (5m ago)"; nothing
// for a time that has not come.
func (p *page) when(key string, t *time.Time) {
	if t == nil || t.IsZero() {
		return
	}
	p.field(key, fmt.Sprintf("%s (%s ago)", t.Local().Format(time.RFC3339), age(*t, p.now)))
}

// table writes a titled table indented by two spaces, or "Title: <none>".
func (p *page) table(title string, header []string, rows [][]string) {
	if len(rows) == 0 {
		p.field(title, "<none>")
		return
	}
	p.printf("%s:\n", title)
	var b strings.Builder
	g := grid{w: &b}
	_ = g.write(append([][]string{header}, rows...)...) // a Builder does not fail
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			p.printf("  %s", l)
		}
	}
}

// attempt is one ended attempt of a task (the view's "attempts").
type attempt struct {
	Attempt   int         `json:"attempt"`
	Node      string      `json:"node"`
	Devices   []deviceRef `json:"devices"`
	Scheduled *time.Time  `json:"scheduled"`
	Started   *time.Time  `json:"started"`
	Finished  *time.Time  `json:"finished"`
	ExitCode  *int        `json:"exitCode"`
	Reason    string      `json:"reason"`
	State     string      `json:"state"`
	Stop      *struct {
		Signal  string  `json:"signal"`
		Seconds float64 `json:"seconds"`
		Forced  bool    `json:"forced"`
	} `json:"stop"`
}

// reason is the attempt's reason with how its command took the stop.
func (a *attempt) reason() string {
	r := dash(a.Reason)
	if st := a.Stop; st != nil {
		how := fmt.Sprintf("exited %s after %s", secondsText(st.Seconds), st.Signal)
		if st.Forced {
			how = fmt.Sprintf("SIGKILLed %s after %s", secondsText(st.Seconds), st.Signal)
		}
		r += " (" + how + ")"
	}
	return r
}

// secondsText writes seconds as a rounded duration.
func secondsText(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Millisecond).String()
}

// taskPage is the task view as describe reads it.
type taskPage struct {
	task
	Tenant       string            `json:"tenant"`
	Resources    map[string]any    `json:"resources"`
	Alternatives []alternative     `json:"alternatives"`
	Chosen       int               `json:"chosen"`
	NodeSelector map[string]string `json:"nodeSelector"`
	Tolerations  []string          `json:"tolerations"`
	Command      []string          `json:"command"`
	Depends      []string          `json:"depends"`
	Duration     string            `json:"duration"`
	Timeout      string            `json:"timeout"`
	QueueTimeout string            `json:"queueTimeout"`
	Lease        string            `json:"lease"`
	Preemptible  *bool             `json:"preemptible"`
	Scheduled    *time.Time        `json:"scheduled"`
	Started      *time.Time        `json:"started"`
	Finished     *time.Time        `json:"finished"`
	ExitCode     *int              `json:"exitCode"`
	Attempts     []attempt         `json:"attempts"`
	Queueing     *queueing         `json:"queueing"`
	Checkpoint   *struct {
		Signal string `json:"signal"`
		Grace  string `json:"grace"`
		Dir    string `json:"dir"`
	} `json:"checkpoint"`
	Restarts   int `json:"restarts"`
	Preemption *struct {
		Count          int     `json:"count"`
		StopSeconds    float64 `json:"stopSeconds"`
		RestartSeconds float64 `json:"restartSeconds"`
	} `json:"preemption"`
}

// queueing is where a pending task stands (its view's "queueing").
type queueing struct {
	Position       int        `json:"position"`
	PositionAtMost bool       `json:"positionAtMost"`
	Ahead          int        `json:"ahead"`
	EstimatedStart *time.Time `json:"estimatedStart"`
}

// describeQueueing writes a pending task's place and estimated start.
func describeQueueing(p *page, q *queueing) {
	if q == nil {
		return
	}
	pos := strconv.Itoa(q.Position)
	if q.PositionAtMost {
		pos = "at most " + pos
	}
	p.field("Queue Position", fmt.Sprintf("%s among its class, %d waiting in more important tiers", pos, q.Ahead))
	if q.EstimatedStart == nil {
		p.field("Estimated Start", "unknown")
		return
	}
	p.field("Estimated Start", fmt.Sprintf("%s (in %s)", q.EstimatedStart.Local().Format(time.RFC3339), age(p.now, *q.EstimatedStart)))
}

type alternative struct {
	Resources map[string]any `json:"resources"`
	Speed     float64        `json:"speed"`
}

// tierName is a priority with its tier: "1 (high)".
func tierName(p int) string {
	names := [...]string{"urgent", "high", "medium", "low"}
	if p >= 0 && p < len(names) {
		return fmt.Sprintf("%d (%s)", p, names[p])
	}
	return strconv.Itoa(p)
}

// current is the number of the task's current attempt (0 is the first
// run, as the server counts).
func (t *taskPage) current() int { return t.Attempt }

func describeTask(p *page, raw json.RawMessage) error {
	var t taskPage
	if err := json.Unmarshal(raw, &t); err != nil {
		return err
	}
	p.field("ID", t.ID)
	p.field("Name", t.Name)
	if t.Tenant != "" {
		p.field("Tenant", t.Tenant)
	} else if tenant, _, ok := strings.Cut(t.ID, ":"); ok {
		p.field("Tenant", tenant)
	}
	p.field("Queue", queueOf(t.Queue))
	p.field("Priority", tierName(prio(t.Priority)))
	p.field("State", t.State)
	p.field("Reason", t.Reason)
	describeQueueing(p, t.Queueing)
	p.field("Node", t.Node)
	p.field("Devices", t.devices())
	p.field("Resources", human(t.Resources))
	for i, a := range t.Alternatives {
		s := human(a.Resources)
		if a.Speed != 0 {
			s += fmt.Sprintf(" (speed %g)", a.Speed)
		}
		if t.Chosen == i {
			s += " (chosen)"
		}
		p.field(fmt.Sprintf("Alternative %d", i), s)
	}
	if len(t.NodeSelector) > 0 {
		p.field("Node Selector", labelList(t.NodeSelector))
	}
	if len(t.Tolerations) > 0 {
		p.field("Tolerations", strings.Join(t.Tolerations, ","))
	}
	if len(t.Metadata) > 0 {
		p.field("Metadata", labelList(t.Metadata))
	}
	if len(t.Depends) > 0 {
		p.field("Depends", strings.Join(t.Depends, ","))
	}
	describeRun(p, &t)
	p.when("Submitted", &t.Submitted)
	p.when("Scheduled", t.Scheduled)
	p.when("Started", t.Started)
	p.when("Finished", t.Finished)
	if t.ExitCode != nil {
		p.field("Exit Code", strconv.Itoa(*t.ExitCode))
	}
	p.table("Attempts", []string{"ATTEMPT", "NODE", "DEVICES", "STARTED", "FINISHED", "EXIT", "REASON"}, t.attemptRows(p.now))
	p.table("Events", []string{"AGE", "EVENT"}, t.eventRows(p.now))
	return nil
}

// describeRun writes what runs (the command, or that it is a lease) and
// its time limits.
func describeRun(p *page, t *taskPage) {
	if len(t.Command) > 0 {
		p.field("Command", strings.Join(t.Command, " "))
	} else {
		lease := "a lease (no command: the holder uses the devices)"
		switch t.Lease {
		case "":
		case "never":
			lease += ", held until completed or cancelled"
		default:
			lease += ", ends " + t.Lease + " after its placement or last renewal"
		}
		p.field("Command", lease)
	}
	for _, f := range [][2]string{{"Duration", t.Duration}, {"Timeout", t.Timeout}, {"Queue Timeout", t.QueueTimeout}} {
		if f[1] != "" {
			p.field(f[0], f[1])
		}
	}
	if t.Preemptible != nil {
		p.field("Preemptible", strconv.FormatBool(*t.Preemptible))
	}
	if c := t.Checkpoint; c != nil {
		sig, grace := c.Signal, c.Grace
		if sig == "" {
			sig = "SIGTERM"
		}
		if grace == "" {
			grace = "the agent's"
		}
		text := sig + ", grace " + grace
		if c.Dir != "" {
			text += ", dir " + c.Dir
		}
		p.field("Checkpoint", text)
	}
	if t.Restarts > 0 {
		p.field("Restarts", strconv.Itoa(t.Restarts))
	}
	if pc := t.Preemption; pc != nil {
		p.field("Preemption", fmt.Sprintf("%d times: %s stopping, %s to run again", pc.Count, secondsText(pc.StopSeconds), secondsText(pc.RestartSeconds)))
	}
}

// ago is t's age with "ago", or "-".
func ago(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return age(*t, now) + " ago"
}

func exitCode(c *int) string {
	if c == nil {
		return "-"
	}
	return strconv.Itoa(*c)
}

// attemptRows is the Attempts table: the earlier attempts, then the
// current one when it was placed.
func (t *taskPage) attemptRows(now time.Time) [][]string {
	var rows [][]string
	for _, a := range t.Attempts {
		devs := task{Devices: a.Devices}.devices()
		n := strconv.Itoa(a.Attempt)
		if a.State != "" {
			n += " (" + a.State + ")"
		}
		rows = append(rows, []string{n, dash(a.Node), dash(devs), ago(a.Started, now), ago(a.Finished, now), exitCode(a.ExitCode), a.reason()})
	}
	if t.Scheduled != nil || t.Node != "" {
		reason := t.State
		if t.Reason != "" {
			reason += ": " + t.Reason
		}
		rows = append(rows, []string{strconv.Itoa(t.current()) + " (current)", dash(t.Node), dash(t.devices()), ago(t.Started, now), ago(t.Finished, now), exitCode(t.ExitCode), reason})
	}
	return rows
}

// eventRows is the Events table, derived from the timestamps: oldest
// first.
func (t *taskPage) eventRows(now time.Time) [][]string {
	type ev struct {
		at  time.Time
		msg string
	}
	evs := []ev{{t.Submitted, "submitted"}}
	add := func(at *time.Time, msg string) {
		if at != nil && !at.IsZero() {
			evs = append(evs, ev{*at, msg})
		}
	}
	for _, a := range t.Attempts {
		n := strconv.Itoa(a.Attempt)
		add(a.Scheduled, "attempt "+n+": scheduled on "+placement(a.Node, a.Devices))
		add(a.Started, "attempt "+n+": started")
		end := "attempt " + n + ": ended"
		if a.ExitCode != nil {
			end += fmt.Sprintf(" (exit %d)", *a.ExitCode)
		}
		if a.Reason != "" {
			end += ": " + a.Reason
		}
		add(a.Finished, end)
	}
	n := strconv.Itoa(t.current())
	add(t.Scheduled, "attempt "+n+": scheduled on "+placement(t.Node, t.Devices))
	add(t.Started, "attempt "+n+": started")
	end := t.State
	if t.Scheduled != nil {
		end = "attempt " + n + ": " + t.State
	}
	if t.ExitCode != nil {
		end += fmt.Sprintf(" (exit %d)", *t.ExitCode)
	}
	if t.Reason != "" {
		end += ": " + t.Reason
	}
	add(t.Finished, end)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	rows := make([][]string, len(evs))
	for i, e := range evs {
		rows[i] = []string{age(e.at, now), e.msg}
	}
	return rows
}

// placement is "NODE (gpu:0-3)", or NODE alone without devices.
func placement(node string, devs []deviceRef) string {
	if d := (task{Devices: devs}).devices(); d != "" {
		return dash(node) + " (" + d + ")"
	}
	return dash(node)
}
