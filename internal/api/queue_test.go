package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"github.com/hetsched/hetsched/internal/resource"
)

func TestQueueValidate(t *testing.T) {
	cases := []struct {
		q     Queue
		field string
	}{
		{Queue{Name: "team-a", Guaranteed: resource.List{"nvidia.com/gpu": 8000}, Max: resource.List{"nvidia.com/gpu": 16000}, Weight: 1}, ""},
		{Queue{Name: "root"}, "name"},
		{Queue{Name: "bad name"}, "name"},
		{Queue{Name: "a", Parent: "a"}, "parent"},
		{Queue{Name: "a", Weight: -1}, "weight"},
		{Queue{Name: "a", Guaranteed: resource.List{"cpu": 4000}, Max: resource.List{"cpu": 2000}}, "max.cpu"},
	}
	for _, c := range cases {
		err := c.q.Validate()
		if errs.FieldOf(err) != c.field || (c.field == "") != (err == nil) {
			t.Errorf("%+v: %v, want field %q", c.q, err, c.field)
		}
	}
}

func TestQueueTree(t *testing.T) {
	all := map[string]*Queue{
		"team-a": {Name: "team-a", Guaranteed: resource.List{"cpu": 10000}},
		"a-prod": {Name: "a-prod", Parent: "team-a", Guaranteed: resource.List{"cpu": 6000}},
	}
	if err := ValidateQueueTree(&Queue{Name: "a-dev", Parent: "team-a", Guaranteed: resource.List{"cpu": 4000}}, all); err != nil {
		t.Errorf("fitting child: %v", err)
	}
	err := ValidateQueueTree(&Queue{Name: "a-dev", Parent: "team-a", Guaranteed: resource.List{"cpu": 5000}}, all)
	if errs.FieldOf(err) != "guaranteed.cpu" {
		t.Errorf("oversubscribed parent: %v", err)
	}
	if err := ValidateQueueTree(&Queue{Name: "x", Parent: "nosuch"}, all); errs.FieldOf(err) != "parent" {
		t.Errorf("unknown parent: %v", err)
	}
	// Shrinking a parent below its children's guarantees is refused too.
	if err := ValidateQueueTree(&Queue{Name: "team-a", Guaranteed: resource.List{"cpu": 5000}}, all); errs.FieldOf(err) != "guaranteed.cpu" {
		t.Errorf("shrunk parent: %v", err)
	}
	// A cycle through re-parenting is refused.
	all["b"] = &Queue{Name: "b", Parent: "a-prod"}
	if err := ValidateQueueTree(&Queue{Name: "a-prod", Parent: "b", Guaranteed: resource.List{"cpu": 1000}}, all); errs.FieldOf(err) != "parent" {
		t.Errorf("cycle: %v", err)
	}
	if QueueOwner("b", all) != "team-a" || QueueOwner("team-a", all) != "team-a" {
		t.Errorf("owners: %s %s", QueueOwner("b", all), QueueOwner("team-a", all))
	}
}

func TestQueueWeightZeroRefused(t *testing.T) {
	var q Queue
	if err := json.Unmarshal([]byte(`{"name":"a","weight":0}`), &q); errs.FieldOf(err) != "weight" {
		t.Errorf("weight 0: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"name":"a","weight":2.5,"guaranteed":{"cpu":"1"}}`), &q); err != nil || q.Weight != 2.5 || q.Guaranteed["cpu"] != 1000 {
		t.Errorf("weight 2.5: %+v %v", q, err)
	}
	if err := json.Unmarshal([]byte(`{"name":"a","wieght":2}`), &q); err == nil {
		t.Error("an unknown field was accepted")
	}
	q = Queue{}
	if err := json.Unmarshal([]byte(`{"name":"a"}`), &q); err != nil || q.Weight != 0 {
		t.Errorf("absent weight: %+v %v", q, err)
	}
}

func TestUnknownFieldSuggests(t *testing.T) {
	_, err := ReadTask(jsonread.New([]byte(`{"resorces":{"cpu":"1"}}`)))
	if err == nil || !strings.Contains(err.Error(), `did you mean "resources"?`) || errs.FieldOf(err) != "resorces" {
		t.Errorf("resorces: %v", err)
	}
	if _, err = ReadTask(jsonread.New([]byte(`{"Priority":1}`))); err == nil || !strings.Contains(err.Error(), `did you mean "priority"?`) {
		t.Errorf("Priority: %v", err)
	}
	if _, err = ReadTask(jsonread.New([]byte(`{"zzzzzz":1}`))); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a name far from every field: %v", err)
	}
	if got := JSONFields(Queue{}); !slices.Contains(got, "guaranteed") || !slices.Contains(got, "weight") {
		t.Errorf("JSONFields(Queue): %v", got)
	}
	if editDistance("kitten", "sitting", 9) != 3 || editDistance("a", "abcdef", 3) != 3 {
		t.Error("editDistance")
	}
}
