package core

// heapOps orders the elements of an indexed binary heap and records where
// each element sits, so that any element can be removed or fixed in
// O(log n). Implementations are zero-size types.
type heapOps[T any] interface {
	less(a, b T) bool
	setPos(x T, i int)
}

// heapUp moves s[i] up until its parent is not greater.
func heapUp[T any, O heapOps[T]](s []T, i int) {
	var o O
	for i > 0 {
		p := (i - 1) / 2
		if !o.less(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		o.setPos(s[i], i)
		o.setPos(s[p], p)
		i = p
	}
}

// heapDown moves s[i0] down until no child is smaller; it reports whether
// the element moved.
func heapDown[T any, O heapOps[T]](s []T, i0 int) bool {
	var o O
	n := len(s)
	i := i0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && o.less(s[r], s[l]) {
			j = r
		}
		if !o.less(s[j], s[i]) {
			break
		}
		s[i], s[j] = s[j], s[i]
		o.setPos(s[i], i)
		o.setPos(s[j], j)
		i = j
	}
	return i > i0
}

// heapRemove removes s[i], returning the shortened slice; the removed
// element's position is not touched (the caller resets it).
func heapRemove[T any, O heapOps[T]](s []T, i int) []T {
	var o O
	var zero T
	n := len(s) - 1
	if i != n {
		s[i] = s[n]
		o.setPos(s[i], i)
	}
	s[n] = zero
	s = s[:n]
	if i != n {
		heapFix[T, O](s, i)
	}
	return s
}

// heapFix restores order after s[i] changed.
func heapFix[T any, O heapOps[T]](s []T, i int) {
	if !heapDown[T, O](s, i) {
		heapUp[T, O](s, i)
	}
}

// byQueueOrder orders a class queue's tasks.
type byQueueOrder struct{}

func (byQueueOrder) less(a, b *Task) bool  { return taskLess(a, b) }
func (byQueueOrder) setPos(x *Task, i int) { x.cqpos = int32(i) }

// byDeadline orders the timer heap.
type byDeadline struct{}

func (byDeadline) less(a, b *Task) bool  { return tLess(a, b) }
func (byDeadline) setPos(x *Task, i int) { x.tpos = int32(i) }

// byHead orders a tier's active class queues by their heads.
type byHead struct{}

func (byHead) less(a, b *classQueue) bool  { return qLess(a, b) }
func (byHead) setPos(x *classQueue, i int) { x.hpos = int32(i) }
