// Package api holds the wire types of hetsched's HTTP API and files
// (../shared/API.md): tasks, nodes, devices, with field-level validation.
// The server, CLI, simulator and core share these types; the core converts a
// validated spec into its own compact form once, at submission.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Duration is a Go duration written as a string ("250ms", "30m") in JSON.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string; a bare number is seconds.
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
// string ("250ms", "30m") when quoted, else a number of seconds.
func ParseDuration(text string, quoted bool) (Duration, error) {
	if quoted {
		v, err := time.ParseDuration(text)
		if err != nil {
			return 0, fmt.Errorf("not a duration like \"250ms\" or \"30m\": %q", errs.Clip(text))
		}
		return Duration(v), nil
	}
	secs, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("not a duration: %s", text)
	}
	if secs > float64(1<<62)/1e9 || secs < -float64(1<<62)/1e9 {
		return 0, fmt.Errorf("duration out of range: %s", text)
	}
	return Duration(secs * 1e9), nil
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
