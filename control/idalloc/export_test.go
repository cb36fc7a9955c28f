package idalloc

// Hooks for the external tests: they reach into the allocator only to stage
// races the public API cannot order (a stale range reference, full loader
// slots).

// StaleTake loads the namespace's current range, runs hold (while which the
// test lets other goroutines move on to newer ranges), then takes from the
// range it loaded, as a Next preempted between those two steps would. It
// returns the ID (ok false when that range was used up) and the range's
// bounds.
func StaleTake(a *Allocator, namespace string, hold func()) (id uint64, ok bool, start, end uint64) {
	n := a.namespaces().byName[namespace]
	r := n.cur.Load()
	if r == nil {
		hold()
		return 0, false, 0, 0
	}
	hold()
	id, _, ok = r.take()
	return id, ok, r.start, r.start + r.size
}

// HoldLoadSlots occupies every loader slot until release is called, so loads
// are rejected.
func HoldLoadSlots(a *Allocator) (release func()) {
	for range cap(a.loadSlots) {
		a.loadSlots <- struct{}{}
	}
	return func() {
		for range cap(a.loadSlots) {
			<-a.loadSlots
		}
	}
}
