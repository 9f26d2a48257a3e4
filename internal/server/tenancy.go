package server

import (
	"errors"
	"strings"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// Tenant-scoped ids at the API (engine/tenancy.go has the rule): a tenant
// writes and reads local ids; the server qualifies what it is sent and
// localizes what it answers. Admins (and everyone with auth off) see the
// engine's ids: a tenant's task is "<tenant>:<id>" to them.

// scope is the tenant whose ids p sees unqualified; "" for admins.
func (p Principal) scope() string {
	if p.Role == RoleTenant {
		return p.Tenant
	}
	return ""
}

// qualify is the engine's id of an id p sent.
func (p Principal) qualify(id string) string { return engine.QualifyID(p.scope(), id) }

// localRec is r as a caller of scope sees it: its id, dependencies and job
// local. r itself is shared and never changed.
func localRec(scope string, r *engine.TaskRecord) *engine.TaskRecord {
	if scope == "" || r == nil {
		return r
	}
	cp := *r
	cp.Spec.ID = engine.LocalID(scope, r.Spec.ID)
	cp.Reason = localReason(scope, r.Reason)
	if len(r.Spec.Depends) > 0 {
		cp.Spec.Depends = localIDs(scope, r.Spec.Depends)
	}
	if j, ok := r.Spec.Metadata[engine.JobMetadataKey]; ok {
		m := make(map[string]string, len(r.Spec.Metadata))
		for k, v := range r.Spec.Metadata {
			m[k] = v
		}
		m[engine.JobMetadataKey] = engine.LocalID(scope, j)
		cp.Spec.Metadata = m
	}
	return &cp
}

// localRecs localizes recs into a new slice (recs is left as it was).
func localRecs(scope string, recs []*engine.TaskRecord) []*engine.TaskRecord {
	if scope == "" {
		return recs
	}
	out := make([]*engine.TaskRecord, len(recs))
	for i, r := range recs {
		out[i] = localRec(scope, r)
	}
	return out
}

func localIDs(scope string, ids []string) []string {
	if scope == "" {
		return ids
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = engine.LocalID(scope, id)
	}
	return out
}

// localErr rewrites the qualified ids an error of the engine names
// ("team-a:x") as the tenant's own ("x"), so that an error says the same
// for a made-up id and another tenant's.
func localErr(scope string, err error) error {
	var e *errs.Error
	if scope == "" || !errors.As(err, &e) || !strings.Contains(e.Message, scope+engine.TenantSep) {
		return err
	}
	c := *e
	c.Message = strings.ReplaceAll(c.Message, `"`+scope+engine.TenantSep, `"`)
	c.Message = strings.ReplaceAll(c.Message, " "+scope+engine.TenantSep, " ")
	return &c
}

// preemptedBy starts the reason of a task evicted for another.
const preemptedBy = "preempted by "

// localReason is a task's reason as a caller of scope may read it: its own
// ids local, and another tenant's task that preempted it unnamed.
func localReason(scope, reason string) string {
	if scope == "" || reason == "" {
		return reason
	}
	if rest, ok := strings.CutPrefix(reason, preemptedBy); ok {
		id, tail := rest, ""
		if i := strings.IndexAny(rest, " ;"); i >= 0 {
			id, tail = rest[:i], rest[i:]
		}
		if own := engine.LocalID(scope, id); own != id {
			reason = preemptedBy + own + tail
		} else {
			reason = preemptedBy + "another tenant's task" + tail
		}
	}
	if !strings.Contains(reason, scope+engine.TenantSep) {
		return reason
	}
	return strings.ReplaceAll(reason, " "+scope+engine.TenantSep, " ")
}
