package server

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// accountingQuery reads the accounting queries' parameters: since (default
// defSince ago), until, user, queue, job, node, model, state (a list),
// tenant (an admin's filter; a tenant sees only its own, and its job
// names are its own).
func accountingQuery(q url.Values, p Principal, now time.Time, defSince time.Duration) (engine.AccountingQuery, error) {
	aq := engine.AccountingQuery{Since: now.Add(-defSince), User: q.Get("user"), Queue: q.Get("queue"),
		Node: q.Get("node"), Model: q.Get("model"), Tenant: q.Get("tenant")}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"since", &aq.Since}, {"until", &aq.Until}} {
		if v := q.Get(f.name); v != "" {
			t, err := api.ParseTime(v, now)
			if err != nil {
				return aq, errs.Invalid(f.name, "%v", err)
			}
			*f.t = t
		}
	}
	if !aq.Until.IsZero() && !aq.Until.After(aq.Since) {
		return aq, errs.Invalid("until", "must be after since (%s), got %s", aq.Since.Format(time.RFC3339), aq.Until.Format(time.RFC3339))
	}
	if v := q.Get("state"); v != "" {
		for _, st := range strings.Split(v, ",") {
			if s, ok := core.ParseState(st); !ok || !s.Terminal() && st != "scheduled" && st != "running" {
				return aq, errs.Invalid("state", "%q is not a state work is accounted in (succeeded, failed, timeout, expired, cancelled, skipped)", errs.Clip(st))
			}
			aq.States = append(aq.States, st)
		}
	}
	if p.Role != RoleAdmin {
		if aq.Tenant != "" && aq.Tenant != p.Tenant {
			return aq, errs.New(errs.PermissionDenied, "tenant", "a tenant reads only its own accounting")
		}
		aq.Tenant = p.Tenant
	}
	if j := q.Get("job"); j != "" {
		aq.Job = p.qualify(j)
	}
	return aq, nil
}

// history is GET /api/v1/accounting: the accounting records of the work
// that finished in [since, until) (default: the last 24 hours), oldest
// first, paged ({"records":[...],"cursor":"..."}), as sacct lists.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(w, r)
	aq, err := accountingQuery(q, p, time.Now(), 24*time.Hour)
	if err != nil {
		writeError(w, err)
		return
	}
	if aq.Limit, err = pageLimit(q); err != nil {
		writeError(w, err)
		return
	}
	aq.Cursor = q.Get("cursor")
	recs, next, err := s.eng.Accounting().History(r.Context(), aq)
	if err != nil {
		writeError(w, err)
		return
	}
	scope := p.scope()
	for i := range recs {
		recs[i] = engine.LocalAccounting(scope, recs[i])
	}
	body := map[string]any{"records": recs}
	if recs == nil {
		body["records"] = []api.AccountingRecord{}
	}
	if next != "" {
		body["cursor"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// usage is GET /api/v1/usage: what the work used in [since, until)
// (default: the last 7 days) grouped by the fields of by (default queue),
// as sreport reports.
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(w, r)
	aq, err := accountingQuery(q, p, time.Now(), 7*24*time.Hour)
	if err != nil {
		writeError(w, err)
		return
	}
	if q.Get("cursor") != "" || q.Get("limit") != "" {
		writeError(w, errs.Invalid("limit", "a usage report is one answer: it takes neither limit nor cursor"))
		return
	}
	aq.By = []string{"queue"}
	if v := q.Get("by"); v != "" {
		aq.By = strings.Split(v, ",")
	}
	for i, f := range aq.By {
		if !slices.Contains(api.UsageGroups, f) {
			writeError(w, errs.Invalid("by", "%q is not a field to group by: %s", errs.Clip(f), strings.Join(api.UsageGroups, ", ")))
			return
		}
		if slices.Contains(aq.By[:i], f) {
			writeError(w, errs.Invalid("by", "%q is given twice", f))
			return
		}
	}
	rep, err := s.eng.Accounting().UsageReport(r.Context(), aq)
	if err != nil {
		writeError(w, err)
		return
	}
	if scope := p.scope(); scope != "" {
		for i := range rep.Rows {
			if j, ok := rep.Rows[i].Group["job"]; ok {
				rep.Rows[i].Group["job"] = engine.LocalID(scope, j)
			}
		}
	}
	writeJSON(w, http.StatusOK, rep)
}
