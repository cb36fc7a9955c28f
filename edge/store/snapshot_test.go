package store

import (
	"errors"
	"testing"

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

func TestLoadRejectsDamage(t *testing.T) {
	data, err := snapshottest.Build([]snapshot.Link{{Code: "00000A", URL: "https://a.example/x", RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 5, StreamSeq: 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-3] ^= 0xff
	for name, d := range map[string][]byte{"truncated": data[:len(data)-7], "flipped": flipped, "empty": nil} {
		if _, err := Load(name, d); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: Load error %v, want ErrCorrupt", name, err)
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
	if _, ok := a.Overlay.Lookup([]byte("00000A")); ok {
		t.Error("an overlay entry superseded by the snapshot was kept")
	}
	for _, code := range []string{"00000B", "cold-one"} {
		if _, ok := a.Overlay.Lookup([]byte(code)); !ok {
			t.Errorf("overlay entry %s was dropped", code)
		}
	}
	e, ok := a.Snapshots.Lookup([]byte("00000A"))
	if !ok || string(e.AppendURL(nil)) != "https://a.example/now" || e.RedirectType != 301 || e.Version != 10 {
		t.Errorf("snapshot lookup = %+v, %v", e, ok)
	}
	if !a.Hint.MayContain([]byte("00000C")) || !a.Hint.MayContain([]byte("cold-one")) {
		t.Error("hint lost a snapshot code or a stream code")
	}
	if !a.Segments.Sealed(50) || a.Segments.Sealed(100) {
		t.Error("snapshot's sealed interval not installed")
	}
	code := []byte("00000A")
	if n := testing.AllocsPerRun(100, func() { a.Snapshots.Lookup(code) }); n != 0 {
		t.Errorf("snapshot lookup allocated %v times", n)
	}
}
