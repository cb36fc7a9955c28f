package store

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/snapshot"
)

// Loaded is a snapshot ready to serve: the validated file and its bloom
// section decoded. The file is immutable; the only state that changes is
// which of its entries the overlay overrides.
type Loaded struct {
	Snap  *snapshot.Snapshot
	Bloom *bloom.BloomFilter
	Name  string // the object (and file) name it came from
	Size  int    // bytes of the file, all held in memory

	// overridden has a bit per entry (by snapshot.Find's index), set once
	// the overlay holds a change of that code while this snapshot is in
	// service (Layers.Apply and Install set it, under Layers.mu). A
	// clear bit lets a lookup answer from the file alone, without probing
	// the overlay: the common case, since most links never change after
	// the snapshot was built. Bits are only ever set.
	overridden []atomic.Uint64
}

func (l *Loaded) override(i int) { l.overridden[i/64].Or(1 << (i % 64)) }

func (l *Loaded) isOverridden(i int) bool { return l.overridden[i/64].Load()&(1<<(i%64)) != 0 }

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
	return &Loaded{Snap: snap, Bloom: f, Name: name, Size: len(data),
		overridden: make([]atomic.Uint64, (snap.Len()+63)/64)}, nil
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
// Order matters so that no lookup sees a half state. Under a.mu (no Apply
// runs meanwhile), every overlay entry that stays is marked overridden in
// l before l can be seen, so a lookup that finds a code in l with its bit
// clear may trust the file. Then the bloom of the new file (it covers every
// code of the old one: codes are never removed), then the snapshot pointer,
// then its sealed intervals (which allow bloom-negative answers, so only
// once the codes are in place), and only then is the overlay pruned: a
// lookup that misses a pruned entry sees that the snapshot changed since it
// loaded the pointer and looks again in the new one, which holds that code
// at a version at least as new (Layers.Find).
func (a *Layers) Install(l *Loaded) (pruned int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cv := l.Snap.Header.ChangeVersion
	// Entries applied from the stream after the snapshot stay; the ones
	// among them whose code the file holds override it.
	a.Overlay.Range(func(e *Entry) bool {
		if e.Version > cv {
			if i, ok := l.Snap.Find(codeBytes(e)); ok {
				l.override(i)
			}
		}
		return true
	})
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
	// The snapshot holds every change at or below its version; a
	// memory-budget snapshot lacks cold codes, whose entries stay.
	return a.Overlay.Prune(func(e *Entry) bool {
		if e.Version > cv {
			return false
		}
		_, ok := l.Snap.Find(codeBytes(e))
		return ok
	})
}
