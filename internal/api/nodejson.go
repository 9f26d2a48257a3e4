package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// UnmarshalJSON decodes a node strictly (unknown fields and members given
// twice are errors, as in every file and body of API.md) with errors
// naming the field inside the node: "capacity.cpu", "devices[2].memory",
// "labels".
func (n *Node) UnmarshalJSON(b []byte) error {
	type plain Node
	var raw struct {
		plain
		Capacity json.RawMessage   `json:"capacity,omitempty"`
		Devices  []json.RawMessage `json:"devices,omitempty"`
	}
	if err := strictJSON(b, &raw); err != nil {
		return err
	}
	*n = Node(raw.plain)
	n.Capacity, n.Devices = nil, nil
	if len(raw.Capacity) > 0 && string(raw.Capacity) != "null" {
		if err := n.Capacity.UnmarshalJSON(raw.Capacity); err != nil {
			return errs.Prefix("capacity", err)
		}
	}
	if len(raw.Devices) > MaxNodeDevices {
		return errs.Invalid("devices", "at most %d devices", MaxNodeDevices)
	}
	for i, d := range raw.Devices {
		var dev Device
		if err := strictJSON(d, &dev); err != nil {
			return errs.Prefix("devices["+strconv.Itoa(i)+"]", err)
		}
		n.Devices = append(n.Devices, dev)
	}
	return CheckDuplicates(b, n)
}

// strictJSON decodes one JSON value into v, rejecting unknown fields and
// trailing data; errors are *errs.Error naming the field where known.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var e *errs.Error
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &e):
			return e
		case errors.As(err, &typeErr):
			return errs.Invalid(strings.TrimPrefix(typeErr.Field, "plain."), "must be %s, got %s", typeErr.Type, typeErr.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return errs.Invalid(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "unknown field")
		}
		return errs.Invalid("", "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Invalid("", "unexpected data after the JSON value")
	}
	return nil
}
