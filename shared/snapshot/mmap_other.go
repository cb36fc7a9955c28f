//go:build !linux

package snapshot

import (
	"io"
	"os"
)

// mapFile reads the file into memory where mapping is not implemented.
func mapFile(f *os.File, size int) ([]byte, bool, error) {
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, false, err
	}
	return data, false, nil
}

func unmap([]byte) {}

func dropPages([]byte) {}

func lockPages([]byte) error { return nil }

func unlockPages([]byte) {}

func dropCache(*os.File) error { return nil }
