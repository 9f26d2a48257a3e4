package engine

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// AccountingQuery selects accounting records: those of tasks that
// finished in [Since, Until) for History; for UsageReport, the runs' time in
// [Since, Until) (zero Until: now). The string filters match when empty;
// States matches any of them.
type AccountingQuery struct {
	Since, Until                          time.Time
	Tenant, User, Queue, Job, Node, Model string
	States                                []string
	// Cursor continues a History listing after the key it names; Limit
	// bounds a page.
	Cursor string
	Limit  int
	// By are UsageReport's group fields (api.UsageGroups).
	By []string
}

// Bounds on what one read looks at: a History page scans at most
// maxHistoryScan records (then answers with what it found and a cursor),
// a Usage report at most maxUsageScan (then refuses: the range is too
// wide).
const (
	maxHistoryScan = 100_000
	maxUsageScan   = 10_000_000
)

func (q *AccountingQuery) match(a *api.AccountingRecord) bool {
	return (q.Tenant == "" || a.Tenant == q.Tenant) && (q.User == "" || a.User == q.User) &&
		(q.Queue == "" || a.Queue == q.Queue) && (q.Job == "" || a.Job == q.Job) &&
		(q.Node == "" || a.Node == q.Node) && (q.Model == "" || a.Model == q.Model) &&
		(len(q.States) == 0 || slices.Contains(q.States, a.State))
}

// History lists the accounting records of the tasks that finished in
// [q.Since, q.Until), oldest first, at most q.Limit; next continues the
// listing ("" at its end).
func (a *Accounting) History(ctx context.Context, q AccountingQuery) (out []api.AccountingRecord, next string, err error) {
	if a.volatile {
		return nil, "", errNoAccounting()
	}
	from, to := accountingTimeKey(q.Since), ""
	if !q.Until.IsZero() {
		to = accountingTimeKey(q.Until)
	}
	if q.Cursor != "" {
		if len(q.Cursor) > store.MaxKeyLen || strings.ContainsRune(q.Cursor, 0) {
			return nil, "", errs.Invalid("cursor", "not a cursor of this listing")
		}
		from = max(from, q.Cursor+"\x00")
	}
	scanned := 0
	err = scanStore(ctx, a.st, KindAccounting, from, to, func(k string, v []byte) (bool, error) {
		scanned++
		rec, err := decodeAccounting(k, v)
		if err != nil {
			return false, err
		}
		if q.match(&rec) {
			out = append(out, rec)
		}
		if len(out) >= q.Limit || scanned >= maxHistoryScan {
			next = k
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// UsageReport is the usage of the work matching q (by its record's fields) in
// [q.Since, q.Until): every run of a finished task, and of a placed one
// until now, counts for its time inside the range, grouped by q.By.
func (a *Accounting) UsageReport(ctx context.Context, q AccountingQuery) (*api.UsageReport, error) {
	if a.volatile {
		return nil, errNoAccounting()
	}
	now := a.now()
	if q.Until.IsZero() || q.Until.After(now) {
		q.Until = now
	}
	u := newUsage(q)
	scanned := 0
	err := scanStore(ctx, a.st, KindAccounting, accountingTimeKey(q.Since), "", func(k string, v []byte) (bool, error) {
		if scanned++; scanned > maxUsageScan {
			return false, errs.Invalid("since", "the range holds more than %d finished tasks: narrow it", maxUsageScan)
		}
		rec, err := decodeAccounting(k, v)
		if err != nil {
			return false, err
		}
		u.add(&rec)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	a.placed(func(r *TaskRecord) {
		rec := accountingOf(r, now)
		u.add(&rec)
	})
	return u.report(), nil
}

// Accounting is the engine's accounting records, to read (History,
// UsageReport).
func (e *Engine) Accounting() *Accounting { return e.acct }

// eachPlaced calls fn with every placed task (scheduled or running),
// holding mu for reading over one chunk of the listing order at a time.
func (e *Engine) eachPlaced(fn func(*TaskRecord)) {
	const chunk = 65536
	for i := 0; ; i += chunk {
		e.mu.RLock()
		if i >= len(e.order) {
			e.mu.RUnlock()
			return
		}
		for _, id := range e.order[i:min(i+chunk, len(e.order))] {
			if r := e.tasks[id]; r != nil && (r.State == "scheduled" || r.State == "running") {
				fn(r)
			}
		}
		e.mu.RUnlock()
	}
}

// usage sums runs into groups.
type usage struct {
	q      AccountingQuery
	groups map[string]*api.UsageRow
	total  api.UsageRow
}

func newUsage(q AccountingQuery) *usage {
	return &usage{q: q, groups: map[string]*api.UsageRow{}}
}

// add counts a's runs inside the range, each in its group.
func (u *usage) add(a *api.AccountingRecord) {
	if !u.q.match(a) {
		return
	}
	var counted []*api.UsageRow // the groups a's runs fell in (a task counts once in each)
	for _, run := range a.Runs {
		if !run.To.After(u.q.Since) || !run.From.Before(u.q.Until) {
			continue
		}
		g := u.group(a, run)
		addRunUsage(&g.CPUHours, &g.DeviceHours, a.Resources, run, u.q.Since, u.q.Until)
		addRunUsage(&u.total.CPUHours, &u.total.DeviceHours, a.Resources, run, u.q.Since, u.q.Until)
		if !slices.Contains(counted, g) {
			counted = append(counted, g)
			g.Tasks++
		}
	}
	if len(counted) > 0 {
		u.total.Tasks++
	}
}

// group is the row of a's run.
func (u *usage) group(a *api.AccountingRecord, run api.Run) *api.UsageRow {
	vals := make([]string, len(u.q.By))
	for i, f := range u.q.By {
		switch f {
		case "tenant":
			vals[i] = a.Tenant
		case "user":
			vals[i] = a.User
		case "queue":
			vals[i] = a.Queue
		case "model":
			vals[i] = modelOf(run.Devices)
		case "node":
			vals[i] = run.Node
		case "state":
			vals[i] = a.State
		case "job":
			vals[i] = a.Job
		}
	}
	k := strings.Join(vals, "\x00")
	g := u.groups[k]
	if g == nil {
		g = &api.UsageRow{Group: map[string]string{}}
		for i, f := range u.q.By {
			g.Group[f] = vals[i]
		}
		u.groups[k] = g
	}
	return g
}

// report is the rows in their groups' order.
func (u *usage) report() *api.UsageReport {
	keys := make([]string, 0, len(u.groups))
	for k := range u.groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	r := &api.UsageReport{Since: u.q.Since, Until: u.q.Until, By: u.q.By, Rows: make([]api.UsageRow, 0, len(keys)), Total: u.total}
	for _, k := range keys {
		r.Rows = append(r.Rows, *u.groups[k])
	}
	return r
}

// LocalAccounting is a as a caller of scope sees it: its ids local.
func LocalAccounting(scope string, a api.AccountingRecord) api.AccountingRecord {
	if scope == "" {
		return a
	}
	a.ID, a.Job = LocalID(scope, a.ID), LocalID(scope, a.Job)
	a.Reason = LocalReason(scope, a.Reason)
	return a
}
