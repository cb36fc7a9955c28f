package store

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// Segments is the set of ID intervals whose segments are sealed: the
// allocator writes a sealed event only once no create transaction can use an
// ID of the segment any more, after every create that used one committed, so
// an edge that has applied the stream up to the sealed event (in order,
// without gaps) has every link of the segment. Reads are lock-free on an
// immutable, merged, sorted slice swapped atomically. Safe for concurrent
// use.
type Segments struct {
	mu   sync.Mutex // serializes writers
	cur  atomic.Pointer[[]span]
	seal atomic.Uint64 // sealed events applied
}

type span struct{ start, end uint64 } // [start, end)

// Seal adds [start, end) to the sealed set.
func (s *Segments) Seal(start, end uint64) {
	if start >= end {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seal.Add(1)
	var old []span
	if p := s.cur.Load(); p != nil {
		old = *p
	}
	next := append(slices.Clone(old), span{start, end})
	slices.SortFunc(next, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	merged := next[:1]
	for _, sp := range next[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	s.cur.Store(&merged)
}

// Sealed reports whether id lies in a sealed segment.
func (s *Segments) Sealed(id uint64) bool {
	p := s.cur.Load()
	if p == nil {
		return false
	}
	spans := *p
	i := sort.Search(len(spans), func(i int) bool { return spans[i].end > id })
	return i < len(spans) && spans[i].start <= id
}

// Intervals is how many disjoint sealed intervals the set holds.
func (s *Segments) Intervals() int {
	if p := s.cur.Load(); p != nil {
		return len(*p)
	}
	return 0
}
