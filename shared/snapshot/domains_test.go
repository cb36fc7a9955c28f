package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

// multiDomainLinks are links of three domains: the same codes on domains 0 and
// 2 with other targets, a code only domain 3 has, and domain 2's FF1-looking
// codes (any six base62 characters; "000000" is a value FF1 can give).
func multiDomainLinks() []Link {
	return []Link{
		{Domain: 0, Code: "00000A", URL: "https://zero.example/a", RedirectType: 302, Status: link.Active},
		{Domain: 2, Code: "00000A", URL: "https://two.example/a", RedirectType: 301, Status: link.Active, ExpiresAt: 99},
		{Domain: 0, Code: "promo", URL: "https://zero.example/promo", RedirectType: 302, Status: link.Active},
		{Domain: 2, Code: "promo", URL: "https://two.example/promo", RedirectType: 307, Status: link.Active, Version: 500},
		{Domain: 2, Code: "k3Zq9X", URL: "https://two.example/k", RedirectType: 302, Status: link.Active},
		{Domain: 2, Code: "000000", URL: "https://two.example/zero", RedirectType: 302, Status: link.Active},
		{Domain: 3, Code: "only-3", URL: "https://three.example/", RedirectType: 308, Status: link.Active},
		{Domain: 3, Code: "Zz0009", Status: link.Deleted},
	}
}

// TestDomains: one file holds each domain's links apart: the same code on
// two domains is two entries, a lookup on another domain misses, each
// domain has its own bloom, and the domain table, with a domain that has
// no links and a removed one, reads back as written.
func TestDomains(t *testing.T) {
	links := multiDomainLinks()
	table := []link.Domain{
		testDomain(3),
		{ID: 9, Host: "empty.example", TenantID: 4, CodeMode: link.CodesFF1, KeyIDs: []string{"k9"}, RootRedirect: "https://empty.example/home", Robots: "User-agent: *\nAllow: /\n", Status: link.DomainActive, Version: 40},
		testDomain(0),
		testDomain(2),
		{ID: 5, Host: "gone.example", TenantID: 4, CodeMode: link.CodesSequential, Status: link.DomainRemoved, Version: 41},
	}
	var w Writer
	for _, l := range links {
		if err := w.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	blooms := func(d link.DomainID) ([]byte, uint64) { return []byte(fmt.Sprintf("bloom of %d", d)), uint64(d) * 10 }
	if err := w.Write(&buf, Header{ChangeVersion: 100}, nil, table, blooms); err != nil {
		t.Fatal(err)
	}
	s, err := Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := []link.Domain{table[2], table[3], table[0], table[4], table[1]} // by number
	if got := s.Domains(); !reflect.DeepEqual(got, want) {
		t.Errorf("Domains() = %+v\nwant %+v", got, want)
	}
	s.Domains()[1].KeyIDs[0] = "changed" // a copy: the file's table stays
	if s.Domains()[1].KeyIDs[0] != "k2" {
		t.Error("Domains() returned the file's own table, not a copy")
	}
	if s.Header.BloomCount != 190 || s.Len() != len(links) {
		t.Errorf("header %+v: want 190 bloom codes and %d entries", s.Header, len(links))
	}
	for _, d := range want {
		if got := string(s.Bloom(d.ID)); got != fmt.Sprintf("bloom of %d", d.ID) {
			t.Errorf("Bloom(%d) = %q", d.ID, got)
		}
	}
	if b := s.Bloom(4); b != nil {
		t.Errorf("Bloom(4) of a domain not in the file = %q", b)
	}
	seen := map[int]bool{}
	for _, l := range links {
		e, ok := s.Lookup(l.Domain, []byte(l.Code))
		if !ok || string(e.AppendURL(nil)) != l.URL || e.Status != l.Status || e.ExpiresAt != l.ExpiresAt || e.Version != max(l.Version, 100) {
			t.Errorf("Lookup(%d, %q) = %q %+v, %v; want %+v", l.Domain, l.Code, e.AppendURL(nil), e, ok, l)
		}
		i, ok := s.Find(l.Domain, []byte(l.Code))
		if !ok || i < 0 || i >= s.Slots() || seen[i] {
			t.Errorf("Find(%d, %q) = %d, %v: want an index of its own in [0, %d)", l.Domain, l.Code, i, ok, s.Slots())
		}
		seen[i] = true
		if got := s.At(i); string(got.AppendURL(nil)) != l.URL {
			t.Errorf("At(Find(%d, %q)) = %q, want %q", l.Domain, l.Code, got.AppendURL(nil), l.URL)
		}
	}
	for _, miss := range []Key{{3, "00000A"}, {9, "00000A"}, {5, "promo"}, {0, "k3Zq9X"}, {0, "000000"}, {2, "only-3"}, {4, "00000A"}, {1 << 23, "promo"}} {
		if _, ok := s.Lookup(miss.Domain, []byte(miss.Code)); ok {
			t.Errorf("Lookup(%d, %q) found another domain's link", miss.Domain, miss.Code)
		}
		if _, ok := s.Find(miss.Domain, []byte(miss.Code)); ok {
			t.Errorf("Find(%d, %q) found another domain's link", miss.Domain, miss.Code)
		}
	}
	// Mapped and verified as an edge opens its copy, it answers the same.
	m, err := OpenFile(writeTemp(t, buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if e, ok := m.Lookup(l.Domain, []byte(l.Code)); !ok || string(e.AppendURL(nil)) != l.URL {
			t.Errorf("mapped: Lookup(%d, %q) = %q, %v; want %q", l.Domain, l.Code, e.AppendURL(nil), ok, l.URL)
		}
	}
	if !reflect.DeepEqual(m.Domains(), want) {
		t.Errorf("mapped: Domains() = %+v", m.Domains())
	}
	got := map[Key]string{}
	s.Each(func(d link.DomainID, code []byte, e Entry) bool {
		got[Key{d, string(code)}] = string(e.AppendURL(nil))
		return true
	})
	if len(got) != len(links) {
		t.Errorf("Each yielded %d entries, want %d: %v", len(got), len(links), got)
	}
	for _, l := range links {
		if u, ok := got[Key{l.Domain, l.Code}]; !ok || u != l.URL {
			t.Errorf("Each gave %d/%q = %q, %v; want %q", l.Domain, l.Code, u, ok, l.URL)
		}
	}
}

// TestDomainIndex: lookups find each domain's part whether the file's
// domain numbers are dense (indexed) or sparse (searched).
func TestDomainIndex(t *testing.T) {
	for _, ids := range [][]link.DomainID{{0, 1, 2, 3}, {0, 7, 1 << 20, link.MaxDomainID}} {
		var w Writer
		table := []link.Domain{}
		for _, d := range ids {
			table = append(table, link.Domain{ID: d, Host: fmt.Sprintf("h%d.example", d), CodeMode: link.CodesSequential, Status: link.DomainActive})
			for _, c := range []string{"00000A", "custom"} {
				if err := w.Add(Link{Domain: d, Code: c, URL: fmt.Sprintf("https://t.example/%d/%s", d, c), RedirectType: 302, Status: link.Active}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var buf bytes.Buffer
		if err := w.Write(&buf, Header{}, nil, table, nil); err != nil {
			t.Fatal(err)
		}
		s, err := Open(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ids {
			for _, c := range []string{"00000A", "custom"} {
				e, ok := s.Lookup(d, []byte(c))
				if want := fmt.Sprintf("https://t.example/%d/%s", d, c); !ok || string(e.AppendURL(nil)) != want {
					t.Errorf("domains %v: Lookup(%d, %q) = %q, %v; want %q", ids, d, c, e.AppendURL(nil), ok, want)
				}
			}
			if _, ok := s.Lookup(d+1, []byte("custom")); ok && !containsID(ids, d+1) {
				t.Errorf("domains %v: Lookup(%d) found a link", ids, d+1)
			}
		}
	}
}

func containsID(ids []link.DomainID, d link.DomainID) bool {
	for _, x := range ids {
		if x == d {
			return true
		}
	}
	return false
}

// TestWriterRejectsDomains: a domain table an edge could not use, or links
// of a domain it lacks, are refused by Write with an error naming why; the
// same code on two domains is not a duplicate.
func TestWriterRejectsDomains(t *testing.T) {
	ok := []link.Domain{testDomain(0), testDomain(2)}
	for _, tc := range []struct {
		name   string
		links  []Link
		table  []link.Domain
		reason string
	}{
		{"no table", nil, nil, "lacks the platform's domain"},
		{"no platform domain", nil, []link.Domain{testDomain(2)}, "lacks the platform's domain"},
		{"link of a domain not in the table", []Link{{Domain: 3, Code: "abcd", Status: link.Deleted}}, ok, "links of domain 3"},
		{"same number twice", nil, []link.Domain{testDomain(0), testDomain(2), testDomain(2)}, "domain 2 twice"},
		{"same host twice", nil, []link.Domain{testDomain(0), testDomain(2), {ID: 3, Host: "d2.example", CodeMode: link.CodesSequential, Status: link.DomainActive}}, "same host"},
		{"host not canonical", nil, []link.Domain{testDomain(0), {ID: 3, Host: "Go.Example.COM", CodeMode: link.CodesSequential, Status: link.DomainActive}}, "not canonical"},
		{"host with a port", nil, []link.Domain{testDomain(0), {ID: 3, Host: "go.example:8080", CodeMode: link.CodesSequential, Status: link.DomainActive}}, "not canonical"},
		{"ff1 without a key", nil, []link.Domain{testDomain(0), {ID: 3, Host: "go.example", CodeMode: link.CodesFF1, Status: link.DomainActive}}, "key ids"},
		{"unknown mode", nil, []link.Domain{testDomain(0), {ID: 3, Host: "go.example", CodeMode: "rot13", Status: link.DomainActive}}, "code mode"},
		{"unknown status", nil, []link.Domain{testDomain(0), {ID: 3, Host: "go.example", CodeMode: link.CodesSequential, Status: "paused"}}, "status"},
		{"number too large", nil, []link.Domain{testDomain(0), {ID: link.MaxDomainID + 1, Host: "go.example", CodeMode: link.CodesSequential, Status: link.DomainActive}}, "above"},
		{"robots too long", nil, []link.Domain{testDomain(0), {ID: 3, Host: "go.example", CodeMode: link.CodesSequential, Status: link.DomainActive, Robots: strings.Repeat("x", link.MaxRobotsLen+1)}}, "robots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Writer
			for _, l := range tc.links {
				if err := w.Add(l); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			err := w.Write(&buf, Header{}, nil, tc.table, nil)
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Write = %v, want an error mentioning %q", err, tc.reason)
			}
		})
	}
	var w Writer
	for _, d := range []link.DomainID{0, 2} {
		for _, c := range []string{"00000A", "abcd"} {
			if err := w.Add(Link{Domain: d, Code: c, Status: link.Deleted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Write(&bytes.Buffer{}, Header{}, nil, ok, nil); err != nil {
		t.Fatalf("the same codes on two domains: %v", err)
	}
	if err := w.Add(Link{Domain: 2, Code: "abcd", Status: link.Deleted}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&bytes.Buffer{}, Header{}, nil, ok, nil); err == nil || !strings.Contains(err.Error(), `"abcd" on domain 2`) {
		t.Fatalf("a code twice on domain 2: %v", err)
	}
}

// TestReaderRejectsDomainTables: a file whose domain table or layout is
// inconsistent, re-signed so that only the structure is wrong, is refused
// when it is opened (the table is read before any lookup).
func TestReaderRejectsDomainTables(t *testing.T) {
	data := build(t, multiDomainLinks(), Header{ChangeVersion: 5}, nil, []byte("bloom"))
	sec := func(b []byte, kind int) (off, n uint64) {
		row := b[headerLen+(kind-1)*tableRowLen:]
		return le.Uint64(row[8:]), le.Uint64(row[16:])
	}
	for _, tc := range []struct {
		name   string
		change func(b []byte) []byte
		reason string
	}{
		{"host upper case", func(b []byte) []byte {
			off, n := sec(b, sectionDomains)
			i := bytes.Index(b[off:off+n], []byte("d2.example"))
			b[off+uint64(i)] = 'D'
			return b
		}, "not canonical"},
		{"two domains with one host", func(b []byte) []byte {
			off, n := sec(b, sectionDomains)
			i := bytes.Index(b[off:off+n], []byte("d3.example"))
			b[off+uint64(i)+1] = '2'
			return b
		}, "same host"},
		{"layout row of another domain", func(b []byte) []byte {
			off, _ := sec(b, sectionLayout)
			le.PutUint64(b[off+layoutRowLen:], 7)
			return b
		}, "layout: row 1 is domain 7"},
		{"rows moved between domains", func(b []byte) []byte {
			off, _ := sec(b, sectionLayout)
			le.PutUint64(b[off+24:], le.Uint64(b[off+24:])+1)
			return b
		}, "layout"},
		{"bloom count off", func(b []byte) []byte {
			off, _ := sec(b, sectionLayout)
			le.PutUint64(b[off+64:], 1)
			return b
		}, "blooms of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := resign(tc.change(bytes.Clone(data)), sectionCount)
			_, err := OpenDeferred(bad)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("OpenDeferred = %v, want ErrCorrupt mentioning %q", err, tc.reason)
			}
		})
	}
	if s, err := OpenDeferred(resign(bytes.Clone(data), sectionCount)); err != nil || s.Verify(context.Background()) != nil {
		t.Fatalf("re-signing alone broke the file: %v", err)
	}
}

// resign recomputes every section's checksum and the header's, as
// FuzzOpenChecksummed does.
func resign(data []byte, n int) []byte {
	for i := range n {
		row := data[headerLen+i*tableRowLen:]
		off, size := le.Uint64(row[8:]), le.Uint64(row[16:])
		if off <= uint64(len(data)) && size <= uint64(len(data))-off {
			le.PutUint32(row[4:], crcOf(data[off:off+size]))
		}
	}
	crcAt := headerLen + n*tableRowLen
	le.PutUint32(data[crcAt:], crcOf(data[:crcAt]))
	return data
}

// BenchmarkOpenDomains is what opening costs a file of 10,000 domains of
// one link each: the domain table is decoded and checked (every host
// canonical) and the layout read when the file is opened, whatever the
// number of links.
func BenchmarkOpenDomains(b *testing.B) {
	const n = 10_000
	var w Writer
	table := []link.Domain{testDomain(0)}
	for d := link.DomainID(1); d < n; d++ {
		table = append(table, testDomain(d))
		if err := w.Add(Link{Domain: d, Code: "promo", URL: "https://x.example/", RedirectType: 302, Status: link.Active}); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := w.Write(&buf, Header{}, nil, table, nil); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenDeferred(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(data))/n, "file-bytes/domain")
}
