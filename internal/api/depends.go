package api

import (
	"fmt"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// Dependencies (Task.Depends, Job.Depends) are Slurm's --dependency types
// on a task or a job id:
//
//	ID             afterok: start once ID succeeded (the default)
//	afterok:ID     the same
//	afterany:ID    start once ID ended, however it ended
//	afternotok:ID  start once ID ended without success (failed, timed
//	               out, expired, cancelled or skipped)
//
// A task whose dependency can no longer be met (afterok on a failure,
// afternotok on a success) is skipped, naming it. An ID names a task, or
// a job (which ends when all its tasks have, and succeeds when all did).
// Since an id may hold ':', a dependency whose text before the first ':'
// starts with "after" is read as typed, and one of an unknown type is
// refused.
const (
	AfterOK    = "afterok"
	AfterAny   = "afterany"
	AfterNotOK = "afternotok"
)

// DependencyTypes lists the dependency types, the default first.
var DependencyTypes = []string{AfterOK, AfterAny, AfterNotOK}

// ParseDependency splits a dependency into its type (AfterOK when none
// is written) and the id it names. It does not validate the id.
func ParseDependency(d string) (typ, id string, err error) {
	head, rest, typed := strings.Cut(d, ":")
	if !typed || !strings.HasPrefix(head, "after") {
		return AfterOK, d, nil
	}
	switch head {
	case AfterOK, AfterAny, AfterNotOK:
		return head, rest, nil
	case "after", "aftercorr", "afterburstbuffer":
		return "", "", fmt.Errorf("dependency type %q (Slurm's) is not supported here; use %s", head, strings.Join(DependencyTypes, ", "))
	}
	return "", "", fmt.Errorf("unknown dependency type %q; use %s", truncate(head), strings.Join(DependencyTypes, ", "))
}

// DependencyID is the id a valid dependency names.
func DependencyID(d string) string {
	_, id, err := ParseDependency(d)
	if err != nil {
		return d
	}
	return id
}

// WithDependencyID is d naming id instead, its type kept as written.
func WithDependencyID(d, id string) string {
	if typ, old, err := ParseDependency(d); err == nil && old != d {
		return typ + ":" + id
	}
	return id
}

// validateDepends checks a list of dependencies under field: at most
// MaxDepends, each of a known type naming a valid id, none twice and none
// on self (when self is not empty) or, for a job, on a task of its own
// (inner: its tasks' id prefix).
func validateDepends(field string, deps []string, self, inner string) error {
	if len(deps) > MaxDepends {
		return errs.Invalid(field, "at most %d dependencies", MaxDepends)
	}
	seen := make(map[string]bool, len(deps))
	for i, d := range deps {
		f := fmt.Sprintf("%s[%d]", field, i)
		_, id, err := ParseDependency(d)
		if err != nil {
			return errs.Invalid(f, "%v", err)
		}
		if err := ValidateID(f, id); err != nil {
			return err
		}
		if id == self && self != "" {
			return errs.Invalid(f, "%q cannot depend on itself", self)
		}
		if inner != "" && strings.HasPrefix(id, inner) {
			return errs.Invalid(f, "%q is a task of this job: a task of the job names it in its own depends", id)
		}
		if seen[id] {
			return errs.Invalid(f, "duplicate dependency on %q", id)
		}
		seen[id] = true
	}
	return nil
}
