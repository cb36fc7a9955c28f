package snapshot

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// resident counts the pages of data in memory (mincore).
func resident(t *testing.T, data []byte) (in, all int) {
	t.Helper()
	page := syscall.Getpagesize()
	vec := make([]byte, (len(data)+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// pageOut asks the kernel to reclaim data's pages now, as memory pressure
// would (MADV_PAGEOUT); it refuses for a locked mapping (EINVAL), which
// reclaim skips.
func pageOut(data []byte) error {
	const madvPageout = 21
	return syscall.Madvise(data, madvPageout)
}

// TestLockKeepsPagesResident: the kernel reclaims an unlocked mapping's
// pages; after Lock it reclaims none of them, and ReleasePages ends the
// lock (the pages then leave as they do for a snapshot taken out of
// service).
func TestLockKeepsPagesResident(t *testing.T) {
	data := build(t, bigSet(20_000), sampleHeader, sampleSealed, []byte("bloom-bytes"))
	for _, lock := range []bool{false, true} {
		// Synced and dropped from the cache, so Verify reads clean pages
		// back, as an edge reads its download: dirty ones would wait for
		// writeback instead of being reclaimed.
		path := writeTemp(t, data)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := DropPageCache(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		s, err := OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(context.Background()); err != nil { // reads every page in
			t.Fatal(err)
		}
		if lock {
			if err := s.Lock(); err != nil {
				t.Fatalf("Lock: %v (the test needs CAP_IPC_LOCK or RLIMIT_MEMLOCK of %d bytes)", err, len(s.file))
			}
		}
		if s.Locked() != lock {
			t.Fatalf("locked %v, want %v", s.Locked(), lock)
		}
		in0, all := resident(t, s.file)
		if err := pageOut(s.file); err != nil && !(lock && errors.Is(err, syscall.EINVAL)) {
			t.Fatalf("locked %v: madvise(MADV_PAGEOUT): %v", lock, err)
		}
		in1, _ := resident(t, s.file)
		t.Logf("locked %v: %d of %d pages resident, %d after MADV_PAGEOUT", lock, in0, all, in1)
		if in0 != all {
			t.Fatalf("locked %v: %d of %d pages resident after Verify, want all", lock, in0, all)
		}
		switch {
		case !lock && in1 == all:
			t.Fatal("unlocked: MADV_PAGEOUT reclaimed no page, so this test shows nothing about Lock")
		case lock && in1 != all:
			t.Fatalf("locked: %d of %d pages reclaimed", all-in1, all)
		}
		checkUsable(t, s)
		if lock {
			s.ReleasePages()
			if s.Locked() {
				t.Fatal("ReleasePages left the lock")
			}
			checkUsable(t, s) // maps its pages again
			if err := pageOut(s.file); err != nil {
				t.Fatalf("after ReleasePages: madvise(MADV_PAGEOUT): %v, want the lock ended", err)
			}
			if in, _ := resident(t, s.file); in == all {
				t.Fatal("after ReleasePages the kernel still reclaims no page")
			}
		}
	}
}
