package core

import "github.com/hetsched/hetsched/internal/resource"

// BestFitShare puts a fractional request on the fullest device it fits,
// keeping whole devices free for whole-device requests.
type BestFitShare struct{}

// Name implements Plugin.
func (BestFitShare) Name() string { return "BestFitShare" }

// PickShare implements SharePicker.
func (BestFitShare) PickShare(_ *CycleState, _ *Task, _ *Option, n *Node, cands []int32, _ int64) int32 {
	best := cands[0]
	for _, i := range cands[1:] {
		if n.devices[i].Used > n.devices[best].Used {
			best = i
		}
	}
	return best
}

type domCount struct {
	dom string
	cnt int
}

// DeviceFit is the filter that names concrete devices: for each device
// request of the option on a node that has devices of its type (a pooled
// resource is NodeResourcesFit's alone), it picks the devices and leaves
// them in the CycleState (cs.picked: the placement takes them, and score
// plugins may read them). No devices free: Unschedulable ("no free
// <type> device"; whole devices are counted by NodeResourcesFit, so
// eviction may free them).
type DeviceFit struct {
	picker SharePicker // where a share goes (the policy's)
	cands  []int32     // the devices a share fits (scratch)
	nodev  []*Status   // "no free <type> device", by dim
	// noClass is "no free <type> device of class <c>", by dim and class.
	noClass map[devReq]*Status
	dims    *resource.Dims
}

// Name implements Plugin.
func (*DeviceFit) Name() string { return "DeviceFit" }

// Filter implements FilterPlugin.
func (p *DeviceFit) Filter(cs *CycleState, t *Task, o *Option, n *Node) *Status {
	cs.picked = cs.picked[:0]
	for _, dr := range o.devs {
		if len(n.byDim[dr.dim]) == 0 {
			continue // a pooled resource on this node: the vector check covers it
		}
		if st := p.pick(cs, t, o, n, dr); st != nil {
			return st
		}
	}
	return nil
}

// pick chooses concrete devices for one device request and appends them
// to cs.picked. Whole devices come from one topology domain when
// one has enough free (the fullest such domain), else from the domains with
// most free devices; a share goes where the policy's SharePicker says.
func (p *DeviceFit) pick(cs *CycleState, t *Task, o *Option, n *Node, dr devReq) *Status {
	idxs := n.byDim[dr.dim]
	if dr.milli >= 1000 {
		k := int(dr.milli / 1000)
		var doms [16]domCount
		nd, free := 0, 0
		for _, i := range idxs {
			d := &n.devices[i]
			if !d.Healthy || d.Used != 0 || !d.HasClass(dr.class) {
				continue
			}
			free++
			j := 0
			for j < nd && doms[j].dom != d.Domain {
				j++
			}
			if j == nd {
				if nd == len(doms) {
					j = 0 // more domains than tracked: pool the rest with the first
				} else {
					doms[nd] = domCount{dom: d.Domain}
					nd++
				}
			}
			doms[j].cnt++
		}
		if free < k {
			return p.noDevice(dr)
		}
		best := -1
		for j := 0; j < nd; j++ {
			if doms[j].cnt >= k && (best < 0 || doms[j].cnt < doms[best].cnt) {
				best = j
			}
		}
		need := k
		if best >= 0 {
			need = takeFrom(cs, n, idxs, dr.class, doms[best].dom, need)
		}
		for need > 0 {
			// Spill: the domain with the most free devices left.
			m := -1
			for j := 0; j < nd; j++ {
				if doms[j].cnt > 0 && (m < 0 || doms[j].cnt > doms[m].cnt) {
					m = j
				}
			}
			if m < 0 {
				// Domains beyond the tracked ones were pooled: any free device.
				if need = takeFrom(cs, n, idxs, dr.class, "\x00any", need); need > 0 {
					return p.noDevice(dr)
				}
				break
			}
			before := need
			need = takeFrom(cs, n, idxs, dr.class, doms[m].dom, need)
			doms[m].cnt = 0
			if need == before && nd == len(doms) {
				// Pooled domains: take any free device.
				need = takeFrom(cs, n, idxs, dr.class, "\x00any", need)
			}
		}
		return nil
	}
	cands := p.cands[:0]
	for _, i := range idxs {
		d := &n.devices[i]
		if d.Healthy && int64(d.Free()) >= dr.milli && d.HasClass(dr.class) {
			cands = append(cands, i)
		}
	}
	p.cands = cands
	if len(cands) == 0 {
		return p.noDevice(dr)
	}
	pick := p.picker.PickShare(cs, t, o, n, cands, dr.milli)
	cs.picked = append(cs.picked, devShare{dev: pick, milli: int32(dr.milli)})
	return nil
}

// takeFrom appends up to need free whole devices of class (any for "") and
// domain dom (any domain for "\x00any") not already taken, returning how
// many are still needed.
func takeFrom(cs *CycleState, n *Node, idxs []int32, class, dom string, need int) int {
	for _, i := range idxs {
		if need == 0 {
			break
		}
		d := &n.devices[i]
		if !d.Healthy || d.Used != 0 || (dom != "\x00any" && d.Domain != dom) || !d.HasClass(class) {
			continue
		}
		taken := false
		for _, s := range cs.picked {
			if s.dev == i {
				taken = true
				break
			}
		}
		if taken {
			continue
		}
		cs.picked = append(cs.picked, devShare{dev: i, milli: 1000})
		need--
	}
	return need
}

func (p *DeviceFit) noDevice(dr devReq) *Status {
	if dr.class != "" {
		if p.noClass == nil {
			p.noClass = map[devReq]*Status{}
		}
		key := devReq{dim: dr.dim, class: dr.class}
		st := p.noClass[key]
		if st == nil {
			if len(p.noClass) >= 1024 {
				clear(p.noClass) // bounded: classes come and go
			}
			st = NewUnschedulable("no free " + string(p.dims.Name(dr.dim)) + " device of class " + dr.class)
			p.noClass[key] = st
		}
		return st
	}
	return sharedStatus(&p.nodev, p.dims, dr.dim, Unschedulable, "no free ", " device")
}
