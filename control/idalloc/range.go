package idalloc

import (
	"sync/atomic"
	"time"
)

// idRange is one leased segment as an immutable object: start, end and the
// prefetch mark never change after publication, the cursor only grows. Many
// goroutines may take from it at once; each successful take returns a
// distinct ID in [start, end).
type idRange struct {
	seg        Segment
	start      uint64
	size       uint64
	prefetchAt uint64 // offset whose taker kicks the loader
	leasedAt   time.Time

	// cursor is the offset of the next ID to take; it may run past size,
	// which only means "exhausted".
	cursor atomic.Uint64
	// done and committed count Done calls for IDs of this range.
	done      atomic.Uint64
	committed atomic.Uint64
	// handed is the number of IDs handed out, fixed when the range is
	// retired early (drain, self-fence); retired is set after handed.
	handed  atomic.Uint64
	retired atomic.Bool
	sealed  atomic.Bool
}

func newRange(seg Segment, prefetchAt uint64, now time.Time) *idRange {
	return &idRange{seg: seg, start: seg.Start, size: seg.End - seg.Start, prefetchAt: prefetchAt, leasedAt: now}
}

// take hands out the next ID, or reports that the range is used up.
func (r *idRange) take() (id uint64, off uint64, ok bool) {
	off = r.cursor.Add(1) - 1
	if off < r.size {
		return r.start + off, off, true
	}
	return 0, off, false
}

func (r *idRange) contains(id uint64) bool { return id-r.start < r.size }

// remaining is how many IDs are still to be taken.
func (r *idRange) remaining() uint64 {
	if c := r.cursor.Load(); c < r.size {
		return r.size - c
	}
	return 0
}

// taken is how many IDs have been handed out so far.
func (r *idRange) taken() uint64 {
	if r.retired.Load() {
		return r.handed.Load()
	}
	return min(r.cursor.Load(), r.size)
}

// retire stops the range from handing out more IDs and fixes how many it
// handed out. Concurrent takes either got their ID before (and are counted)
// or fail after. Callers serialize retire (the namespace mutex).
func (r *idRange) retire() {
	if r.retired.Load() {
		return
	}
	for {
		c := r.cursor.Load()
		if c >= r.size {
			r.handed.Store(r.size)
			break
		}
		if r.cursor.CompareAndSwap(c, r.size) {
			r.handed.Store(c)
			break
		}
	}
	r.retired.Store(true)
}

// finished reports whether no further create can use an ID of the range:
// it hands out no more IDs and every handed-out ID has had its Done.
func (r *idRange) finished() bool {
	if r.retired.Load() {
		return r.done.Load() >= r.handed.Load()
	}
	return r.cursor.Load() >= r.size && r.done.Load() >= r.size
}
