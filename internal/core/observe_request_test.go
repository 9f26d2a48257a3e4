package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestObserveRequest: declared requests count into the request mix
// without creating tasks; a bad resource name is refused, naming it.
func TestObserveRequest(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UpsertNode(epoch, &api.Node{Name: "n", Capacity: resource.List{resource.CPU: 8000, resource.Memory: 1 << 30},
		Devices: []api.Device{{Type: "nvidia.com/gpu", ID: "0", Model: "A100"}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.ObserveRequest(epoch, &api.Task{Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 500}}); err != nil {
			t.Fatal(err)
		}
	}
	if c.lr.mix.total != 3 || len(c.lr.mix.types) != 1 || c.NumTasks() != 0 {
		t.Errorf("total %d, types %d, tasks %d", c.lr.mix.total, len(c.lr.mix.types), c.NumTasks())
	}
	for _, wt := range c.lr.mix.types {
		if wt.milli != 500 || wt.cpu != 1000 || wt.count != 3 {
			t.Errorf("type %+v", *wt)
		}
	}
	err = c.ObserveRequest(epoch, &api.Task{Resources: resource.List{"bad name!": 1}})
	var e *errs.Error
	if !errors.As(err, &e) || !strings.HasPrefix(e.Field, "resources") {
		t.Errorf("bad name: %v", err)
	}
}

// TestObserveRuntime: a profiled run time per model seeds the prediction
// of a class's tasks (hetero-aware and sjf read it) before any finished;
// bad input names its field.
func TestObserveRuntime(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ObserveRuntime(epoch, "resnet", "V100", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.ObserveRuntime(epoch, "resnet", "K80", 60*time.Minute); err != nil {
		t.Fatal(err)
	}
	rc := c.ct.rtByMeta["resnet"]
	if rc == nil || rc.byModel["V100"].v != float64(10*time.Minute) || rc.byModel["K80"].v != float64(60*time.Minute) {
		t.Fatalf("runtime class %+v", rc)
	}
	for _, bad := range []struct {
		class, model string
		d            time.Duration
		field        string
	}{{"", "V100", time.Second, "class"}, {"x", "", time.Second, "model"}, {"x", "V100", 0, "runtime"}} {
		var e *errs.Error
		if err := c.ObserveRuntime(epoch, bad.class, bad.model, bad.d); !errors.As(err, &e) || e.Field != bad.field {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
