package discover

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
)

func TestGPUModelNormalisesNVMLNames(t *testing.T) {
	cases := map[string]string{
		"NVIDIA H100 80GB HBM3":      "H100-80GB",
		"NVIDIA H200":                "H200",
		"NVIDIA H200 141GB HBM3e":    "H200-141GB",
		"NVIDIA A100-SXM4-80GB":      "A100-SXM4-80GB",
		"NVIDIA A100-SXM4-40GB":      "A100-SXM4-40GB",
		"NVIDIA A100-PCIE-40GB":      "A100-PCIE-40GB",
		"NVIDIA A100 80GB PCIe":      "A100-80GB-PCIe",
		"Tesla V100-SXM2-16GB":       "V100-SXM2-16GB",
		"Tesla T4":                   "T4",
		"NVIDIA GeForce RTX 4090":    "RTX-4090",
		"NVIDIA GeForce GTX 1080 Ti": "GTX-1080-Ti",
		"Quadro RTX 8000":            "RTX-8000",
		"NVIDIA RTX A6000":           "RTX-A6000",
		"NVIDIA L4":                  "L4",
		"NVIDIA H100 NVL":            "H100-NVL",
		"NVIDIA GH200 480GB":         "GH200-480GB",
		"NVIDIA B200 180GB HBM3e":    "B200-180GB",
		"Mock NVIDIA A100-SXM4-40GB": "Mock-A100-SXM4-40GB",
		"  NVIDIA   A10  ":           "A10",
		"NVIDIA A100 (test)/x+y":     "A100-test-x-y",
		"":                           "gpu",
		"NVIDIA":                     "gpu",
		"NVIDIA ---":                 "gpu",
	}
	for name, want := range cases {
		got := gpuModel(name)
		if got != want {
			t.Errorf("gpuModel(%q) = %q, want %q", name, got, want)
		}
		if err := api.ValidateLabelValue(got); err != nil {
			t.Errorf("gpuModel(%q): %v", name, err)
		}
	}
	long := gpuModel("NVIDIA " + strings.Repeat("X", 62) + " -Y")
	if len(long) != 62 || api.ValidateLabelValue(long) != nil {
		t.Errorf("long name: %q", long)
	}
	if m := migModel("A100-SXM4-40GB", "1g.5gb"); m != "A100-SXM4-40GB-MIG-1g.5gb" {
		t.Errorf("migModel = %q", m)
	}
	if m := migModel(strings.Repeat("A", 60), "7g.80gb"); len(m) > 63 || api.ValidateLabelValue(m) != nil {
		t.Errorf("long migModel = %q", m)
	}
}

func TestMIGProfileNamesFollowNVIDIA(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		slices     uint32
		mb, parent uint64
		want       string
	}{
		// A100 40GB, as the driver reports it (40536 MiB) and as the mock does.
		{1, 4864, 40536 << 20, "1g.5gb"},
		{1, 4864, 40 * gib, "1g.5gb"},
		{2, 9856, 40 * gib, "2g.10gb"},
		{3, 19968, 40 * gib, "3g.20gb"},
		{4, 19968, 40 * gib, "4g.20gb"},
		{7, 40192, 40 * gib, "7g.40gb"},
		// A100 80GB.
		{1, 9856, 80 * gib, "1g.10gb"},
		{7, 80384, 81920 << 20, "7g.80gb"},
		// Unknown parent size: the instance's size, rounded up.
		{1, 4864, 0, "1g.5gb"},
	}
	for _, c := range cases {
		if got := migProfileName(c.slices, c.mb, c.parent); got != c.want {
			t.Errorf("migProfileName(%d, %d, %d) = %q, want %q", c.slices, c.mb, c.parent, got, c.want)
		}
	}
}

func TestFatalXIDsSkipApplicationErrors(t *testing.T) {
	for _, xid := range []uint64{13, 31, 43, 45, 68, 109} {
		if fatalXID(xid) {
			t.Errorf("XID %d is an application error", xid)
		}
	}
	for _, xid := range []uint64{48, 63, 64, 74, 79, 92, 94, 95, 119} {
		if !fatalXID(xid) {
			t.Errorf("XID %d is fatal", xid)
		}
	}
}

func TestNVLinkDomainsAreConnectedComponents(t *testing.T) {
	u := unionFind{}
	// 0 and 1 through a switch, 1 and 2 directly; 4 and 5 through
	// another switch; 3 alone; 6 only on a switch nobody else uses.
	u.union(gpuKey(1), "pci:sw0")
	u.union(gpuKey(0), "pci:sw0")
	u.union(gpuKey(2), gpuKey(1))
	u.union(gpuKey(5), "pci:sw1")
	u.union(gpuKey(4), "pci:sw1")
	u.union(gpuKey(6), "pci:sw2")
	got := nvlinkDomains([]int{0, 1, 2, 3, 4, 5, 6}, u)
	want := map[int]string{0: "nv0", 1: "nv0", 2: "nv0", 4: "nv1", 5: "nv1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	// Numbering follows the lowest GPU index, not the order of unions.
	u = unionFind{}
	u.union(gpuKey(6), gpuKey(7))
	u.union(gpuKey(1), gpuKey(0))
	got = nvlinkDomains([]int{0, 1, 6, 7}, u)
	want = map[int]string{0: "nv0", 1: "nv0", 6: "nv1", 7: "nv1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}
