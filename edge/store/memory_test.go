//go:build linux && !race

// The race detector's shadow memory grows with the heap, which would
// charge the overlay for the detector's bookkeeping.

package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// residentBytes is the process's resident memory after a collection has
// returned the free heap to the system.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Fields(b)
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		t.Fatalf("statm %q: %v", b, err)
	}
	return pages * int64(os.Getpagesize())
}

// Links fed by the stream cost the edge about what the same links cost in
// a snapshot: resident memory grows by at most 1.25 times as much for the
// overlay as for the snapshot file mapped and read whole. (The bench in
// bench/relayfeed compares whole edges; this is the store's share.)
func TestStreamFedLinksCostWhatSnapshotLinksCost(t *testing.T) {
	const n = 400_000
	url := func(i int) string {
		return "https://example.com/landing?utm_source=bench&utm_campaign=winter&n=" + strconv.Itoa(i)
	}
	codes := make([]string, n)
	for i := range codes {
		c, err := base62.Encode(uint64(i + 1))
		if err != nil {
			t.Fatal(err)
		}
		codes[i] = c
	}

	before := residentBytes(t)
	o := NewOverlay()
	for i, c := range codes {
		o.Apply(&Entry{Code: c, URL: url(i), RedirectType: 302, Status: link.Active, Version: uint64(i + 1)})
	}
	overlay := residentBytes(t) - before

	links := make([]snapshot.Link, n)
	for i, c := range codes {
		links[i] = snapshot.Link{Code: c, URL: url(i), RedirectType: 302, Status: link.Active}
	}
	data, err := snapshottest.Build(links, snapshot.Header{ChangeVersion: n, StreamSeq: n}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.snap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	links, data = nil, nil
	before = residentBytes(t)
	l, err := LoadFile("s", path)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, c := range codes {
		e, ok := l.Snap.Lookup(link.DefaultDomain, []byte(c))
		if !ok {
			t.Fatalf("%s missing from the snapshot", c)
		}
		buf = e.AppendURL(buf[:0])
	}
	snap := residentBytes(t) - before

	// Both still serve: neither was collected before it was measured.
	if _, ok := o.Lookup(link.DefaultDomain, []byte(codes[n/2])); !ok {
		t.Fatal("overlay lost a code")
	}
	runtime.KeepAlive(l)
	perLink := func(b int64) string { return fmt.Sprintf("%.1f B/link", float64(b)/n) }
	t.Logf("overlay %s, snapshot %s (file %s)", perLink(overlay), perLink(snap), perLink(int64(l.Size)))
	if overlay*4 > snap*5 {
		t.Fatalf("%d links: the overlay holds them in %s of resident memory, the snapshot in %s: want at most 1.25×",
			n, perLink(overlay), perLink(snap))
	}
}
