package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "links.snap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenFile: a file read in place answers like the same bytes in
// memory, mapped where the system allows, after its page cache was dropped
// too.
func TestOpenFile(t *testing.T) {
	path := writeTemp(t, build(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes")))
	f, err := os.Open(path)
	if err != nil {
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
	if s.Mapped() != (runtime.GOOS == "linux") || s.Verified() {
		t.Fatalf("mapped %v verified %v", s.Mapped(), s.Verified())
	}
	checkSample(t, s)
	if err := s.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.ReleasePages() // a later read faults the same bytes back in
	checkSample(t, s)
}

// TestOpenFileRejectsDamage: a truncated file or a damaged header is
// refused at once; a damaged entry section opens (only its checksum shows
// the damage) and Verify refuses it, naming the section.
func TestOpenFileRejectsDamage(t *testing.T) {
	data := build(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes"))
	for _, n := range []int{0, 10, headerLen, prefaceLen(sectionCount) - 1, prefaceLen(sectionCount) + 70, len(data) / 2, len(data) - 1} {
		if _, err := OpenFile(writeTemp(t, data[:n])); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d bytes: OpenFile = %v, want ErrCorrupt", n, err)
		}
	}
	for _, at := range []int{8, 20, headerLen + 4, headerLen + sectionCount*tableRowLen} {
		bad := append([]byte(nil), data...)
		bad[at] ^= 0x10
		if _, err := OpenFile(writeTemp(t, bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("header byte %d damaged: OpenFile = %v, want ErrCorrupt", at, err)
		}
	}
	for kind := sectionGenerated; kind <= sectionNewer; kind++ {
		bad := append([]byte(nil), data...)
		row := bad[headerLen+(kind-1)*tableRowLen:]
		bad[le.Uint64(row[8:])] ^= 0x01 // the section's first byte
		s, err := OpenFile(writeTemp(t, bad))
		if err != nil {
			t.Fatalf("section %d damaged: OpenFile = %v; only Verify reads it", kind, err)
		}
		lookAround(s)
		want := fmt.Sprintf("section %d checksum mismatch", kind)
		if err := s.Verify(context.Background()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("section %d damaged: Verify = %v, want %q", kind, err, want)
		}
	}
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenFile of a missing file = %v", err)
	}
}
