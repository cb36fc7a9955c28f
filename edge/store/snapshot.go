package store

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// Loaded is a snapshot ready to serve: the opened file and its bloom
// section decoded. The file is immutable; the only state that changes is
// which of its entries the overlay overrides.
type Loaded struct {
	Snap *snapshot.Snapshot
	// Blooms are the snapshot's bloom filters by domain: every domain
	// the snapshot holds codes of has one.
	Blooms map[link.DomainID]*bloom.BloomFilter
	Name   string // the object (and file) name it came from
	Size   int    // bytes of the file, mapped (LoadFile) or in memory (Load)

	// overridden has a bit per entry (by snapshot.Find's index), set once
	// the overlay holds a change of that code while this snapshot is in
	// service (Layers.Apply and Install set it, under Layers.mu). A
	// clear bit lets a lookup answer from the file alone, without probing
	// the overlay: the common case, since most links never change after
	// the snapshot was built. Bits are only ever set.
	overridden []atomic.Uint64
	// dirty has a bit per word of overridden, set after a bit of that
	// word: a lookup reads it first, so an entry whose 64 neighbours are
	// unchanged costs no read of overridden. At 100M links overridden is
	// 16 MB, a cache miss per hit; dirty is 1/64 of it and stays cached.
	dirty []atomic.Uint64
}

func (l *Loaded) override(i int) {
	l.overridden[i/64].Or(1 << (i % 64))
	w := i / 64
	l.dirty[w/64].Or(1 << (w % 64))
}

func (l *Loaded) isOverridden(i int) bool {
	w := i / 64
	return l.dirty[w/64].Load()&(1<<(w%64)) != 0 && l.overridden[w].Load()&(1<<(i%64)) != 0
}

// Load validates data completely as a snapshot and decodes its bloom
// section. data is kept (lookups read it in place) and must not be
// modified afterwards. An error means nothing of data may be used.
func Load(name string, data []byte) (*Loaded, error) {
	snap, err := snapshot.Open(data)
	if err != nil {
		return nil, err
	}
	return newLoaded(name, snap)
}

// LoadFile opens the snapshot file at path in place (snapshot.OpenFile:
// mapped, not read) and decodes its bloom section, in a time that does not
// grow with the number of links. The checks that do (the entry sections'
// checksums and fields) are Verify's: until it returned nil the snapshot
// may answer from bytes that are wrong, never outside the file. The file
// stays mapped while the Loaded or an entry looked up in it is reachable.
func LoadFile(name, path string) (*Loaded, error) {
	snap, err := snapshot.OpenFile(path)
	if err != nil {
		return nil, err
	}
	return newLoaded(name, snap)
}

func newLoaded(name string, snap *snapshot.Snapshot) (*Loaded, error) {
	blooms, err := decodeBlooms(snap)
	if err != nil {
		return nil, err
	}
	words := (snap.Slots() + 63) / 64
	return &Loaded{Snap: snap, Blooms: blooms, Name: name, Size: snap.Size(),
		overridden: make([]atomic.Uint64, words), dirty: make([]atomic.Uint64, (words+63)/64)}, nil
}

// decodeBlooms decodes the bloom of each domain of snap: the platform's
// alone in a file without a domain table (format 1 and 2), which must have
// it; every domain's of the table in one with, where a domain without a
// bloom has no code in the file.
func decodeBlooms(snap *snapshot.Snapshot) (map[link.DomainID]*bloom.BloomFilter, error) {
	domains := snap.Domains()
	if domains == nil {
		f, err := decodeBloom(link.DefaultDomain, snap.Bloom(link.DefaultDomain))
		if err != nil {
			return nil, err
		}
		return map[link.DomainID]*bloom.BloomFilter{link.DefaultDomain: f}, nil
	}
	m := make(map[link.DomainID]*bloom.BloomFilter, len(domains))
	for _, d := range domains {
		b := snap.Bloom(d.ID)
		if len(b) == 0 {
			continue
		}
		f, err := decodeBloom(d.ID, b)
		if err != nil {
			return nil, err
		}
		m[d.ID] = f
	}
	return m, nil
}

func decodeBloom(d link.DomainID, b []byte) (*bloom.BloomFilter, error) {
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("%w: domain %d's bloom: %v", snapshot.ErrCorrupt, d, err)
	}
	if f.Cap() == 0 || f.K() == 0 {
		return nil, fmt.Errorf("%w: domain %d's bloom: empty filter", snapshot.ErrCorrupt, d)
	}
	return f, nil
}

// Verify checks the entry sections LoadFile left unchecked
// (snapshot.Snapshot.Verify); nil at once for a Loaded from Load.
func (l *Loaded) Verify(ctx context.Context) error { return l.Snap.Verify(ctx) }

// Snapshots holds the snapshot in service, swapped atomically: a lookup sees
// the old snapshot or the new one, never a mix. The zero value holds none.
// Safe for concurrent use.
type Snapshots struct {
	cur atomic.Pointer[Loaded]
	// held is the snapshot the last swap took out of service. Its pages
	// leave the resident set at once, but it stays reachable, so mapped,
	// until the next swap: a file is unmapped only after the garbage
	// collector finds no entry of it anywhere, and a reader that copies an
	// entry's bytes after dropping the entry itself (which breaks
	// snapshot.Entry's contract) still has until the next swap.
	held atomic.Pointer[Loaded]
}

// Lookup finds code in the snapshot in service. It does not allocate; the
// entry's bytes stay valid while the entry is reachable, after a swap too.
func (s *Snapshots) Lookup(d link.DomainID, code []byte) (snapshot.Entry, bool) {
	l := s.cur.Load()
	if l == nil {
		return snapshot.Entry{}, false
	}
	return l.Snap.Lookup(d, code)
}

// Current is the snapshot in service, or nil.
func (s *Snapshots) Current() *Loaded { return s.cur.Load() }

// retire takes old out of service after a swap.
func (s *Snapshots) retire(old, next *Loaded) {
	if old == nil || old == next {
		return
	}
	old.Snap.ReleasePages()
	s.held.Store(old)
}

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
// at a version at least as new (Layers.Find). The snapshot it replaces is
// retired: its pages are released, its file unmapped once unreachable. The
// file's domain table goes to Domains (Replace) before its pointer.
func (a *Layers) Install(l *Loaded) (pruned int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cv := l.Snap.Header.ChangeVersion
	// Entries applied from the stream after the snapshot stay; the ones
	// among them whose code the file holds override it.
	a.Overlay.Range(func(d link.DomainID, code []byte, r Record) bool {
		if r.Version > cv {
			if i, ok := l.Snap.Find(d, code); ok {
				l.override(i)
			}
		}
		return true
	})
	if a.Hint != nil {
		a.Hint.SetBase(l.Blooms)
	}
	// The file's domains before its links: a host it brings resolves by
	// the time its codes are found (until then they are asked of the
	// authority, never answered for another domain). An invalid entry of
	// the table is skipped and counted (Domains.Refused); a file without
	// a table leaves the table as it is.
	if a.Domains != nil {
		_ = a.Domains.Replace(l.Snap.Domains())
	}
	old := a.Snapshots.cur.Swap(l)
	if a.Segments != nil {
		for _, s := range l.Snap.Sealed() {
			for _, iv := range s.Intervals {
				a.Segments.Seal(iv.Start, iv.End)
			}
		}
	}
	// The snapshot holds every change at or below its version; a
	// memory-budget snapshot lacks cold codes, whose entries stay.
	pruned = a.Overlay.Prune(func(d link.DomainID, code []byte, r Record) bool {
		if r.Version > cv {
			return false
		}
		_, ok := l.Snap.Find(d, code)
		return ok
	})
	a.Snapshots.retire(old, l)
	return pruned
}

// Resynced is told that the feed lost events and restarts from l, the
// snapshot in service. A full snapshot holds every code at its version,
// so whatever the lost events changed is in it. A memory-budget one lacks
// the cold codes, and the overlay may hold a cold code at a version the
// lost events superseded, the long-tail cache an answer they made stale:
// so the overlay's entries at or below l's version that l lacks are
// dropped, and the cache is cleared. Those codes are answered by the
// authority until the stream or a snapshot brings them back. It returns
// how many overlay entries it dropped.
func (a *Layers) Resynced(l *Loaded) (dropped int) {
	if l == nil || l.Snap.Header.Flags&snapshot.FlagPartial == 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cv := l.Snap.Header.ChangeVersion
	dropped = a.Overlay.Prune(func(d link.DomainID, code []byte, r Record) bool {
		if r.Version > cv {
			return false
		}
		_, ok := l.Snap.Find(d, code)
		return !ok
	})
	if a.Cache != nil {
		a.Cache.Clear()
	}
	return dropped
}

// Withdraw takes l out of service if it is the snapshot in service, and
// reports whether it was: for a snapshot found corrupt after it began
// serving. Lookups then answer from the overlay, and misses go on to the
// cache and the authority, until Install puts a good snapshot in service.
// The bloom and the sealed intervals l brought stay: they come from
// sections checked before l served (store.LoadFile), and they are still
// true of the links.
func (a *Layers) Withdraw(l *Loaded) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.Snapshots.cur.CompareAndSwap(l, nil) {
		return false
	}
	a.Snapshots.retire(l, nil)
	return true
}
