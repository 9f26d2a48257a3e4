// Package api holds the wire types of hetsched's HTTP API and files
// (../shared/API.md): tasks, nodes, devices, services (with their probes
// and autoscale specs), with field-level validation.
// The server, CLI, simulator and core share these types; the core converts a
// validated spec into its own compact form once, at submission.
//
// Glossary:
//   - Task: the unit of work, one name everywhere (a pod under hetsched
//     kube becomes one, a job holds some, a service's replica is one). A
//     task with a command is run by the agent of its node; one without is
//     a lease: its holder uses the devices itself.
//   - Lease (here): a task without a command, and the time it is held
//     without a renewal (Task.Lease). The control plane's own leases
//     (leadership, etcd sessions) are not this.
//   - Alternative: another way to run a task (other resources, a speed);
//     the placed one is "chosen".
//   - Job: tasks with dependencies on each other, optionally a gang, a
//     failure policy and retries. Gang: members placed all at once or not.
//   - Dependency: a task's or job's wait for another's end, typed as
//     Slurm's (afterok, afterany, afternotok: depends.go).
//   - Service: a template kept at a replica count (autoscaled, probed,
//     rolled out).
//   - Node, Device: a machine and one of its countable accelerators;
//     DeviceRef: one device of a placement (Share in milli-devices).
//   - Queue: a node of a tenant's hierarchical queue tree (guarantees,
//     max, weight).
//   - User: who submitted a task; Tenant (the server's): who owns it.
//   - AccountingRecord: what is kept of a task once it ended; UsageReport:
//     what work used over a range.
//   - Request (here): a resource request (Task.Resources), never an HTTP
//     request.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Duration is a Go duration written as a string ("250ms", "30m") in JSON.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// NoExpiry is a lease that never expires, written "never": a lease
// without one gets the server's default.
const NoExpiry Duration = -1

// MarshalJSON writes the duration as a string ("never" for NoExpiry).
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == NoExpiry {
		return []byte(`"never"`), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string ("250ms", "30m"). A bare number
// is refused: seconds or nanoseconds? (Kubernetes, Slurm and Go disagree.)
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		*d = 0
		return nil
	}
	if len(s) > 0 && s[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := ParseDuration(str, true)
		*d = v
		return err
	}
	v, err := ParseDuration(s, false)
	*d = v
	return err
}

// ParseDuration reads a duration as written in JSON: the contents of a
// string ("250ms", "30m") when quoted. A bare number (quoted false) is an
// error that says how to write it.
func ParseDuration(text string, quoted bool) (Duration, error) {
	if !quoted {
		return 0, fmt.Errorf("a duration is a string with its unit, like \"%ss\" or \"10m\", not a bare number", errs.Clip(text))
	}
	if text == "never" {
		return NoExpiry, nil
	}
	v, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("not a duration like \"250ms\" or \"30m\": %q", errs.Clip(text))
	}
	return Duration(v), nil
}

// Bytes is a byte count written as a quantity ("80Gi") or a number.
type Bytes int64

// MarshalJSON writes the byte count as a quantity string.
func (b Bytes) MarshalJSON() ([]byte, error) {
	return json.Marshal(resource.FormatBytes(int64(b)))
}

// UnmarshalJSON reads a quantity string or number of bytes.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	text, null, err := resource.RawQuantity(bytes.TrimSpace(data))
	if err != nil {
		return errs.Invalid("", "%v", err)
	}
	if null {
		*b = 0
		return nil
	}
	n, err := resource.ParseQuantity(text, resource.Units)
	if err != nil {
		return errs.Invalid("", "%v", err)
	}
	*b = Bytes(n)
	return nil
}
