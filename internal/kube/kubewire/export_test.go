package kubewire

// WentOverH2 reports whether b is the poster with an h2 binder that
// dialed its connection and was not turned off (the server spoke h2).
func WentOverH2(b Binder) bool {
	p, ok := b.(*bindPoster)
	if !ok || p.h2 == nil || p.h2off.Load() {
		return false
	}
	p.h2.mu.Lock()
	defer p.h2.mu.Unlock()
	return p.h2.conn != nil
}
