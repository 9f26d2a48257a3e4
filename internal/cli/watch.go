package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/serverlist"
)

// Limits of a watch.
const (
	// maxBatch is how many queued events a watch takes at once.
	maxBatch = 1000
	// maxFetches is how many objects a watch refetches per batch; rows
	// past it are printed from their events alone.
	maxFetches = 200
	// maxTracked bounds the rows a watch remembers (to skip repeats).
	maxTracked = MaxList
	// queueEvery is how often a queues watch lists the queues again, at
	// most.
	queueEvery = time.Second
)

// WatchOptions say what a watch (get KIND -w) follows.
type WatchOptions struct {
	Kind   string      // tasks, jobs, nodes or queues
	List   ListOptions // tasks: all of it; jobs: State; nodes: Selector
	Output string
}

// Watch prints the objects of a kind, as get does, then a row for each
// change as it happens (kubectl get -w): the header once, then one row
// per change, from GET /api/v1/events. A changed object is fetched again
// for its columns, and shown with the state, node and reason its event
// reports; a queues watch lists the queues again after task changes and
// prints those that changed. Filters (state, selector) apply to the
// changes too. A dropped stream is resumed after its last event (up to
// maxReconnects failures in a row, with the server's retry delay). It
// returns when ctx ends.
func Watch(ctx context.Context, c *Client, w, note io.Writer, o WatchOptions) error {
	wt, err := newWatcher(c, w, note, o)
	if err != nil {
		return err
	}
	// The stream opens first, so that no change between the listing and
	// the stream is missed (a few may be shown twice).
	st := newStream(c)
	cn, err := st.connect(ctx)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if err := wt.list(ctx, true); err != nil {
		cn.close()
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, maxBatch)
	done := make(chan error, 1)
	go func() { done <- st.run(sctx, cn, events) }()
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-done
			return nil
		case err := <-done:
			return err
		case ev := <-events:
			batch := []event{ev}
			for len(batch) < maxBatch && len(events) > 0 {
				batch = append(batch, <-events)
			}
			if err := wt.apply(ctx, batch); err != nil {
				cancel()
				<-done
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// watcher prints a watch's rows.
type watcher struct {
	c      *Client
	w      io.Writer
	note   io.Writer
	o      WatchOptions
	sel    api.Selector
	g      grid
	shown  map[string]string // kind/name: its last row (repeats are skipped)
	listed time.Time         // queues: the last listing
	warned bool              // a refetch failure was noted
}

func newWatcher(c *Client, w, note io.Writer, o WatchOptions) (*watcher, error) {
	switch o.Kind {
	case "tasks", "nodes":
	case "jobs", "queues":
		if o.List.Selector != "" {
			return nil, fmt.Errorf("--selector: %s have no labels (only tasks and nodes do)", o.Kind)
		}
	default:
		return nil, fmt.Errorf("watch: unknown kind %q (tasks, jobs, nodes or queues)", o.Kind)
	}
	sel, err := ParseSelector(o.List.Selector)
	if err != nil {
		return nil, err
	}
	wt := &watcher{c: c, w: w, note: note, o: o, sel: sel, g: grid{w: w}, shown: map[string]string{}}
	// The STATE column is as wide as the longest state from the start, so
	// that the rows of later changes line up.
	header := map[string][]string{"tasks": taskHeader(o.Output == Wide), "jobs": jobHeader(o.Output == Wide), "nodes": nodeHeader(o.Output == Wide)}[o.Kind]
	for i, h := range header {
		if h == "STATE" {
			seed := make([]string, len(header)+1)
			seed[i] = "succeeded"
			wt.g.fit(seed)
		}
	}
	return wt, nil
}

// list prints the kind's objects as get does (with the header when
// first; again after a resync, without it).
func (wt *watcher) list(ctx context.Context, first bool) error {
	out := wt.o.Output
	switch wt.o.Kind {
	case "tasks":
		shown, err := getTasks(ctx, wt.c, wt.note, wt.o.List)
		if err != nil {
			return err
		}
		if !tabular(out) && out != Name {
			return printListed(wt.w, shown, out)
		}
		var fresh []task
		for _, l := range shown {
			if wt.fresh("task/"+l.ID, taskRow(l.task, false, time.Time{})) {
				fresh = append(fresh, l.task)
			}
		}
		return wt.taskRows(fresh, first)
	case "jobs":
		return wt.listJobs(ctx, first)
	case "nodes":
		raw, nodes, err := listNodes(ctx, wt.c, wt.o.List.Selector)
		if err != nil {
			return err
		}
		if !tabular(out) && out != Name {
			return printTasksRaw(wt.w, raw, out)
		}
		var fresh []nodeView
		for _, n := range nodes {
			if wt.fresh("node/"+n.Name, nodeRow(n, false)) {
				fresh = append(fresh, n)
			}
		}
		return printNodes(&wt.g, fresh, out, first)
	}
	return wt.listQueues(ctx, first)
}

func (wt *watcher) listJobs(ctx context.Context, first bool) error {
	all, err := listJobs(ctx, wt.c, wt.o.List.State)
	if err != nil {
		return err
	}
	if out := wt.o.Output; !tabular(out) && out != Name {
		b, _ := json.Marshal(map[string]any{"jobs": all})
		return printTasksRaw(wt.w, b, out)
	}
	var fresh []job
	for _, raw := range all {
		var j job
		if err := json.Unmarshal(raw, &j); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", wt.c.Server, err)
		}
		if wt.fresh("job/"+j.ID, jobRow(j, false)) {
			fresh = append(fresh, j)
		}
	}
	return printJobs(&wt.g, fresh, wt.o.Output, first)
}

// listQueues prints the queues whose rows changed since they were last
// printed (all of them, with the header, the first time).
func (wt *watcher) listQueues(ctx context.Context, first bool) error {
	wt.listed = time.Now()
	raw, qs, err := listQueues(ctx, wt.c)
	if err != nil {
		return err
	}
	out := wt.o.Output
	var fresh []queueView
	var objs []json.RawMessage
	var body struct {
		Queues []json.RawMessage `json:"queues"`
	}
	_ = json.Unmarshal(raw, &body)
	for i, q := range qs {
		if wt.fresh("queue/"+q.Name, queueRow(q, qs, false)) {
			fresh = append(fresh, q)
			if i < len(body.Queues) {
				objs = append(objs, body.Queues[i])
			}
		}
	}
	if first && !tabular(out) && out != Name {
		return printTasksRaw(wt.w, raw, out)
	}
	if !tabular(out) && out != Name {
		for _, o := range objs {
			if err := printObject(wt.w, o, out); err != nil {
				return err
			}
		}
		return nil
	}
	return printQueues(&wt.g, fresh, qs, out, first)
}

// fresh records row as key's last and reports whether it differs from
// the one before.
func (wt *watcher) fresh(key string, row []string) bool {
	s := strings.Join(row, "\t")
	if old, ok := wt.shown[key]; ok && old == s {
		return false
	}
	if len(wt.shown) >= maxTracked {
		clear(wt.shown)
	}
	wt.shown[key] = s
	return true
}

func (wt *watcher) taskRows(ts []task, header bool) error {
	if wt.o.Output == Name {
		return printTaskTable(wt.w, ts, Name)
	}
	wide, now := wt.o.Output == Wide, time.Now()
	var rows [][]string
	if header {
		rows = append(rows, taskHeader(wide))
	}
	for _, t := range ts {
		rows = append(rows, taskRow(t, wide, now))
	}
	return wt.g.write(rows...)
}

// apply prints the rows of a batch of events.
func (wt *watcher) apply(ctx context.Context, batch []event) error {
	for _, ev := range batch {
		if ev.Kind == kindResync {
			fmt.Fprintln(wt.note, "watch: the server no longer has the missed events (it restarted?); listing again")
			if err := wt.list(ctx, false); err != nil {
				return err
			}
		}
	}
	switch wt.o.Kind {
	case "tasks":
		return wt.applyTasks(ctx, batch)
	case "jobs":
		return wt.applyJobs(ctx, batch)
	case "nodes":
		return wt.applyNodes(ctx, batch)
	}
	for _, ev := range batch {
		if ev.Kind == "task" || ev.Kind == "job" {
			if !serverlist.Sleep(ctx, time.Until(wt.listed.Add(queueEvery))) {
				return nil
			}
			return wt.listQueues(ctx, false)
		}
	}
	return nil
}

// fetched is an object a watch fetched again: its raw view, or the error.
type fetched struct {
	raw json.RawMessage
	err error
}

// refetch GETs path once per batch (cache), at most maxFetches times.
func (wt *watcher) refetch(ctx context.Context, cache map[string]*fetched, path string) *fetched {
	if f, ok := cache[path]; ok {
		return f
	}
	f := &fetched{err: fmt.Errorf("not fetched: more than %d changes at once", maxFetches)}
	if len(cache) < maxFetches {
		f.err = nil
		if _, err := wt.c.Do(ctx, "GET", path, nil, &f.raw); err != nil {
			f.err = err
			if !notFound(err) && !wt.warned && ctx.Err() == nil {
				wt.warned = true
				fmt.Fprintf(wt.note, "watch: %v (rows show only what their events say)\n", err)
			}
		}
	}
	cache[path] = f
	return f
}

// overlay sets an object's state, node and reason to its event's (and
// drops its devices when the event has no node).
func overlay(raw json.RawMessage, ev event) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	m["state"] = ev.State
	for k, v := range map[string]string{"node": ev.Node, "reason": ev.Reason} {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	if ev.Node == "" && ev.Kind == "task" {
		delete(m, "devices")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// emit prints one changed object: its row, name or raw object.
func (wt *watcher) emit(key string, row []string, raw json.RawMessage) error {
	if !wt.fresh(key, row) {
		return nil
	}
	switch out := wt.o.Output; out {
	case Name:
		_, err := fmt.Fprintln(wt.w, key)
		return err
	case JSON, YAML:
		return printObject(wt.w, raw, out)
	}
	return nil
}

func (wt *watcher) applyTasks(ctx context.Context, batch []event) error {
	cache := map[string]*fetched{}
	for _, ev := range batch {
		if ev.Kind != "task" || (wt.o.List.State != "" && !slices.Contains(strings.Split(wt.o.List.State, ","), ev.State)) {
			continue
		}
		f := wt.refetch(ctx, cache, "/api/v1/tasks/"+url.PathEscape(ev.ID))
		if notFound(f.err) {
			continue
		}
		t := task{ID: ev.ID}
		raw, _ := json.Marshal(ev)
		if f.err == nil {
			if err := json.Unmarshal(f.raw, &t); err != nil {
				return fmt.Errorf("unexpected answer from %s: %w", wt.c.Server, err)
			}
			raw = overlay(f.raw, ev)
		} else if !wt.sel.Empty() || wt.o.List.User != "" {
			continue // its metadata and user are unknown
		}
		if !wt.sel.MatchesMap(t.Metadata) || (wt.o.List.User != "" && t.User != wt.o.List.User) {
			continue
		}
		t.State, t.Node, t.Reason = ev.State, ev.Node, ev.Reason
		if ev.Node == "" {
			t.Devices = nil
		}
		if err := wt.emitRow("task/"+t.ID, taskRow(t, false, time.Time{}), raw, func() []string { return taskRow(t, true, time.Now()) }); err != nil {
			return err
		}
	}
	return nil
}

// emitRow prints a change: row in a table, or wideRow with -o wide, or
// the name or raw object; repeats of the last row are skipped.
func (wt *watcher) emitRow(key string, row []string, raw json.RawMessage, wideRow func() []string) error {
	if !tabular(wt.o.Output) {
		return wt.emit(key, row, raw)
	}
	if !wt.fresh(key, row) {
		return nil
	}
	if wt.o.Output == Wide {
		row = wideRow()
	}
	return wt.g.write(row)
}

func (wt *watcher) applyJobs(ctx context.Context, batch []event) error {
	cache := map[string]*fetched{}
	for _, ev := range batch {
		if ev.Kind != "job" || (wt.o.List.State != "" && ev.State != wt.o.List.State) {
			continue
		}
		f := wt.refetch(ctx, cache, "/api/v1/jobs/"+url.PathEscape(ev.ID)+"?tasks=false")
		if notFound(f.err) {
			continue
		}
		j := job{ID: ev.ID}
		raw, _ := json.Marshal(ev)
		if f.err == nil {
			if err := json.Unmarshal(f.raw, &j); err != nil {
				return fmt.Errorf("unexpected answer from %s: %w", wt.c.Server, err)
			}
			raw = overlay(f.raw, ev)
		}
		j.State = ev.State
		if err := wt.emitRow("job/"+j.ID, jobRow(j, false), raw, func() []string { return jobRow(j, true) }); err != nil {
			return err
		}
	}
	return nil
}

func (wt *watcher) applyNodes(ctx context.Context, batch []event) error {
	cache := map[string]*fetched{}
	for _, ev := range batch {
		if ev.Kind != "node" {
			continue
		}
		key := "node/" + ev.ID
		f := wt.refetch(ctx, cache, "/api/v1/nodes/"+url.PathEscape(ev.ID))
		n := nodeView{Name: ev.ID}
		raw, _ := json.Marshal(ev)
		switch {
		case f.err == nil:
			if err := json.Unmarshal(f.raw, &n); err != nil {
				return fmt.Errorf("unexpected answer from %s: %w", wt.c.Server, err)
			}
			raw = overlay(f.raw, ev)
			if !wt.sel.Matches(n.label) {
				continue
			}
		case !wt.sel.Empty():
			if _, was := wt.shown[key]; !was {
				continue // removed (or not fetched): shown only if it was before
			}
		}
		n.State = ev.State
		if err := wt.emitRow(key, nodeRow(n, false), raw, func() []string { return nodeRow(n, true) }); err != nil {
			return err
		}
	}
	return nil
}
