package server

import "github.com/hetsched/hetsched/internal/engine"

// Tenant-scoped ids at the API (engine/tenancy.go has the rule and the
// localization of records, reasons and errors): a tenant writes and reads
// local ids; the server qualifies what it is sent and localizes what it
// answers. Admins (and everyone with auth off) see the engine's ids: a
// tenant's task is "<tenant>:<id>" to them.

// scope is the tenant whose ids p sees unqualified; "" for admins.
func (p Principal) scope() string {
	if p.Role == RoleTenant {
		return p.Tenant
	}
	return ""
}

// qualify is the engine's id of an id p sent.
func (p Principal) qualify(id string) string { return engine.QualifyID(p.scope(), id) }
