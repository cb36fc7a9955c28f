//go:build linux

package snapshot

import (
	"os"
	"syscall"
)

// mapFile maps f's first size bytes read-only and shared: the bytes are
// the page cache's, so a read of a dropped page reads the file again. The
// huge-page hint makes pages that come in through readahead from then on
// 2 MiB folios mapped whole (where the file system supports it, as ext4
// does since Linux 6.x): a random lookup in a table of gigabytes then
// costs no page walk that misses the caches.
func mapFile(f *os.File, size int) ([]byte, bool, error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false, err
	}
	_ = syscall.Madvise(data, syscall.MADV_HUGEPAGE)
	return data, true, nil
}

func unmap(data []byte) { _ = syscall.Munmap(data) }

func dropPages(data []byte) { _ = syscall.Madvise(data, syscall.MADV_DONTNEED) }

func lockPages(data []byte) error { return syscall.Mlock(data) }

func unlockPages(data []byte) { _ = syscall.Munlock(data) }

// dropCache drops f's clean pages from the page cache.
func dropCache(f *os.File) error {
	const fadvDontNeed = 4
	_, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
