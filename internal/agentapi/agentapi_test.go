package agentapi

import (
	"math"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

func TestValidateBeatsNamesTheField(t *testing.T) {
	ok := []Beat{{Node: "n1", CPU: 0.5, MemoryUsed: 1, Devices: map[string]DeviceBeat{"0": {Utilization: 1}}}, {Node: "n2"}}
	if err := ValidateBeats(ok); err != nil {
		t.Fatalf("valid beats refused: %v", err)
	}
	for _, c := range []struct {
		b     Beat
		field string
	}{
		{Beat{CPU: 1.5}, "nodes[1].cpu"},
		{Beat{CPU: math.NaN()}, "nodes[1].cpu"},
		{Beat{MemoryUsed: -1}, "nodes[1].memoryUsed"},
		{Beat{Devices: map[string]DeviceBeat{"g0": {Utilization: -0.1}}}, "nodes[1].devices.g0.utilization"},
		{Beat{Devices: map[string]DeviceBeat{"g0": {MemoryUsed: -1}}}, "nodes[1].devices.g0.memoryUsed"},
	} {
		err := ValidateBeats([]Beat{ok[0], c.b})
		if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != c.field {
			t.Errorf("%+v: %v (field %q), want an invalid %s", c.b, err, errs.FieldOf(err), c.field)
		}
	}
}
