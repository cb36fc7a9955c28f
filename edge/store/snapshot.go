package store

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/snapshot"
)

// Loaded is a snapshot ready to serve: the validated file and its bloom
// section decoded. Immutable.
type Loaded struct {
	Snap  *snapshot.Snapshot
	Bloom *bloom.BloomFilter
	Name  string // the object (and file) name it came from
	Size  int    // bytes of the file, all held in memory
}

// Load validates data as a snapshot and decodes its bloom section. data is
// kept (lookups read it in place) and must not be modified afterwards. An
// error means nothing of data may be used.
func Load(name string, data []byte) (*Loaded, error) {
	snap, err := snapshot.Open(data)
	if err != nil {
		return nil, err
	}
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(bytes.NewReader(snap.Bloom())); err != nil {
		return nil, fmt.Errorf("%w: bloom section: %v", snapshot.ErrCorrupt, err)
	}
	if f.Cap() == 0 || f.K() == 0 {
		return nil, fmt.Errorf("%w: bloom section: empty filter", snapshot.ErrCorrupt)
	}
	return &Loaded{Snap: snap, Bloom: f, Name: name, Size: len(data)}, nil
}

// Snapshots holds the snapshot in service, swapped atomically: a lookup sees
// the old snapshot or the new one, never a mix. The zero value holds none.
// Safe for concurrent use.
type Snapshots struct {
	cur atomic.Pointer[Loaded]
}

// Lookup finds code in the snapshot in service. It does not allocate; the
// entry's bytes stay valid after a swap (the old file stays alive while
// referenced).
func (s *Snapshots) Lookup(code []byte) (snapshot.Entry, bool) {
	l := s.cur.Load()
	if l == nil {
		return snapshot.Entry{}, false
	}
	return l.Snap.Lookup(code)
}

// Current is the snapshot in service, or nil.
func (s *Snapshots) Current() *Loaded { return s.cur.Load() }

// Install puts l in service under the overlay and returns how many overlay
// entries it made redundant and dropped.
//
// Order matters so that no lookup sees a half state. The bloom of the new
// file goes first (it covers every code of the old one: codes are never
// removed), then the snapshot pointer, then its sealed intervals (which
// allow bloom-negative answers, so only once the codes are in place), and
// only then is the overlay pruned: a lookup reads the overlay before it
// loads the snapshot pointer, so one that misses a pruned entry loads the
// new snapshot, which holds that code at a version at least as new.
func (a *Applied) Install(l *Loaded) (pruned int) {
	if a.Hint != nil {
		a.Hint.SetBase(l.Bloom)
	}
	a.Snapshots.cur.Store(l)
	if a.Segments != nil {
		for _, s := range l.Snap.Sealed() {
			for _, iv := range s.Intervals {
				a.Segments.Seal(iv.Start, iv.End)
			}
		}
	}
	cv := l.Snap.Header.ChangeVersion
	return a.Overlay.Prune(func(e *Entry) bool {
		if e.Version > cv {
			return false // applied from the stream after the snapshot: it must stay
		}
		// The snapshot holds every change at or below its version; a
		// memory-budget snapshot lacks cold codes, whose entries stay.
		_, ok := l.Snap.Lookup(unsafe.Slice(unsafe.StringData(e.Code), len(e.Code)))
		return ok
	})
}
