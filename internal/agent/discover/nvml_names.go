package discover

import (
	"fmt"
	"math"
	"strings"
)

// The naming rules of the NVML source. They need no NVML, so they live in
// every build and the default test run checks them.

// gpuModel turns an NVML device name into a device model, which must be a
// valid label value:
//   - drop the brand words NVIDIA, Tesla, GeForce and Quadro (any case);
//   - drop memory-technology words (HBM2, HBM2e, HBM3e, GDDR6X, ...);
//   - join the remaining words with '-', turn every character other than
//     letters, digits, '-', '_' and '.' into '-', squeeze runs of '-', trim
//     non-alphanumerics from both ends and cut to 63 bytes;
//   - an empty result is "gpu".
//
// So "NVIDIA H100 80GB HBM3" is "H100-80GB", "NVIDIA A100-SXM4-80GB" is
// "A100-SXM4-80GB", "Tesla V100-SXM2-16GB" is "V100-SXM2-16GB" and "NVIDIA
// GeForce RTX 4090" is "RTX-4090". Case is kept.
func gpuModel(name string) string {
	var words []string
	for _, w := range strings.Fields(name) {
		switch strings.ToLower(w) {
		case "nvidia", "tesla", "geforce", "quadro":
			continue
		}
		if memoryTechnology(w) {
			continue
		}
		words = append(words, w)
	}
	if m := labelValue(strings.Join(words, "-")); m != "" {
		return m
	}
	return "gpu"
}

// memoryTechnology reports whether w names a memory type: HBM or GDDR, a
// generation number, and an optional letter suffix ("HBM3e", "GDDR6X").
func memoryTechnology(w string) bool {
	u := strings.ToUpper(w)
	rest, ok := strings.CutPrefix(u, "HBM")
	if !ok {
		if rest, ok = strings.CutPrefix(u, "GDDR"); !ok {
			return false
		}
	}
	digits := 0
	for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	suffix := rest[digits:]
	return len(suffix) <= 1 && (suffix == "" || suffix[0] >= 'A' && suffix[0] <= 'Z')
}

// labelValue makes s a valid label value by the rule gpuModel describes;
// the result may be empty.
func labelValue(s string) string {
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !alnum(c) && c != '_' && c != '.' {
			c = '-'
		}
		if c == '-' && len(b) > 0 && b[len(b)-1] == '-' {
			continue
		}
		b = append(b, c)
	}
	if len(b) > 63 {
		b = b[:63]
	}
	for len(b) > 0 && !alnum(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && !alnum(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return string(b)
}

// migModel is the model of a MIG instance: its parent's model, "-MIG-" and
// the profile name ("A100-SXM4-40GB-MIG-1g.5gb"), made a label value.
func migModel(parentModel, profile string) string {
	return labelValue(parentModel + "-MIG-" + profile)
}

// migProfileName names a GPU instance profile the way NVIDIA does,
// "<slices>g.<GB>gb": the instance's share of the parent's memory is
// rounded up to an eighth, then scaled by the parent's memory in whole GB
// (rounded up) and rounded to the nearest GB. This is the rule NVIDIA's
// Kubernetes device plugin uses for its nvidia.com/mig-* resource names;
// a parent of unknown size falls back to the instance's own size rounded
// up to a GB.
func migProfileName(slices uint32, instanceMB, parentBytes uint64) string {
	const mib, gib = 1 << 20, 1 << 30
	var gb uint64
	if parentBytes == 0 {
		gb = (instanceMB + 1023) / 1024
	} else {
		share := float64(instanceMB) * mib / float64(parentBytes)
		share = math.Ceil(share*8) / 8
		gb = uint64(math.Round(share * float64((parentBytes+gib-1)/gib)))
	}
	return fmt.Sprintf("%dg.%dgb", slices, gb)
}

// fatalXID reports whether an XID critical error means the GPU needs
// attention. The application errors NVIDIA's Kubernetes device plugin
// ignores (13 graphics engine exception, 31 GPU memory page fault, 43 GPU
// stopped processing, 45 preemptive cleanup, 68 video processor exception,
// 109 context switch timeout) are caused by a program, not the GPU, and
// are not fatal; every other XID is.
func fatalXID(xid uint64) bool {
	switch xid {
	case 13, 31, 43, 45, 68, 109:
		return false
	}
	return true
}

// unionFind groups GPUs into NVLink domains; keys are "gpu:<index>" or
// "pci:<address>" (an NVSwitch or other link endpoint).
type unionFind map[string]string

// find returns k's root; roots are the keys with no parent entry.
func (u unionFind) find(k string) string {
	for {
		p, ok := u[k]
		if !ok {
			return k
		}
		if gp, ok := u[p]; ok {
			u[k] = gp // path halving
		}
		k = p
	}
}

func (u unionFind) union(a, b string) {
	if ra, rb := u.find(a), u.find(b); ra != rb {
		u[ra] = rb
	}
}

// nvlinkDomains labels the GPUs (given by index, in order) that share an
// NVLink component with at least one other GPU: "nv0" for the component
// of the lowest such index, "nv1" for the next, and so on. GPUs alone in
// their component get no label.
func nvlinkDomains(gpus []int, u unionFind) map[int]string {
	members := map[string][]int{}
	var roots []string
	for _, g := range gpus {
		r := u.find(gpuKey(g))
		if _, ok := members[r]; !ok {
			roots = append(roots, r)
		}
		members[r] = append(members[r], g)
	}
	out := map[int]string{}
	k := 0
	for _, r := range roots {
		if len(members[r]) < 2 {
			continue
		}
		for _, g := range members[r] {
			out[g] = fmt.Sprintf("nv%d", k)
		}
		k++
	}
	return out
}

func gpuKey(index int) string { return fmt.Sprintf("gpu:%d", index) }
