package kube

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Decoded parts: pods made from one template (a Deployment's, a Job's, a
// bench's) carry the same containers and tolerations, byte for byte, in
// every pod and in every version of a pod (a binding, a status update
// leave them as they were). The lean decoder decodes each distinct
// container's and toleration's bytes once and gives every pod that
// carries them the same decoded value: the Container and Toleration
// structs are copied, what they point to (the resources' maps, a
// toleration's seconds) is shared. Informer objects are read-only, so
// sharing what they point to is safe as long as nothing writes to a
// cached pod, which nothing in this package does.
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
}

// get is the value decoded from b, when it is held.
func (c *partCache[T]) get(b []byte) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[string(b)]; ok {
		return v, true
	}
	if v, ok := c.old[string(b)]; ok {
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
		c.old, c.cur, c.curBytes = c.cur, map[string]T{}, 0
	}
	if _, ok := c.cur[string(b)]; !ok {
		c.cur[string(b)] = v
		c.curBytes += len(b)
	}
}

// len is how many parts are held (both generations; one in both counts
// twice).
func (c *partCache[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// decodedParts are the lean decoder's caches; a nil *decodedParts decodes
// every part.
type decodedParts struct {
	containers  partCache[corev1.Container]
	tolerations partCache[corev1.Toleration]
}

// container decodes a lean Container from b into c (zero).
func (d *decodedParts) container(c *corev1.Container, b []byte) error {
	if d != nil {
		if v, ok := d.containers.get(b); ok {
			*c = v
			return nil
		}
	}
	if err := decodeKeeping(c, b, leanContainerFields, 0, nil); err != nil {
		return err
	}
	if d != nil {
		d.containers.put(b, *c)
	}
	return nil
}

// toleration decodes a Toleration from b into t (zero).
func (d *decodedParts) toleration(t *corev1.Toleration, b []byte) error {
	if d != nil {
		if v, ok := d.tolerations.get(b); ok {
			*t = v
			return nil
		}
	}
	if err := t.Unmarshal(b); err != nil {
		return err
	}
	if d != nil {
		d.tolerations.put(b, *t)
	}
	return nil
}
