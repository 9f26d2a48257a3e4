package core

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// extraKey is the part of a task's scheduling class beyond its options,
// selectors and tolerations: its priority value and preemption policy
// (which decide what it may evict) and its placement constraints (host
// ports, affinity, spread, node preferences), in a canonical text; "" for
// a task with none of them, the common case, which costs nothing.
func extraKey(spec *api.Task) string {
	if spec.PriorityValue == 0 && spec.PreemptionPolicy == "" && !spec.HasConstraints() {
		return ""
	}
	var b strings.Builder
	b.WriteString("v=")
	b.WriteString(strconv.FormatInt(int64(spec.PriorityValue), 10))
	b.WriteString(";p=")
	b.WriteString(spec.PreemptionPolicy)
	if spec.HasConstraints() {
		// encoding/json writes maps sorted by key: one text per meaning
		// (lists keep their order, as the task gave them).
		j, _ := json.Marshal([]any{spec.HostPorts, spec.Affinity, spec.AntiAffinity, spec.Spread, spec.PreferredNodeAffinity})
		b.WriteString(";c=")
		b.Write(j)
	}
	return b.String()
}

// notYetHonoured refuses the placement constraints the core does not
// honour yet, naming the field: never ignored in silence.
func notYetHonoured(spec *api.Task) error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"hostPorts", len(spec.HostPorts) > 0},
		{"affinity", len(spec.Affinity) > 0},
		{"antiAffinity", len(spec.AntiAffinity) > 0},
		{"spread", len(spec.Spread) > 0},
		{"preferredNodeAffinity", len(spec.PreferredNodeAffinity) > 0},
	} {
		if f.set {
			return errs.Invalid(f.name, "not honoured by this scheduler yet")
		}
	}
	return nil
}
