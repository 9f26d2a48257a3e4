package kubewire

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Decoded parts: pods made from one template (a Deployment's, a Job's, a
// bench's) carry the same containers and tolerations, byte for byte, in
// every pod and in every version of a pod (a binding, a status update
// leave them as they were). The lean decoder decodes each distinct list
// of containers (of init containers, of tolerations) once and gives
// every pod that carries the same bytes the same slice: its elements and
// what they point to (the resources' maps, a toleration's seconds) are
// shared. Informer objects are read-only, so this is safe as long as
// nothing writes to a cached pod, which nothing in this package does; an
// append to a shared slice copies it (its capacity is its length).
//
// The cache is bounded by the bytes of its keys: two generations of at
// most partGenerationBytes each; a part found in the older one moves to
// the newer, and when the newer is full the older is dropped. A part
// longer than maxPartBytes is never kept (it is decoded every time).

const (
	partGenerationBytes = 4 << 20
	maxPartBytes        = 16 << 10
)

// partCache maps a part's bytes to its decoded value.
type partCache[T any] struct {
	mu       sync.Mutex
	cur, old map[string]T
	curBytes int
	// sums are the held values' checksums when they were cached (only
	// in the partsGuard build).
	sums map[string]uint64
}

// get is the value decoded from b, when it is held.
func (c *partCache[T]) get(b []byte) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[string(b)]; ok {
		c.verify(b, v)
		return v, true
	}
	if v, ok := c.old[string(b)]; ok {
		c.verify(b, v)
		c.putLocked(b, v)
		return v, true
	}
	var zero T
	return zero, false
}

// put holds v as what b decodes to.
func (c *partCache[T]) put(b []byte, v T) {
	if len(b) > maxPartBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(b, v)
}

func (c *partCache[T]) putLocked(b []byte, v T) {
	if c.cur == nil || c.curBytes+len(b) > partGenerationBytes {
		c.evicted(c.old)
		c.old, c.cur, c.curBytes = c.cur, map[string]T{}, 0
	}
	if _, ok := c.cur[string(b)]; !ok {
		c.cur[string(b)] = v
		c.curBytes += len(b)
		if _, ok := c.sums[string(b)]; partsGuard && !ok {
			if c.sums == nil {
				c.sums = map[string]uint64{}
			}
			c.sums[string(b)] = checksum(v)
		}
	}
}

// verify panics, in the partsGuard build, when v, held for b, is not
// what was cached: something wrote to a part pods share.
func (c *partCache[T]) verify(b []byte, v T) {
	if !partsGuard {
		return
	}
	if want, ok := c.sums[string(b)]; ok && checksum(v) != want {
		panic(fmt.Sprintf("kubewire: a shared decoded part was written after it was cached (%d bytes of protobuf, now %+v)", len(b), v))
	}
}

// evicted verifies the parts of a generation being dropped, and forgets
// the checksums of those no longer held.
func (c *partCache[T]) evicted(gen map[string]T) {
	if !partsGuard {
		return
	}
	for k, v := range gen {
		c.verify([]byte(k), v)
		if _, held := c.cur[k]; !held {
			delete(c.sums, k)
		}
	}
}

// checksum is a hash of v's content, through its pointers and maps
// (encoding/json sorts map keys).
func checksum(v any) uint64 {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("kubewire: checksum of a decoded part: %v", err))
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// len is how many parts are held (both generations; one in both counts
// twice).
func (c *partCache[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// decodedParts are the lean decoder's caches, keyed by a run of a
// repeated field's elements (decodeKeeping); a nil *decodedParts decodes
// every run.
type decodedParts struct {
	containers  partCache[[]corev1.Container]
	tolerations partCache[[]corev1.Toleration]
}

// containerList decodes run, n Container messages, as lean containers.
// The slice may be shared with other pods: its capacity is its length.
func (d *decodedParts) containerList(run []byte, n int) ([]corev1.Container, error) {
	var c *partCache[[]corev1.Container]
	if d != nil {
		c = &d.containers
	}
	return decodeList(c, run, n, func(m *corev1.Container, v []byte) error {
		return decodeKeeping(m, v, leanContainerFields, 0, nil)
	})
}

// tolerationList decodes run, n Toleration messages; as containerList.
func (d *decodedParts) tolerationList(run []byte, n int) ([]corev1.Toleration, error) {
	var c *partCache[[]corev1.Toleration]
	if d != nil {
		c = &d.tolerations
	}
	return decodeList(c, run, n, (*corev1.Toleration).Unmarshal)
}

// decodeList is the list run (n messages) decodes to, each message by
// decode: held in c, or decoded and then held (c nil: decoded, never
// held).
func decodeList[T any](c *partCache[[]T], run []byte, n int, decode func(*T, []byte) error) ([]T, error) {
	if c != nil {
		if v, ok := c.get(run); ok {
			return v, nil
		}
	}
	out := make([]T, 0, n)
	err := eachBytesField(run, func(v []byte) error {
		var zero T
		out = append(out, zero)
		return decode(&out[len(out)-1], v)
	})
	if err == nil && c != nil {
		c.put(run, out)
	}
	return out, err
}
