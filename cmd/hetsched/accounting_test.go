package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// issue 45 §2: history and usage outlive the tasks (retired after a
// millisecond here), --dependency takes Slurm's types, and the CLI names
// $USER as the user without a token.
func TestHistoryUsageAndDependencies(t *testing.T) {
	t.Setenv("USER", "ann")
	base := servertest.StartWith(t, oneGPUNode, func(o *server.Options) { o.RetainFinished = time.Millisecond })
	lease := specFile(t, "a.yaml", "{id: a, resources: {cpu: \"2\", nvidia.com/gpu: 1}, lease: 1h}\n")
	if _, err := run(t, "submit", "-f", lease, "--wait=placed", "--server", base); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "run", "-d", "--id", "notok", "--dependency", "afternotok:a", "--server", base, "--", "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "run", "-d", "--id", "anyway", "--dependency", "afterany:a,afterok:a", "--server", base, "--", "true"); err == nil {
		t.Error("the same dependency twice was not refused")
	}
	if _, err := run(t, "run", "-d", "--id", "x", "--dependency", "after:a", "--server", base, "--", "true"); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("Slurm's after type: %v", err)
	}
	if _, err := run(t, "complete", "a", "--server", base); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var recs struct {
		Records []struct {
			ID, User, Model, State, Reason string
			DeviceHours                    map[string]float64
		}
	}
	for len(recs.Records) < 2 && time.Now().Before(deadline) {
		out, err := run(t, "history", "-o", "json", "--server", base)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &recs); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(recs.Records) != 2 {
		t.Fatalf("history: %+v", recs.Records)
	}
	a, notok := recs.Records[0], recs.Records[1]
	if a.ID != "a" || a.User != "ann" || a.Model != "L4" || a.State != "succeeded" || a.DeviceHours["nvidia.com/gpu"] <= 0 {
		t.Errorf("a's record: %+v", a)
	}
	if notok.ID != "notok" || notok.State != "skipped" || notok.Reason != "dependency afternotok:a succeeded" {
		t.Errorf("notok's record: %+v", notok)
	}
	if out, err := run(t, "get", "task", "a", "--server", base); err == nil {
		t.Errorf("a is still listed (not retired): %s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--state", "skipped"}, `(?m)^ID +NAME +USER +QUEUE +STATE +EXIT +NODE +DEVICES +STARTED +ELAPSED +CPU-H +GPU-H\nnotok +- +ann +default +skipped +- +- +- +- +- +- +-\n$`},
		{[]string{"usage", "--since", "1h", "--by", "user,model"}, `(?m)^USER +MODEL +TASKS +CPU-HOURS +GPU-HOURS\nann +L4 +1 +\d+\.\d+ +\d+\.\d+\nTOTAL +1 `},
	} {
		out, err := run(t, append(c.args, "--server", base)...)
		if err != nil || !regexp.MustCompile(c.want).MatchString(out) {
			t.Errorf("%v: %v\n%s\nwant %s", c.args, err, out, c.want)
		}
	}
	for _, c := range []struct {
		args  []string
		field string
	}{
		{[]string{"usage", "--by", "colour"}, "by"},
		{[]string{"history", "--since", "yesterday"}, "since"},
		{[]string{"history", "--since", "1h", "--until", "2h"}, "until"},
	} {
		if _, err := run(t, append(c.args, "--server", base)...); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, c.field)
		}
	}
}
