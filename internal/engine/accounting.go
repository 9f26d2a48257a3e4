package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// Accounting (Slurm's sacct and sreport): when a task enters a final
// state, its final record is written a second time, as its accounting
// record, in the same commit (the same bytes: encodeTasks adds it at no
// encoding cost), so that what it used outlives the task's retirement
// (retention.go). Reads make an api.AccountingRecord of it
// (accountingOf). The records are keyed by their finish time, then id
// (accountingKey), so a time range is a key range the store scans in
// order; reads scan the store from the reader's goroutine, never the
// loop. Records older than Config.RetainAccounting are deleted by the
// loop, at most purgeBatch a step, looked for hourly.
//
// A volatile engine (store.Discard) keeps none.

// KindAccounting is the store kind of the accounting records.
const KindAccounting = "acct"

// DefaultRetainAccounting is how long accounting records are kept when
// Config.RetainAccounting is 0.
const DefaultRetainAccounting = 365 * 24 * time.Hour

// purgeBatch bounds the records one step deletes; purgeEvery is how often
// the loop looks for records to delete.
const (
	purgeBatch = 10_000
	purgeEvery = time.Hour
)

// Accounting keeps the accounting records: the loop's writes and purges,
// and the reads (accounting_read.go), which need the store, the clock and
// a walk over the placed tasks (running work's usage), nothing else of the
// engine.
type Accounting struct {
	st       store.Store
	volatile bool // st keeps nothing: no records
	now      func() time.Time
	log      *slog.Logger
	// placed calls its argument with every placed task (Engine.eachPlaced).
	placed func(func(*TaskRecord))

	// The loop's own (purge):
	retain    time.Duration // < 0: for ever
	nextPurge time.Time
	forget    []string // keys to delete in this step
}

func (a *Accounting) pending() bool { return len(a.forget) > 0 }

// accountingKey is a record's store key: its finish time (Unix
// nanoseconds, 19 digits: sorts as time does until 2286) and its id.
func accountingKey(finished time.Time, id string) string {
	return accountingTimeKey(finished) + "/" + id
}

func accountingTimeKey(t time.Time) string {
	n := max(t.UnixNano(), 0)
	s := strconv.FormatInt(n, 10)
	return strings.Repeat("0", max(19-len(s), 0)) + s
}

// accountingOf is the accounting record of r, a task that just ended at
// now (when its record has no finish time).
func accountingOf(r *TaskRecord, now time.Time) api.AccountingRecord {
	a := api.AccountingRecord{ID: r.Spec.ID, Name: r.Spec.Name, Job: r.Spec.Metadata[JobMetadataKey], Tenant: r.Tenant,
		User: r.Spec.User, Queue: queueName(r), Priority: r.Spec.PriorityOrDefault(), State: r.State,
		ExitCode: r.ExitCode, Reason: r.Reason, Node: r.Node, Devices: r.Devices, Model: modelOf(r.Devices),
		Submitted: r.Submitted, Started: r.Started, Finished: now, Attempts: r.Attempt + 1}
	if r.Finished != nil {
		a.Finished = *r.Finished
	}
	if r.Scheduled == nil && r.Started == nil {
		a.Attempts = r.Attempt // never placed this time
	}
	a.Resources = r.Spec.Resources
	if r.Chosen >= 0 && r.Chosen < len(r.Spec.Alternatives) {
		a.Resources = r.Spec.Alternatives[r.Chosen].Resources
	}
	for _, at := range r.Attempts {
		if from := placedAt(at.Scheduled, at.Started); from != nil {
			a.Runs = append(a.Runs, api.Run{Node: at.Node, Devices: at.Devices, From: *from, To: at.Finished})
		}
	}
	if from := placedAt(r.Scheduled, r.Started); from != nil {
		a.Runs = append(a.Runs, api.Run{Node: r.Node, Devices: r.Devices, From: *from, To: a.Finished})
	}
	for _, run := range a.Runs {
		addRunUsage(&a.CPUHours, &a.DeviceHours, a.Resources, run, run.From, run.To)
	}
	return a
}

// placedAt is when a run began holding its resources: its placement,
// else its start (nil: never placed).
func placedAt(scheduled, started *time.Time) *time.Time {
	if scheduled != nil {
		return scheduled
	}
	return started
}

// addRunUsage adds what run held between from and to (clipped to the
// run): CPU-hours of res, device-hours per type of its devices.
func addRunUsage(cpu *float64, dev *map[string]float64, res resource.List, run api.Run, from, to time.Time) {
	from, to = laterOf(from, run.From), earlierOf(to, run.To)
	if !to.After(from) {
		return
	}
	h := to.Sub(from).Hours()
	*cpu += float64(res[resource.CPU]) / 1000 * h
	for _, d := range run.Devices {
		share := d.Share
		if share <= 0 {
			share = 1000
		}
		if *dev == nil {
			*dev = map[string]float64{}
		}
		(*dev)[d.Type] += float64(share) / 1000 * h
	}
}

func earlierOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// modelOf is the model of devs: their one model, or their models sorted
// and "+"-joined; "" without devices or models.
func modelOf(devs []api.DeviceRef) string {
	var models []string
	for _, d := range devs {
		if d.Model != "" && !slices.Contains(models, d.Model) {
			models = append(models, d.Model)
		}
	}
	slices.Sort(models)
	return strings.Join(models, "+")
}

// accountable reports whether the staged record r of task id enters a
// final state in this step (published: the records before it; looked up
// only for a final r), so that its accounting record is written with it,
// and its key.
func accountable(id string, r *TaskRecord, published map[string]*TaskRecord, now time.Time) (string, bool) {
	if !finished(r.State) {
		return "", false
	}
	if old := published[id]; old != nil && finished(old.State) {
		return "", false
	}
	at := now
	if r.Finished != nil {
		at = *r.Finished
	}
	return accountingKey(at, id), true
}

// parseAccountingKey is a key's finish time and task id.
func parseAccountingKey(k string) (time.Time, string, error) {
	ts, id, ok := strings.Cut(k, "/")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || len(ts) != 19 {
		return time.Time{}, "", fmt.Errorf("accounting key %q: not <19 digits>/<id>", k)
	}
	return time.Unix(0, n).UTC(), id, nil
}

// decodeAccounting is the accounting record stored under k.
func decodeAccounting(k string, v []byte) (api.AccountingRecord, error) {
	at, id, err := parseAccountingKey(k)
	if err != nil {
		return api.AccountingRecord{}, errs.Wrap(errs.Internal, "", err)
	}
	r, err := decodeTask(id, v)
	if err != nil {
		return api.AccountingRecord{}, errs.Wrap(errs.Internal, "", fmt.Errorf("accounting record %s: %w", k, err))
	}
	return accountingOf(r, at), nil
}

// encode appends the deletions of the purged accounting records.
func (a *Accounting) encode(b *commitBatch) {
	for _, k := range a.forget {
		b.recs = append(b.recs, store.Record{Kind: KindAccounting, Key: k})
	}
	a.forget = a.forget[:0]
}

// purgeAccounting stages the deletion of records past the retention, at
// most purgeBatch; with more to go, it looks again at the next step.
func (a *Accounting) purge(now time.Time) {
	if a.volatile || a.retain < 0 || now.Before(a.nextPurge) {
		return
	}
	a.nextPurge = now.Add(purgeEvery)
	cut := accountingTimeKey(now.Add(-a.retain))
	err := scanStore(context.Background(), a.st, KindAccounting, "", cut, func(k string, _ []byte) (bool, error) {
		a.forget = append(a.forget, k)
		return len(a.forget) < purgeBatch, nil
	})
	if err != nil {
		a.log.Warn("accounting: looking for expired records failed", "err", err)
		a.forget = a.forget[:0]
		return
	}
	if len(a.forget) == purgeBatch {
		a.nextPurge = now // more: the next step goes on
	}
}

// errStopScan stops a Load used as a scan.
var errStopScan = errors.New("stop")

// scanStore scans [from, to) of kind: with the store's Scanner, else
// through Load, skipping what is out of range.
func scanStore(ctx context.Context, st store.Store, kind, from, to string, fn func(key string, value []byte) (bool, error)) error {
	if sc, ok := st.(store.Scanner); ok {
		return sc.Scan(ctx, kind, from, to, fn)
	}
	err := st.Load(ctx, kind, func(k string, v []byte) error {
		if k < from {
			return nil
		}
		if to != "" && k >= to {
			return errStopScan
		}
		more, err := fn(k, v)
		if err == nil && !more {
			err = errStopScan
		}
		return err
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// errNoAccounting is the answer of a volatile engine's accounting reads.
func errNoAccounting() error {
	return errs.New(errs.Unavailable, "", "this server keeps no accounting: its store keeps nothing (run it with a data directory)")
}
