package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func loadTB(t testing.TB, links []snapshot.Link, h snapshot.Header, sealed []snapshot.Sealed) *Loaded {
	t.Helper()
	data, err := snapshottest.Build(links, h, sealed)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load("test", data)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeFile writes a snapshot of links as dir/name and returns its path.
func writeFile(t testing.TB, dir, name string, links []snapshot.Link, h snapshot.Header) string {
	t.Helper()
	data, err := snapshottest.Build(links, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadRejectsDamage(t *testing.T) {
	data, err := snapshottest.Build([]snapshot.Link{{Code: "00000A", URL: "https://a.example/x", RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 5, StreamSeq: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-3] ^= 0xff
	header := append([]byte(nil), data...)
	header[20] ^= 0xff
	dir := t.TempDir()
	for name, d := range map[string][]byte{"truncated": data[:len(data)-7], "flipped": flipped, "header": header, "empty": nil} {
		if _, err := Load(name, d); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: Load error %v, want ErrCorrupt", name, err)
		}
		if name == "flipped" {
			continue // a damaged entry section is Verify's to find (TestLoadFileDefersEntryChecks)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, d, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(name, path); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: LoadFile error %v, want ErrCorrupt", name, err)
		}
	}
}

// TestLoadFileDefersEntryChecks: a file whose targets were damaged on disk
// opens and serves at once, and Verify then refuses it by name.
func TestLoadFileDefersEntryChecks(t *testing.T) {
	dir := t.TempDir()
	links := []snapshot.Link{{Code: "00000A", URL: "https://a.example/x", RedirectType: 302, Status: link.Active}}
	good := writeFile(t, dir, "good", links, snapshot.Header{ChangeVersion: 5})
	l, err := LoadFile("good", good)
	if err != nil {
		t.Fatal(err)
	}
	if l.Snap.Verified() || !l.Snap.Mapped() && runtime.GOOS == "linux" {
		t.Fatalf("verified %v mapped %v: want a mapped file not verified yet", l.Snap.Verified(), l.Snap.Mapped())
	}
	if err := l.Verify(context.Background()); err != nil || !l.Snap.Verified() {
		t.Fatalf("Verify of an intact file: %v", err)
	}
	data, _ := os.ReadFile(good)
	i := bytes.Index(data, []byte("/x"))
	data[i+1] = 'y' // the target's rest, in the rest section
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = LoadFile("bad", bad)
	if err != nil {
		t.Fatalf("LoadFile refused a damaged entry section before Verify: %v", err)
	}
	if e, ok := l.Snap.Lookup(link.DefaultDomain, []byte("00000A")); !ok || string(e.AppendURL(nil)) != "https://a.example/y" {
		t.Fatalf("before Verify, the file answers what it holds: %q, %v", e.AppendURL(nil), ok)
	}
	if err := l.Verify(context.Background()); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Verify of a damaged file: %v, want a checksum mismatch", err)
	}
}

// TestLoadFormat1: a file as control wrote it before format 2 loads from
// memory and from disk.
func TestLoadFormat1(t *testing.T) {
	data, err := os.ReadFile("testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	fromMem, err := Load("v1", data)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := LoadFile("v1", "testdata/v1.snap")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Loaded{fromMem, fromFile} {
		if l.Snap.Format() != 1 || !l.Snap.Verified() {
			t.Fatalf("format %d verified %v, want a verified format 1 file", l.Snap.Format(), l.Snap.Verified())
		}
		e, ok := l.Snap.Lookup(link.DefaultDomain, []byte("summer-sale"))
		if !ok || string(e.AppendURL(nil)) != "https://shop.example.com/sale?x=1" || e.RedirectType != 307 || e.ExpiresAt != 1893456000000 {
			t.Errorf("summer-sale = %+v, %v", e, ok)
		}
		if e, ok := l.Snap.Lookup(link.DefaultDomain, []byte("00000B")); !ok || e.Version != 12 || !l.Blooms[link.DefaultDomain].TestString("00000C") {
			t.Errorf("00000B = %+v, %v; or the bloom lost 00000C", e, ok)
		}
	}
}

// TestInstall: the snapshot, its bloom and sealed intervals come into
// service, and the overlay keeps exactly the entries the snapshot does not
// supersede.
func TestInstall(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots)}
	a.Apply(&Entry{Code: "00000A", URL: "https://old", Status: link.Active, RedirectType: 302, Version: 3})  // in snapshot at ≤10: dropped
	a.Apply(&Entry{Code: "00000B", URL: "https://new", Status: link.Active, RedirectType: 302, Version: 12}) // after the snapshot: kept
	a.Apply(&Entry{Code: "cold-one", URL: "https://c", Status: link.Active, RedirectType: 302, Version: 4})  // not in a partial file: kept
	l := loadTB(t, []snapshot.Link{
		{Code: "00000A", URL: "https://a.example/now", RedirectType: 301, Status: link.Active, Version: 9},
		{Code: "00000B", URL: "https://a.example/b", RedirectType: 302, Status: link.Active, Version: 8},
		{Code: "00000C", Status: link.Disabled, Version: 7},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10, Flags: snapshot.FlagPartial},
		[]snapshot.Sealed{{Namespace: "default", Intervals: []snapshot.Interval{{Start: 1, End: 100}}}})
	if pruned := a.Install(l); pruned != 1 {
		t.Fatalf("pruned %d overlay entries, want 1", pruned)
	}
	if _, ok := a.Overlay.Lookup(link.DefaultDomain, []byte("00000A")); ok {
		t.Error("an overlay entry superseded by the snapshot was kept")
	}
	for _, code := range []string{"00000B", "cold-one"} {
		if _, ok := a.Overlay.Lookup(link.DefaultDomain, []byte(code)); !ok {
			t.Errorf("overlay entry %s was dropped", code)
		}
	}
	e, ok := a.Snapshots.Lookup(link.DefaultDomain, []byte("00000A"))
	if !ok || string(e.AppendURL(nil)) != "https://a.example/now" || e.RedirectType != 301 || e.Version != 10 {
		t.Errorf("snapshot lookup = %+v, %v", e, ok)
	}
	if !a.Hint.MayContain(link.DefaultDomain, []byte("00000C")) || !a.Hint.MayContain(link.DefaultDomain, []byte("cold-one")) {
		t.Error("hint lost a snapshot code or a stream code")
	}
	if !a.Segments.Sealed(50) || a.Segments.Sealed(100) {
		t.Error("snapshot's sealed interval not installed")
	}
	code := []byte("00000A")
	if n := testing.AllocsPerRun(100, func() { a.Snapshots.Lookup(link.DefaultDomain, code) }); n != 0 {
		t.Errorf("snapshot lookup allocated %v times", n)
	}
}

// TestWithdraw: a withdrawn snapshot stops answering, the overlay and the
// hint keep theirs, and withdrawing one no longer in service does nothing.
func TestWithdraw(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots)}
	old := loadTB(t, []snapshot.Link{{Code: "00000A", URL: "https://a.example/1", RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 1, StreamSeq: 1}, nil)
	l := loadTB(t, []snapshot.Link{{Code: "00000A", URL: "https://a.example/2", RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 2, StreamSeq: 2}, nil)
	a.Install(old)
	a.Install(l)
	a.Apply(&Entry{Code: "00000B", URL: "https://b", Status: link.Active, RedirectType: 302, Version: 3})
	if a.Withdraw(old) || a.Snapshots.Current() != l {
		t.Fatal("withdrew a snapshot that was not in service")
	}
	if !a.Withdraw(l) || a.Snapshots.Current() != nil {
		t.Fatal("the snapshot in service was not withdrawn")
	}
	if _, ok := a.Find(link.DefaultDomain, []byte("00000A")); ok {
		t.Error("a withdrawn snapshot still answers")
	}
	if _, ok := a.Find(link.DefaultDomain, []byte("00000B")); !ok || !a.Hint.MayContain(link.DefaultDomain, []byte("00000A")) {
		t.Error("the overlay or the hint lost what it had")
	}
}

// mappedFiles is the set of files mapped into this process.
func mappedFiles(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 6 {
			m[f[5]] = true
		}
	}
	return m
}

// TestSwapsUnmapRetiredFiles: snapshot files swap in under concurrent
// lookups, each lookup answers from one whole generation and never from
// an older one than it saw before, and a retired file is unmapped once
// nothing can reach it any more: not while an entry looked up in it is
// held, and not before the swap after the one that retired it.
func TestSwapsUnmapRetiredFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("files are mapped on Linux only; elsewhere LoadFile reads them")
	}
	dir := t.TempDir()
	const gens, codes = 8, 200
	paths := make([]string, gens+1)
	for v := 1; v <= gens; v++ {
		links := make([]snapshot.Link, codes)
		for i := range links {
			links[i] = snapshot.Link{Code: fmt.Sprintf("c-%05d", i), URL: fmt.Sprintf("https://v%d.example/%d", v, i), RedirectType: 302, Status: link.Active}
		}
		paths[v] = writeFile(t, dir, fmt.Sprintf("gen-%d.snap", v), links, snapshot.Header{ChangeVersion: uint64(v), StreamSeq: uint64(v)})
	}
	load := func(v int) *Loaded {
		l, err := LoadFile(fmt.Sprint(v), paths[v])
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots)}
	a.Install(load(1))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bad atomic.Int64
	var lookups atomic.Int64
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := 0
			var buf []byte
			for i := 0; ctx.Err() == nil; i++ {
				code := fmt.Appendf(nil, "c-%05d", i%codes)
				var url []byte
				if r%2 == 0 {
					h, ok := a.Find(link.DefaultDomain, code)
					if !ok || h.Overlay {
						bad.Add(1)
						continue
					}
					url = h.Snap.AppendURL(buf[:0])
				} else {
					e, ok := a.Snapshots.Lookup(link.DefaultDomain, code)
					if !ok {
						bad.Add(1)
						continue
					}
					url = e.AppendURL(buf[:0])
				}
				var v, n int
				if _, err := fmt.Sscanf(string(url), "https://v%d.example/%d", &v, &n); err != nil || n != i%codes || v < seen {
					bad.Add(1)
				}
				seen = max(seen, v)
				lookups.Add(1)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	var kept snapshot.Entry // an entry of the last generation, held across the last swaps
	for v := 2; v <= gens; v++ {
		if v == gens-2 {
			kept, _ = a.Snapshots.Lookup(link.DefaultDomain, []byte("c-00007"))
		}
		a.Install(load(v))
		n := lookups.Load()
		poll.Until(t, "lookups to run after the swap", 10*time.Second, func() bool { return lookups.Load() > n+100 })
		runtime.GC()
	}
	cancel()
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d lookups answered wrongly during swaps", n)
	}
	// In service (gens) and held (gens-1) stay mapped; so does the file
	// of the entry still held (gens-3); every other one is unmapped.
	poll.Until(t, "retired files unmapped", 10*time.Second, func() bool {
		runtime.GC()
		m := mappedFiles(t)
		for v := 1; v <= gens; v++ {
			if want := v >= gens-1 || v == gens-3; m[paths[v]] != want {
				return false
			}
		}
		return true
	})
	if got := string(kept.AppendURL(nil)); got != fmt.Sprintf("https://v%d.example/7", gens-3) {
		t.Fatalf("an entry held across swaps reads %q", got)
	}
	kept = snapshot.Entry{}
	poll.Until(t, "the held entry's file unmapped", 10*time.Second, func() bool {
		runtime.GC()
		return !mappedFiles(t)[paths[gens-3]]
	})
	runtime.KeepAlive(kept)
	runtime.KeepAlive(a) // its in-service and held snapshots are part of what the checks expect
}

// TestOverriddenBits: exactly the entries marked read as overridden,
// whichever of them share a word or a summary word.
func TestOverriddenBits(t *testing.T) {
	links := make([]snapshot.Link, 10000)
	for i := range links {
		links[i] = snapshot.Link{Code: fmt.Sprintf("c-%05d", i), URL: "https://a.example/", RedirectType: 302, Status: link.Active}
	}
	l := loadTB(t, links, snapshot.Header{}, nil)
	marked := map[int]bool{}
	for _, i := range []int{0, 1, 63, 64, 4095, 4096, 4097, l.Snap.Slots() - 1} {
		marked[i] = true
	}
	for i := 7; i < l.Snap.Slots(); i += 997 {
		marked[i] = true
	}
	for i := range marked {
		l.override(i)
	}
	for i := range l.Snap.Slots() {
		if l.isOverridden(i) != marked[i] {
			t.Fatalf("entry %d overridden = %v, want %v", i, !marked[i], marked[i])
		}
	}
}
