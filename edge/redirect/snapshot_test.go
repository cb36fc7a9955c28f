package redirect

import (
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// snapshotLayers is the edge's layers: overlay over a snapshot of links
// with header h.
func snapshotLayers(t testing.TB, overlay *store.Overlay, links []snapshot.Link, h snapshot.Header) *store.Layers {
	t.Helper()
	data, err := snapshottest.Build(links, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := store.Load("t", data)
	if err != nil {
		t.Fatal(err)
	}
	a := &store.Layers{Overlay: overlay, Snapshots: new(store.Snapshots)}
	a.Install(l)
	return a
}

// newSnapshotHandler serves a snapshot at change version 10 under an
// overlay holding changes on both sides of it.
func newSnapshotHandler(t testing.TB) *Handler {
	t.Helper()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := snapshotLayers(t, store.NewOverlay(), []snapshot.Link{
		{Code: "00000A", URL: "https://shop.example.com/spring?utm_source=snap", RedirectType: 302, Status: link.Active},
		{Code: "00000B", URL: "https://shop.example.com/b", RedirectType: 308, Status: link.Active},
		{Code: "00000C", URL: "https://shop.example.com/c", RedirectType: 302, Status: link.Active},
		{Code: "00000D", Status: link.Disabled},
		{Code: "00000E", URL: "https://shop.example.com/e", RedirectType: 302, Status: link.Active, ExpiresAt: now.UnixMilli()},
		{Code: "00000F", URL: "https://shop.example.com/f-newer", RedirectType: 302, Status: link.Active, Version: 14},
		{Code: "summer-sale", URL: "https://shop.example.com", RedirectType: 307, Status: link.Active},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10})
	// Applied from the stream after the snapshot: wins.
	a.Apply(&store.Entry{Code: "00000B", Status: link.Disabled, Version: 11})
	// Older than the snapshot (a late replayed event): loses.
	a.Apply(&store.Entry{Code: "00000C", URL: "https://stale", RedirectType: 302, Status: link.Active, Version: 7})
	// Older than the snapshot's own newer version of the code: loses.
	a.Apply(&store.Entry{Code: "00000F", URL: "https://stale-f", RedirectType: 302, Status: link.Active, Version: 12})
	// Only in the overlay.
	a.Apply(&store.Entry{Code: "00000G", URL: "https://overlay/g", RedirectType: 302, Status: link.Active, Version: 13})
	return &Handler{Store: a, Now: func() time.Time { return now }}
}

func TestSnapshotAnswersAndVersionRule(t *testing.T) {
	h := newSnapshotHandler(t)
	tests := []struct {
		uri      string
		status   int
		location string
	}{
		{"/00000A", 302, "https://shop.example.com/spring?utm_source=snap"},
		{"/00000B", 410, ""}, // the overlay's newer disable wins
		{"/00000C", 302, "https://shop.example.com/c"},
		{"/00000D", 410, ""},
		{"/00000E", 410, ""}, // expired at read time
		{"/00000F", 302, "https://shop.example.com/f-newer"},
		{"/00000G", 302, "https://overlay/g"},
		{"/summer-sale", 307, "https://shop.example.com"},
		{"/00000H", 404, ""},
	}
	for _, tt := range tests {
		ctx := do(h, "GET", tt.uri)
		if got := ctx.Response.StatusCode(); got != tt.status {
			t.Errorf("GET %s: status %d, want %d", tt.uri, got, tt.status)
		}
		if got := string(ctx.Response.Header.Peek("Location")); got != tt.location {
			t.Errorf("GET %s: Location %q, want %q", tt.uri, got, tt.location)
		}
	}
}

func TestSnapshotHitDoesNotAllocate(t *testing.T) {
	h := newSnapshotHandler(t)
	h.Now = nil
	for _, uri := range []string{"/00000A", "/summer-sale", "/00000G"} {
		if n := hitAllocs(h, request("GET", uri)); n != 0 {
			t.Errorf("GET %s: hit path allocated %v times per request", uri, n)
		}
	}
}

func TestLongTargetFromSnapshot(t *testing.T) {
	url := "https://shop.example.com/" + strings.Repeat("p", 4000)
	a := snapshotLayers(t, store.NewOverlay(), []snapshot.Link{{Code: "00000A", URL: url, RedirectType: 302, Status: link.Active}},
		snapshot.Header{ChangeVersion: 1, StreamSeq: 1})
	h := &Handler{Store: a}
	ctx := do(h, "GET", "/00000A")
	if got := string(ctx.Response.Header.Peek("Location")); got != url {
		t.Fatalf("Location of %d bytes, want %d", len(got), len(url))
	}
}

// BenchmarkSnapshotHit is the hit path for a link only the snapshot holds:
// an overlay miss, a binary search in the file, Location assembled from the
// origin dictionary and the rest.
func BenchmarkSnapshotHit(b *testing.B) {
	h := newSnapshotHandler(b)
	h.Now = nil
	benchServe(b, h, "/00000A")
}
