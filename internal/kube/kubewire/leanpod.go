package kubewire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
)

// The lean pod: the Scheduler's pod cache keeps of a pod what it reads,
// and nothing else. Of the spec: the containers' and init containers'
// names, resources, restart policies and ports (what kube-scheduler's
// request arithmetic and NodePorts read), the pod's resources and
// overhead, node selector, affinity, tolerations, topology spread
// constraints, node name, scheduler name, priority, priority class and
// preemption policy, scheduling gates, resource claims, volumes and
// scheduling group (the fields it refuses are read too: fields.go). Of
// the status: the phase, the containers' names and states (a failed pod's
// exit code) and the resource claims' statuses. The metadata is whole
// but for its managedFields. The rest (images, commands, environments,
// volumes, probes, conditions, addresses) is never looked at; leaving
// it out makes a cached pod smaller and decoding it cheaper (a bench
// run allocated 394 MB instead of 449, 312 once containers were decoded
// in place: BENCHMARKS.md, runs AC).
//
// Two paths make lean pods and must agree: decodeLeanPod decodes only
// the kept fields from a watch event's bytes (the leanPod*Fields sets,
// by protobuf field number), and leanPod trims a decoded pod (a listed
// one, or one client-go decoded) to the same fields (the informer's
// transform). TestLeanPodPathsAgree holds them to it.

// fieldSet is a set of protobuf field numbers below 64.
type fieldSet uint64

func fields(nums ...protowire.Number) fieldSet {
	var s fieldSet
	for _, n := range nums {
		s |= 1 << n
	}
	return s
}

func (s fieldSet) has(n protowire.Number) bool { return n < 64 && s&(1<<n) != 0 }

// The fields kept, by their numbers in k8s.io/api/core/v1's (and
// apimachinery's meta/v1) generated.proto.
var (
	// ObjectMeta: all but managedFields (its fields are numbered 1–17).
	leanMetaFields = ^fields(metaManagedFields)
	// PodSpec: volumes 1, containers 2, nodeSelector 7, nodeName 10,
	// affinity 18, schedulerName 19, initContainers 20, tolerations 22,
	// priorityClassName 24, priority 25, preemptionPolicy 31, overhead
	// 32, topologySpreadConstraints 33, schedulingGates 38,
	// resourceClaims 39, resources 40, schedulingGroup 43.
	leanPodSpecFields = fields(1, 2, 7, 10, 18, 19, 20, 22, 24, 25, 31, 32, 33, 38, 39, 40, 43)
	// Container: name 1, ports 6, resources 8, restartPolicy 24.
	leanContainerFields = fields(1, 6, 8, 24)
	// PodStatus: phase 1, conditions 2 (PodResizePending only),
	// containerStatuses 8, initContainerStatuses 10,
	// resourceClaimStatuses 15, allocatedResources 19, resources 20 (what
	// a resized pod's request is read from, as NodeResourcesFit does).
	leanPodStatusFields = fields(1, 2, 8, 10, 15, 19, 20)
	// ContainerStatus: name 1, state 2, allocatedResources 10,
	// resources 11.
	leanContainerStatusFields = fields(1, 2, 10, 11)
)

const (
	podSpecContainers        = 2
	podSpecInitContainers    = 20
	podSpecTolerations       = 22
	podStatusConditions      = 2
	podStatusContainerStatus = 8
	podStatusInitStatus      = 10
)

// leanPod trims p, in place, to the lean pod's fields.
func leanPod(p *corev1.Pod) {
	p.ManagedFields = nil
	s := &p.Spec
	*s = corev1.PodSpec{
		Containers: leanContainers(s.Containers), NodeSelector: s.NodeSelector, NodeName: s.NodeName,
		Affinity: s.Affinity, SchedulerName: s.SchedulerName, InitContainers: leanContainers(s.InitContainers),
		Tolerations: s.Tolerations, PriorityClassName: s.PriorityClassName, Priority: s.Priority,
		PreemptionPolicy: s.PreemptionPolicy, Overhead: s.Overhead, SchedulingGates: s.SchedulingGates,
		TopologySpreadConstraints: s.TopologySpreadConstraints, Volumes: s.Volumes, SchedulingGroup: s.SchedulingGroup,
		ResourceClaims: s.ResourceClaims, Resources: s.Resources,
	}
	st := &p.Status
	leanStatuses(st.ContainerStatuses)
	leanStatuses(st.InitContainerStatuses)
	*st = corev1.PodStatus{Phase: st.Phase, Conditions: ResizeConditions(st.Conditions), ContainerStatuses: st.ContainerStatuses,
		InitContainerStatuses: st.InitContainerStatuses, ResourceClaimStatuses: st.ResourceClaimStatuses,
		AllocatedResources: st.AllocatedResources, Resources: st.Resources}
}

// leanStatuses trims container statuses in place.
func leanStatuses(cs []corev1.ContainerStatus) {
	for i, c := range cs {
		cs[i] = corev1.ContainerStatus{Name: c.Name, State: c.State, AllocatedResources: c.AllocatedResources, Resources: c.Resources}
	}
}

// ResizeConditions keeps the PodResizePending condition of conds (an
// infeasible resize changes the request), nil when there is none.
func ResizeConditions(conds []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range conds {
		if c.Type == corev1.PodResizePending {
			out = append(out, c)
		}
	}
	return out
}

// leanContainers trims cs in place; a container already lean is not
// written: the lean decoder's lists are shared by pods (leanparts.go),
// and the informer's transform trims watched pods again.
func leanContainers(cs []corev1.Container) []corev1.Container {
	for i, c := range cs {
		l := corev1.Container{Name: c.Name, Ports: c.Ports, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		c.Name, c.Ports, c.Resources, c.RestartPolicy = "", nil, corev1.ResourceRequirements{}, nil
		if !reflect.ValueOf(c).IsZero() {
			cs[i] = l
		}
	}
	return cs
}

// decodeLeanSpec decodes PodSpec bytes b into s (zero), only the lean
// pod's fields; containers and init containers are trimmed as they are
// decoded. The containers, init containers and tolerations come from
// parts when another pod had the same bytes (nil parts: never).
func decodeLeanSpec(s *corev1.PodSpec, b []byte, parts *decodedParts) error {
	return decodeKeeping(s, b, leanPodSpecFields, fields(podSpecContainers, podSpecInitContainers, podSpecTolerations), func(num protowire.Number, run []byte, n int) error {
		if num == podSpecTolerations {
			tols, err := parts.tolerationList(run, n)
			s.Tolerations = appendShared(s.Tolerations, tols)
			return err
		}
		cs, err := parts.containerList(run, n)
		if num == podSpecInitContainers {
			s.InitContainers = appendShared(s.InitContainers, cs)
		} else {
			s.Containers = appendShared(s.Containers, cs)
		}
		return err
	})
}

// decodeLeanStatus decodes PodStatus bytes b into s (zero), only the
// lean pod's fields; container statuses are trimmed and conditions other
// than PodResizePending left out as they are decoded.
func decodeLeanStatus(s *corev1.PodStatus, b []byte) error {
	return decodeKeeping(s, b, leanPodStatusFields, fields(podStatusConditions, podStatusContainerStatus, podStatusInitStatus), func(num protowire.Number, run []byte, n int) error {
		if num == podStatusConditions {
			return eachBytesField(run, func(v []byte) error {
				var c corev1.PodCondition
				if err := c.Unmarshal(v); err != nil {
					return err
				}
				if c.Type == corev1.PodResizePending {
					s.Conditions = append(s.Conditions, c)
				}
				return nil
			})
		}
		list := &s.ContainerStatuses
		if num == podStatusInitStatus {
			list = &s.InitContainerStatuses
		}
		*list = slices.Grow(*list, n)
		return eachBytesField(run, func(v []byte) error {
			*list = append(*list, corev1.ContainerStatus{})
			return decodeKeeping(&(*list)[len(*list)-1], v, leanContainerStatusFields, 0, nil)
		})
	})
}

// unmarshaler is a generated message: its Unmarshal merges the fields of
// its bytes into what it holds.
type unmarshaler interface{ Unmarshal([]byte) error }

// decodeKeeping decodes message bytes b into m, the fields keep has and
// no others: each run of kept fields goes to m's generated Unmarshal in
// turn (it merges, as one call over all of b would), with no copy of b.
// The fields own has (length-delimited ones, among keep's) go to
// decodeOwn instead, a run of one field's consecutive occurrences at a
// time (its bytes, tags included, and how many there are: a repeated
// field's elements are one run as the generated Marshal writes them);
// own may be empty and decodeOwn nil.
func decodeKeeping(m unmarshaler, b []byte, keep, own fieldSet, decodeOwn func(num protowire.Number, run []byte, n int) error) error {
	start, at := 0, 0 // start: the first kept byte not yet decoded
	var runNum protowire.Number
	runStart, runLen := 0, 0
	endRun := func(end int) error {
		if runLen == 0 {
			return nil
		}
		n := runLen
		runLen = 0
		return decodeOwn(runNum, b[runStart:end], n)
	}
	for at < len(b) {
		num, typ, n := protowire.ConsumeTag(b[at:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[at+n:])
		if vn < 0 {
			return protowire.ParseError(vn)
		}
		next := at + n + vn
		if runLen > 0 && num != runNum {
			if err := endRun(at); err != nil {
				return err
			}
		}
		if !keep.has(num) || own.has(num) {
			if at > start {
				if err := m.Unmarshal(b[start:at]); err != nil {
					return err
				}
			}
			if own.has(num) {
				if typ != protowire.BytesType {
					return fmt.Errorf("field %d: wire type %d, not length-delimited", num, typ)
				}
				if runLen == 0 {
					runNum, runStart = num, at
				}
				runLen++
			}
			start = next
		}
		at = next
	}
	if err := endRun(at); err != nil {
		return err
	}
	if at > start {
		return m.Unmarshal(b[start:at])
	}
	return nil
}

// eachBytesField calls fn with each field's bytes in run, a run of
// length-delimited fields (decodeKeeping checked them).
func eachBytesField(run []byte, fn func(v []byte) error) error {
	for len(run) > 0 {
		_, v, rest, ok := nextBytesField(run)
		if !ok {
			return errTornRun
		}
		if err := fn(v); err != nil {
			return err
		}
		run = rest
	}
	return nil
}

var errTornRun = errors.New("a torn field")

// appendShared is to followed by from, where from may be shared: when to
// is empty it is from itself (whose capacity is its length, so an append
// to it copies), else a copy.
func appendShared[T any](to, from []T) []T {
	if len(to) == 0 {
		return from
	}
	return append(to[:len(to):len(to)], from...)
}
