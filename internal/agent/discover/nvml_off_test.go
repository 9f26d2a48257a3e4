//go:build !nvml

package discover

import "testing"

func TestNVMLWithoutTheTagFindsNothingAndSaysHowToBuild(t *testing.T) {
	var (
		_ Source  = (*NVML)(nil)
		_ Monitor = (*NVML)(nil)
	)
	if NVMLAvailable() {
		t.Fatal("NVMLAvailable() in a build without the nvml tag")
	}
	n := &NVML{}
	devs, note, err := n.Devices()
	want := "this hetsched was built without the nvml tag, so it reports no NVIDIA GPUs (build with: go build -tags nvml ./cmd/hetsched)"
	if len(devs) != 0 || note != want || err != nil {
		t.Fatalf("Devices() = %v, %q, %v", devs, note, err)
	}
	if n.Name() != "nvml" {
		t.Fatalf("Name() = %q", n.Name())
	}
	if s, err := n.Sample(); len(s) != 0 || err != nil {
		t.Fatalf("Sample() = %v, %v", s, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
