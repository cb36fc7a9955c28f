package store

import (
	"bytes"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// loadDomainsTB loads a snapshot of links with the domain table domains,
// each domain's bloom over its own codes, as control's builder writes it.
func loadDomainsTB(t testing.TB, links []snapshot.Link, domains []link.Domain, h snapshot.Header) *Loaded {
	t.Helper()
	var w snapshot.Writer
	filters := map[link.DomainID]*bloom.BloomFilter{}
	counts := map[link.DomainID]uint64{}
	for _, l := range links {
		if err := w.Add(l); err != nil {
			t.Fatal(err)
		}
		if filters[l.Domain] == nil {
			filters[l.Domain] = bloom.NewWithEstimates(1000, 0.01)
		}
		filters[l.Domain].AddString(l.Code)
		counts[l.Domain]++
	}
	var out bytes.Buffer
	err := w.Write(&out, h, nil, domains, func(d link.DomainID) ([]byte, uint64) {
		f := filters[d]
		if f == nil {
			return nil, 0
		}
		var b bytes.Buffer
		if _, err := f.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), counts[d]
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Load("test", out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var threeDomains = []link.Domain{
	{ID: link.DefaultDomain, Host: "edge.test", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1},
	{ID: 1, Host: "one.test", TenantID: 7, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive, Version: 2},
	{ID: 2, Host: "two.test", TenantID: 8, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 3},
}

// findOn is Find(d, code) reduced to its target and layer; "" when missed.
func findOn(a *Layers, d link.DomainID, code string) (url string, overlay bool) {
	h, ok := a.Find(d, []byte(code))
	if !ok {
		return "", false
	}
	if h.Overlay {
		return h.Rec.URL(), true
	}
	return string(h.Snap.AppendURL(nil)), false
}

// The same code on two domains in the snapshot and in the overlay gives
// two answers; a domain without the code misses; a change on one domain
// overrides that domain's entry only; the snapshot's domain table reaches
// Domains, and each domain's bloom its own hint.
func TestLayersTwoDomains(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Hint: NewHint(1000, 0.01), Segments: new(Segments), Snapshots: new(Snapshots),
		Domains: NewDomains(testKeys(t))}
	lnk := func(d link.DomainID, code, url string, v uint64) snapshot.Link {
		return snapshot.Link{Domain: d, Code: code, URL: url, RedirectType: 302, Status: link.Active, Version: v}
	}
	a.Install(loadDomainsTB(t, []snapshot.Link{
		lnk(0, "00000A", "https://zero/A", 4),
		lnk(1, "00000A", "https://one/A", 5),
		lnk(1, "promo", "https://one/promo", 6),
		lnk(2, "promo", "https://two/promo", 7),
	}, threeDomains, snapshot.Header{ChangeVersion: 10, StreamSeq: 10}))
	if !a.Domains.Known() {
		t.Fatal("the snapshot's domain table did not reach Domains")
	}
	for host, want := range map[string]link.DomainID{"edge.test": 0, "one.test": 1, "two.test": 2} {
		if s, ok := a.Domains.ByHost([]byte(host)); !ok || s.Conf.ID != want {
			t.Errorf("ByHost(%s) = %+v, %v; want domain %d", host, s, ok, want)
		}
	}
	if s, _ := a.Domains.ByHost([]byte("one.test")); s.Undecodable || len(s.Codes) != 2 {
		t.Errorf("one.test's state = %+v; want k1's decoder, then the file's other key", s)
	}
	want := []struct {
		d    link.DomainID
		code string
		url  string
	}{
		{0, "00000A", "https://zero/A"},
		{1, "00000A", "https://one/A"},
		{2, "00000A", ""},
		{1, "promo", "https://one/promo"},
		{2, "promo", "https://two/promo"},
		{0, "promo", ""},
		{3, "promo", ""},
	}
	for _, w := range want {
		if url, _ := findOn(a, w.d, w.code); url != w.url {
			t.Errorf("Find(%d, %s) = %q; want %q", w.d, w.code, url, w.url)
		}
	}
	// The stream changes domain 1's 00000A and adds 00000A on domain 2.
	a.Apply(&Entry{Domain: 1, Code: "00000A", URL: "https://one/A-11", RedirectType: 302, Status: link.Active, Version: 11})
	a.Apply(&Entry{Domain: 2, Code: "00000A", URL: "https://two/A-12", RedirectType: 302, Status: link.Active, Version: 12})
	for _, w := range []struct {
		d       link.DomainID
		url     string
		overlay bool
	}{{0, "https://zero/A", false}, {1, "https://one/A-11", true}, {2, "https://two/A-12", true}} {
		if url, overlay := findOn(a, w.d, "00000A"); url != w.url || overlay != w.overlay {
			t.Errorf("after the changes: Find(%d, 00000A) = %q (overlay %v); want %q (overlay %v)", w.d, url, overlay, w.url, w.overlay)
		}
	}
	// domain 0's entry was not marked overridden by domain 1's change.
	l := a.Snapshots.Current()
	if i, ok := l.Snap.Find(link.DefaultDomain, []byte("00000A")); !ok || l.isOverridden(i) {
		t.Errorf("domain 0's 00000A overridden (%v) by another domain's change", ok)
	}
	// Each domain's bloom answers for its own codes.
	if !a.Hint.MayContain(2, []byte("promo")) || !a.Hint.MayContain(1, []byte("promo")) {
		t.Error("the hint rules out a code its domain's bloom holds")
	}
	if a.Hint.MayContain(0, []byte("promo")) || a.Hint.MayContain(3, []byte("promo")) {
		t.Error("the hint says maybe for a code only other domains hold")
	}
	// A newer snapshot holding domain 1's change prunes it from the
	// overlay; domain 2's, not in the file, stays.
	pruned := a.Install(loadDomainsTB(t, []snapshot.Link{
		lnk(0, "00000A", "https://zero/A", 4),
		lnk(1, "00000A", "https://one/A-11", 11),
		lnk(1, "promo", "https://one/promo", 6),
		lnk(2, "promo", "https://two/promo", 7),
	}, threeDomains, snapshot.Header{ChangeVersion: 12, StreamSeq: 12, Flags: snapshot.FlagPartial}))
	if pruned != 1 {
		t.Errorf("the install pruned %d overlay entries; want domain 1's one", pruned)
	}
	if _, ok := a.Overlay.Lookup(2, []byte("00000A")); !ok {
		t.Error("the install pruned domain 2's 00000A, which the file lacks")
	}
	if url, _ := findOn(a, 2, "00000A"); url != "https://two/A-12" {
		t.Errorf("Find(2, 00000A) after the install = %q", url)
	}
	// A re-sync from the partial file drops what it lacks at or below its
	// version: domain 2's 00000A.
	if n := a.Resynced(a.Snapshots.Current()); n != 1 {
		t.Errorf("Resynced dropped %d; want 1", n)
	}
	if _, ok := a.Overlay.Lookup(2, []byte("00000A")); ok {
		t.Error("Resynced kept domain 2's 00000A")
	}
	code := []byte("promo")
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := a.Find(2, code); !ok {
			t.Fatal("missed")
		}
		a.Find(3, code)
	}); n != 0 {
		t.Errorf("Find(d, code) on the snapshot allocated %v times", n)
	}
}

// A snapshot's table does not undo a newer domain change the stream
// applied before it was installed, and a removed domain's host resolves to
// nothing after either.
func TestInstallKeepsNewerDomainChanges(t *testing.T) {
	a := &Layers{Overlay: NewOverlay(), Snapshots: new(Snapshots), Domains: NewDomains(testKeys(t))}
	removed := threeDomains[2]
	removed.Status, removed.Version = link.DomainRemoved, 20
	must(t, a.ApplyDomain(removed))
	moved := threeDomains[1]
	moved.Host, moved.Version = "uno.test", 21
	must(t, a.ApplyDomain(moved))
	a.Install(loadDomainsTB(t, []snapshot.Link{
		{Domain: 2, Code: "promo", URL: "https://two/promo", RedirectType: 302, Status: link.Active, Version: 7},
	}, threeDomains, snapshot.Header{ChangeVersion: 10, StreamSeq: 10}))
	for host, want := range map[string]bool{"edge.test": true, "uno.test": true, "one.test": false, "two.test": false} {
		if _, ok := a.Domains.ByHost([]byte(host)); ok != want {
			t.Errorf("ByHost(%s) found %v; want %v", host, ok, want)
		}
	}
}
