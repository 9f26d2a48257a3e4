package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/resource"
)

// AccountingRecord is what the control plane keeps of a task once it
// ended, after the task itself is retired (Slurm's sacct record): who
// ran it, where, on what, when, how it ended, and what it used. It is
// written with the task's final state, in the same durable commit.
type AccountingRecord struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Job    string `json:"job,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	User   string `json:"user,omitempty"`
	Queue  string `json:"queue"`
	// Priority is its tier.
	Priority int    `json:"priority"`
	State    string `json:"state"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Node, Devices and Model are its last run's (Model: its devices'
	// model, "+"-joined when they differ; empty without devices).
	Node    string      `json:"node,omitempty"`
	Devices []DeviceRef `json:"devices,omitempty"`
	Model   string      `json:"model,omitempty"`
	// Resources is what it held while placed (its chosen alternative's
	// request).
	Resources resource.List `json:"resources,omitempty"`
	Submitted time.Time     `json:"submitted"`
	Started   *time.Time    `json:"started,omitempty"`
	Finished  time.Time     `json:"finished"`
	// Attempts counts its runs (placements), Runs lists them: each held
	// its resources and devices from its placement to its end. Earlier
	// runs beyond the task's kept history (10) are counted, not listed.
	Attempts int   `json:"attempts"`
	Runs     []Run `json:"runs,omitempty"`
	// CPUHours and DeviceHours (per device type, shares counted as
	// fractions) are what its listed runs held.
	CPUHours    float64            `json:"cpuHours"`
	DeviceHours map[string]float64 `json:"deviceHours,omitempty"`
}

// Run is one placement of a task: its node, devices, and when it held
// them (from its placement to its end).
type Run struct {
	Node    string      `json:"node,omitempty"`
	Devices []DeviceRef `json:"devices,omitempty"`
	From    time.Time   `json:"from"`
	To      time.Time   `json:"to"`
}

// UsageReport is the usage of finished and running work over a time range
// (Slurm's sreport), grouped by the fields in By; every run counts for
// the part of it inside [Since, Until).
type UsageReport struct {
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	By    []string   `json:"by"`
	Rows  []UsageRow `json:"rows"`
	// Total sums every row.
	Total UsageRow `json:"total"`
}

// UsageRow is one group's usage: Group holds the value of each By field
// ("" for none); Tasks counts the tasks with time in the range.
type UsageRow struct {
	Group       map[string]string  `json:"group,omitempty"`
	Tasks       int                `json:"tasks"`
	CPUHours    float64            `json:"cpuHours"`
	DeviceHours map[string]float64 `json:"deviceHours,omitempty"`
}

// UsageGroups are the fields usage groups by.
var UsageGroups = []string{"tenant", "user", "queue", "model", "node", "state", "job"}

// ParseTime reads a point in time as the accounting queries take it:
// RFC 3339 (2026-12-01T08:00:00Z), a date (2026-12-01, midnight UTC), or
// an age before now: a Go duration (36h, 90m) or days (7d).
func ParseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("empty")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 && n <= 100*366 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give RFC 3339 (2026-12-01T08:00:00Z), a date (2026-12-01) or an age (7d, 36h, 90m)", truncate(s))
}
