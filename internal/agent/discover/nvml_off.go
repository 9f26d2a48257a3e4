//go:build !nvml

package discover

import "github.com/hetsched/hetsched/internal/api"

// NVMLAvailable reports whether this binary was built with the nvml tag,
// that is whether NVML can find GPUs at all.
func NVMLAvailable() bool { return false }

// NVML stands in for the NVML source in a build without the nvml tag: it
// finds no GPUs and its note says how to build a binary that does. Its
// methods are those of the real one, on a pointer receiver as there, so
// that callers compile either way.
type NVML struct{}

// nvmlOffNote is the note Devices returns.
const nvmlOffNote = "this hetsched was built without the nvml tag, so it reports no NVIDIA GPUs (build with: go build -tags nvml ./cmd/hetsched)"

func (*NVML) Name() string { return "nvml" }

// Devices returns no devices and nvmlOffNote.
func (*NVML) Devices() ([]api.Device, string, error) { return nil, nvmlOffNote, nil }

// Sample reports nothing, as there are no devices.
func (*NVML) Sample() (map[string]DeviceSample, error) { return map[string]DeviceSample{}, nil }

// Close does nothing.
func (*NVML) Close() error { return nil }
