package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

func wireExtras(t testing.TB, x link.Extras) string {
	t.Helper()
	b, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func extrasSamples(t testing.TB) []string {
	return []string{
		"",
		wireExtras(t, link.Extras{MaxClicks: 3}),
		wireExtras(t, link.Extras{PasswordHash: testHash}),
		wireExtras(t, link.Extras{Rules: []link.Rule{
			{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
			{Countries: []string{"DE"}, Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "x"}}, URL: "https://example.de/"},
		}, PasswordHash: testHash, MaxClicks: 1 << 40}),
	}
}

// TestOverlayCarriesExtras: a record keeps its extras through Apply,
// Lookup, Range, an update and a compaction, on every kind of key, with
// every other field (a raw redirect type, an expiry) intact beside them;
// a plain record is byte for byte the size it was before extras.
func TestOverlayCarriesExtras(t *testing.T) {
	o := NewOverlay()
	o.compactMin = 0 // compact as soon as there is garbage
	samples := extrasSamples(t)
	var entries []Entry
	for i := range 400 {
		code, _ := base62.Encode(uint64(i + 1))
		if i%3 == 1 {
			code = fmt.Sprintf("custom-%d", i)
		}
		e := Entry{Domain: link.DomainID(i % 4 * 300), Code: code, URL: fmt.Sprintf("https://x%d.example/p?i=%d", i%5, i),
			RedirectType: []link.RedirectType{302, 301, 999, 308}[i%4], Status: link.Active, Version: uint64(i + 1),
			Extras: samples[i%len(samples)]}
		if i%7 == 0 {
			e.ExpiresAt = int64(1_900_000_000_000 + i)
		}
		if !o.Apply(&e) {
			t.Fatalf("Apply(%+v) refused", e)
		}
		entries = append(entries, e)
	}
	check := func(when string) {
		t.Helper()
		for _, e := range entries {
			r, ok := o.Lookup(e.Domain, []byte(e.Code))
			if !ok || r.URL() != e.URL || r.RedirectType != e.RedirectType || r.ExpiresAt != e.ExpiresAt || r.Version != e.Version ||
				string(r.Extras) != e.Extras || (e.Extras == "") != (r.Extras == nil) {
				t.Fatalf("%s: Lookup(%d, %q) = %+v, %v; want %+v", when, e.Domain, e.Code, r, ok, e)
			}
		}
		n := 0
		o.Range(func(d link.DomainID, code []byte, r Record) bool {
			n++
			for _, e := range entries {
				if e.Domain == d && e.Code == string(code) && string(r.Extras) != e.Extras {
					t.Fatalf("%s: Range gives %d/%q extras %x; want %x", when, d, code, r.Extras, e.Extras)
				}
			}
			return true
		})
		if n != len(entries) {
			t.Fatalf("%s: Range saw %d of %d", when, n, len(entries))
		}
	}
	check("after Apply")
	// Updates: extras added, changed and removed; the old records become
	// garbage and shards are compacted, copying records by their size.
	for i := range entries {
		e := &entries[i]
		e.Version += 1000
		e.Extras = samples[(i+1)%len(samples)]
		if !o.Apply(e) {
			t.Fatal("update refused")
		}
	}
	if o.Stats().Compactions == 0 {
		t.Fatal("no shard was compacted")
	}
	check("after updates and compactions")
	if pruned := o.Prune(func(d link.DomainID, _ []byte, r Record) bool { return d == 300 && r.Extras != nil }); pruned == 0 {
		t.Fatal("nothing pruned")
	}
	kept := entries[:0]
	for _, e := range entries {
		if e.Domain != 300 || e.Extras == "" {
			kept = append(kept, e)
		}
	}
	entries = kept
	check("after a prune")

	// A plain record costs what it did: the extras' flag byte is only in
	// records that have extras.
	plain := &Entry{Code: "00000A", URL: "https://a.example/x", RedirectType: 302, Status: link.Active, Version: 1}
	k := keyOf(link.DefaultDomain, []byte(plain.Code))
	if got := recordLen(plain, k, 1|2<<2, 0, plain.URL); got != 5+len(plain.URL) {
		t.Errorf("a plain record is %d bytes; want %d", got, 5+len(plain.URL))
	}
	with := *plain
	with.Extras = samples[1]
	if got := recordLen(&with, k, 1|metaMore<<2, 0, with.URL); got != 5+len(plain.URL)+1+1+len(with.Extras) {
		t.Errorf("a record with %d bytes of extras is %d bytes; want %d", len(with.Extras), got, 5+len(plain.URL)+2+len(with.Extras))
	}
}

func TestOverlayRefusesBadExtras(t *testing.T) {
	o := NewOverlay()
	for _, x := range []string{"\x00", "\x10", "\x04\x01\x01\x02\x0bjavascript:"} {
		if o.Apply(&Entry{Code: "00000A", URL: "https://a.example/", RedirectType: 302, Status: link.Active, Version: 1, Extras: x}) {
			t.Errorf("Apply took extras %x", x)
		}
	}
	if o.Len() != 0 || o.Stats().Refused != 3 {
		t.Errorf("%d held, %d refused", o.Len(), o.Stats().Refused)
	}
}

// TestFindGivesExtras: Layers.Find answers a link's extras from the layer
// that holds it, the snapshot's or the overlay's, and a plain link none,
// without allocating.
func TestFindGivesExtras(t *testing.T) {
	samples := extrasSamples(t)
	data, err := snapshottest.Build([]snapshot.Link{
		{Code: "00000A", URL: "https://snap.example/a", RedirectType: 302, Status: link.Active, Extras: []byte(samples[3])},
		{Code: "00000B", URL: "https://snap.example/b", RedirectType: 302, Status: link.Active},
		{Code: "00000C", URL: "https://snap.example/c", RedirectType: 302, Status: link.Active, Extras: []byte(samples[1])},
	}, snapshot.Header{ChangeVersion: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load("extras", data)
	if err != nil {
		t.Fatal(err)
	}
	a := &Layers{Overlay: NewOverlay(), Snapshots: new(Snapshots)}
	a.Install(l)
	// 00000C changes after the snapshot: its extras go, 00000D is new.
	a.Apply(&Entry{Code: "00000C", URL: "https://over.example/c", RedirectType: 302, Status: link.Active, Version: 11})
	a.Apply(&Entry{Code: "00000D", URL: "https://over.example/d", RedirectType: 302, Status: link.Active, Version: 12, Extras: samples[2]})
	for _, tc := range []struct {
		code, extras string
		overlay      bool
	}{{"00000A", samples[3], false}, {"00000B", "", false}, {"00000C", "", true}, {"00000D", samples[2], true}} {
		h, ok := a.Find(link.DefaultDomain, []byte(tc.code))
		got := h.Snap.Extras
		if h.Overlay {
			got = h.Rec.Extras
		}
		if !ok || h.Overlay != tc.overlay || !bytes.Equal(got, []byte(tc.extras)) || (tc.extras == "") != (got == nil) {
			t.Errorf("Find(%s) = overlay %v, extras %x, %v; want overlay %v, %x", tc.code, h.Overlay, got, ok, tc.overlay, tc.extras)
		}
		code := []byte(tc.code)
		if n := testing.AllocsPerRun(100, func() {
			h, _ := a.Find(link.DefaultDomain, code)
			v := link.ViewExtras(h.Snap.Extras)
			if h.Overlay {
				v = link.ViewExtras(h.Rec.Extras)
			}
			v.Route(&link.Facts{Device: link.DeviceIOS})
		}); n != 0 {
			t.Errorf("Find(%s) and its extras' view allocate %v times", tc.code, n)
		}
	}
}
