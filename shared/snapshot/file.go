package snapshot

import (
	"fmt"
	"os"
	"runtime"
)

// OpenFile opens the snapshot file at path in place: where the system
// allows (Linux), it is mapped read-only instead of read into memory, so
// opening costs OpenDeferred's checks whatever the file's size, and its
// pages are read from the page cache as lookups and Verify touch them. Call
// Verify before trusting every answer (see OpenDeferred).
//
// The mapping lives as long as the Snapshot or any Entry looked up in it is
// reachable; the garbage collector's cleanup unmaps it after neither is.
// The file must not be modified or truncated in place while it is open
// (replace it by renaming a new file over it): reading a page of a
// truncated mapped file kills the process.
func OpenFile(path string) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < headerLen {
		return nil, fmt.Errorf("%s: %w", path, corrupt("%d bytes, shorter than the %d-byte header", st.Size(), headerLen))
	}
	if int64(int(st.Size())) != st.Size() {
		return nil, fmt.Errorf("%s: %d bytes do not fit in memory", path, st.Size())
	}
	data, mapped, err := mapFile(f, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	s, err := OpenDeferred(data)
	if err != nil {
		if mapped {
			unmap(data)
		}
		return nil, err
	}
	if mapped {
		s.mapped, s.file = true, data
		// data is not a pointer into the Go heap, so holding it does not
		// keep s reachable.
		runtime.AddCleanup(s, unmap, data)
	}
	return s, nil
}

// ReleasePages drops s's pages from the process's resident memory, for a
// snapshot taken out of service: a reader still holding one of its entries
// faults the same bytes back in from the file. It does nothing for a
// snapshot that is not mapped.
func (s *Snapshot) ReleasePages() {
	if !s.mapped {
		return
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.locked.Load() {
		unlockPages(s.file) // locked pages cannot be dropped
		s.locked.Store(false)
	}
	dropPages(s.file)
}

// Lock keeps s's mapped file resident: the kernel may no longer reclaim
// its pages under memory pressure, as it otherwise does with clean file
// pages before anything else, and every page it reclaimed would be read
// back from the disk by a hit (a major fault: milliseconds). Pages not
// resident yet are read first, so call it off the start-up path, after
// Verify has read them all. It needs the privilege to lock that much
// memory (CAP_IPC_LOCK, or an RLIMIT_MEMLOCK of at least the file's size)
// and returns the system's error otherwise, having locked nothing.
// ReleasePages and unmapping end the lock. A snapshot that is not mapped
// is in the Go heap, which is not reclaimed (without swap): nil.
func (s *Snapshot) Lock() error {
	if !s.mapped {
		return nil
	}
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if s.locked.Load() {
		return nil
	}
	if err := lockPages(s.file); err != nil {
		return fmt.Errorf("lock %d bytes of snapshot in memory: %w", len(s.file), err)
	}
	s.locked.Store(true)
	return nil
}

// Locked reports whether Lock holds s's pages resident.
func (s *Snapshot) Locked() bool { return s.locked.Load() }

// DropPageCache asks the system to drop f's clean pages from the page
// cache, for a snapshot file just written and synced: the next OpenFile and
// Verify read it back through readahead, under the mapping's huge-page
// hint, instead of mapping the small pages the writes left. It does
// nothing where mapping is not implemented.
func DropPageCache(f *os.File) error { return dropCache(f) }
