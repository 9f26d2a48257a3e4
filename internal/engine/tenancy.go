package engine

import (
	"errors"
	"maps"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Tenant-scoped ids (issue 15 §4).
//
// Task and job ids are per tenant: the engine (and so the core and the
// store key) names a tenant's object "<tenant>:<id>", its qualified id,
// and the tenant sees and writes only the local id. Two tenants may use
// the same id, and no answer to one tenant depends on another's ids: a
// dependency on another tenant's task is a dependency on a task that does
// not exist. The default tenant's ids (auth off, and admins) are not
// qualified, so a store written without tenants reads the same; an admin
// names another tenant's task by its qualified id. Tenant names never
// contain the separator (the server checks its tokens).

// DefaultTenant owns everything when authentication is off; it may use any
// queue.
const DefaultTenant = "default"

// TenantSep separates a tenant from a local id in a qualified id.
const TenantSep = ":"

// scoped reports whether tenant's ids are qualified.
func scoped(tenant string) bool { return tenant != "" && tenant != DefaultTenant }

// QualifyID is tenant's id as the engine names it.
func QualifyID(tenant, id string) string {
	if !scoped(tenant) || id == "" {
		return id
	}
	return tenant + TenantSep + id
}

// LocalID is a qualified id as tenant names it (id itself when it is not
// one of tenant's).
func LocalID(tenant, id string) string {
	if !scoped(tenant) {
		return id
	}
	return strings.TrimPrefix(id, tenant+TenantSep)
}

// qualifyTask qualifies a validated spec's id and dependencies for tenant,
// and labels it with its tenant (tenantLabels).
func qualifyTask(tenant string, t *api.Task) error {
	t.Metadata = tenantLabels(tenant, t.Metadata)
	if !scoped(tenant) {
		return nil
	}
	if len(t.ID)+len(tenant)+len(TenantSep) > api.MaxIDLen {
		return errs.Invalid("id", "at most %d characters for tenant %s's tasks, got %d", api.MaxIDLen-len(tenant)-len(TenantSep), tenant, len(t.ID))
	}
	t.ID = QualifyID(tenant, t.ID)
	t.Depends = qualifyDepends(tenant, t.Depends)
	return nil
}

// qualifyDepends is deps (validated) with their ids qualified for tenant,
// each keeping its type; a new slice, the caller's is left as it was. A
// tenant whose name starts with "after" gets the type written out, so
// that its name is never read as one.
func qualifyDepends(tenant string, deps []string) []string {
	if len(deps) == 0 || !scoped(tenant) {
		return deps
	}
	out := make([]string, len(deps))
	for i, d := range deps {
		typ, id, _ := api.ParseDependency(d)
		if d != id || strings.HasPrefix(tenant, "after") {
			out[i] = typ + ":" + QualifyID(tenant, id)
		} else {
			out[i] = QualifyID(tenant, id)
		}
	}
	return out
}

// LocalDepends is deps as a caller of scope names them.
func LocalDepends(scope string, deps []string) []string {
	if scope == "" || len(deps) == 0 {
		return deps
	}
	out := make([]string, len(deps))
	for i, d := range deps {
		out[i] = api.WithDependencyID(d, LocalID(scope, api.DependencyID(d)))
	}
	return out
}

// tenantLabels is a task's labels (metadata) with api.MetaTenant set to
// its tenant, or, for the default tenant, left out, so that placement
// selectors (affinity, spread) match only a tenant's own tasks: a tenant
// can neither set another's label nor clear its own. The caller's map is
// left as it was.
func tenantLabels(tenant string, md map[string]string) map[string]string {
	v, has := md[api.MetaTenant]
	switch {
	case scoped(tenant) && (!has || v != tenant):
		out := make(map[string]string, len(md)+1)
		maps.Copy(out, md)
		out[api.MetaTenant] = tenant
		return out
	case !scoped(tenant) && has:
		out := maps.Clone(md)
		delete(out, api.MetaTenant)
		return out
	}
	return md
}

// mayPutQueue is the rule for a tenant's queue change: only queues below
// its top queue (the top queue is the admin's), each within its parent's
// limits (no guarantee or max above the parent's).
func mayPutQueue(tenant string, q *api.Queue, all map[string]*api.Queue) error {
	with := make(map[string]*api.Queue, len(all)+1)
	for k, v := range all {
		with[k] = v
	}
	with[q.Name] = q
	if api.QueueOwner(q.Name, with) != tenant || (all[q.Name] != nil && api.QueueOwner(q.Name, all) != tenant) {
		return errs.New(errs.PermissionDenied, "name", "queue %q is not under tenant %s", q.Name, tenant)
	}
	if q.ParentOrRoot() == api.RootQueue || (all[q.Name] != nil && all[q.Name].ParentOrRoot() == api.RootQueue) {
		return errs.New(errs.PermissionDenied, "name", "queue %q is tenant %s's top queue: only an admin changes its weight, guarantee and max", q.Name, tenant)
	}
	parent := all[q.ParentOrRoot()]
	for n, v := range q.Guaranteed {
		if g := parent.Guaranteed[n]; v > g {
			return errs.New(errs.PermissionDenied, "guaranteed."+string(n), "%s is more than parent queue %s guarantees (%s)", n.Format(v), parent.Name, n.Format(g))
		}
	}
	for n, v := range q.Max {
		if m, ok := parent.Max[n]; ok && v > m {
			return errs.New(errs.PermissionDenied, "max."+string(n), "%s is more than parent queue %s's max (%s)", n.Format(v), parent.Name, n.Format(m))
		}
	}
	return nil
}

// Localization: what a front end answers a tenant. scope is the tenant
// whose ids the caller sees local ("" for an admin, who sees qualified
// ids: nothing changes); another tenant's ids are never named to it.

// LocalRecord is r as a caller of scope sees it: its id, dependencies and
// job local. r itself is shared and never changed.
func LocalRecord(scope string, r *TaskRecord) *TaskRecord {
	if scope == "" || r == nil {
		return r
	}
	cp := *r
	cp.Spec.ID = LocalID(scope, r.Spec.ID)
	cp.Reason = LocalReason(scope, r.Reason)
	if len(r.Spec.Depends) > 0 {
		cp.Spec.Depends = LocalDepends(scope, r.Spec.Depends)
	}
	if j, ok := r.Spec.Metadata[JobMetadataKey]; ok {
		m := make(map[string]string, len(r.Spec.Metadata))
		for k, v := range r.Spec.Metadata {
			m[k] = v
		}
		m[JobMetadataKey] = LocalID(scope, j)
		cp.Spec.Metadata = m
	}
	return &cp
}

// LocalRecords localizes recs into a new slice (recs is left as it was).
func LocalRecords(scope string, recs []*TaskRecord) []*TaskRecord {
	if scope == "" {
		return recs
	}
	out := make([]*TaskRecord, len(recs))
	for i, r := range recs {
		out[i] = LocalRecord(scope, r)
	}
	return out
}

// LocalIDs localizes ids into a new slice (ids is left as it was).
func LocalIDs(scope string, ids []string) []string {
	if scope == "" {
		return ids
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = LocalID(scope, id)
	}
	return out
}

// LocalError rewrites the qualified ids an error of the engine names
// ("team-a:x") as the tenant's own ("x"), so that an error says the same
// for a made-up id and another tenant's.
func LocalError(scope string, err error) error {
	var e *errs.Error
	if scope == "" || !errors.As(err, &e) || !strings.Contains(e.Message, scope+TenantSep) {
		return err
	}
	c := *e
	c.Message = strings.ReplaceAll(c.Message, `"`+scope+TenantSep, `"`)
	c.Message = strings.ReplaceAll(c.Message, " "+scope+TenantSep, " ")
	return &c
}

// preemptedBy starts the reason of a task evicted for another.
const preemptedBy = "preempted by "

// LocalReason is a task's reason as a caller of scope may read it: its own
// ids local, and another tenant's task that preempted it unnamed.
func LocalReason(scope, reason string) string {
	if scope == "" || reason == "" {
		return reason
	}
	if rest, ok := strings.CutPrefix(reason, preemptedBy); ok {
		id, tail := rest, ""
		if i := strings.IndexAny(rest, " ;"); i >= 0 {
			id, tail = rest[:i], rest[i:]
		}
		if own := LocalID(scope, id); own != id {
			reason = preemptedBy + own + tail
		} else {
			reason = preemptedBy + "another tenant's task" + tail
		}
	}
	if !strings.Contains(reason, scope+TenantSep) {
		return reason
	}
	return strings.ReplaceAll(reason, " "+scope+TenantSep, " ")
}
