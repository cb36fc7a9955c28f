//go:build linux

package snapshot

import (
	"os"
	"syscall"
)

// mapFile maps f's first size bytes read-only and shared: the bytes are
// the page cache's, so a read of a dropped page reads the file again.
func mapFile(f *os.File, size int) ([]byte, bool, error) {
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

func unmap(data []byte) { _ = syscall.Munmap(data) }

func dropPages(data []byte) { _ = syscall.Madvise(data, syscall.MADV_DONTNEED) }
