package snapshot

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

func sampleLinks() []Link {
	return []Link{
		{Code: "00000A", URL: "https://shop.example.com/p/1?utm_source=mail", RedirectType: 302, Status: link.Active},
		{Code: "00000a", URL: "https://shop.example.com/p/2", RedirectType: 301, Status: link.Active},
		{Code: "zzzzzz", URL: "http://127.0.0.1:8080", RedirectType: 307, Status: link.Active, ExpiresAt: 1893456000000},
		{Code: "000001", Status: link.Deleted},
		{Code: "000002", URL: "https://x.example/", RedirectType: 302, Status: link.Disabled},
		{Code: "summer-sale", URL: "https://shop.example.com/#top", RedirectType: 308, Status: link.Active, ExpiresAt: 1},
		{Code: "abcd", URL: "https://[::1]:8443/a?b#c", RedirectType: 302, Status: link.Active},
		{Code: "Z_9-", URL: "weird-without-scheme", RedirectType: 302, Status: link.Active},
		{Code: "fresh-1", URL: "https://new.example/", RedirectType: 302, Status: link.Active, Version: 1000},
		{Code: "000003", Status: link.Disabled, Version: 1001, ExpiresAt: 5},
	}
}

// testDomain is the domain table entry build gives domain d.
func testDomain(d link.DomainID) link.Domain {
	if d == link.DefaultDomain {
		return link.Domain{ID: d, Host: "platform.example", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1}
	}
	return link.Domain{ID: d, Host: fmt.Sprintf("d%d.example", d), TenantID: int64(d), CodeMode: link.CodesFF1,
		KeyIDs: []string{"k2", "k1"}, NotFoundRedirect: "https://www.example/404", Status: link.DomainActive, Version: uint64(d) + 1}
}

// build writes links as format 3 with a domain table of domain 0 and the
// domains the links use (testDomain), domain 0's bloom being bloom (built
// from h.BloomCount codes) and domain d's "bloom-d" (from its links).
func build(t testing.TB, links []Link, h Header, sealed []Sealed, bloom []byte) []byte {
	t.Helper()
	var w Writer
	counts := map[link.DomainID]uint64{}
	domains := []link.Domain{testDomain(link.DefaultDomain)}
	for _, l := range links {
		if err := w.Add(l); err != nil {
			t.Fatal(err)
		}
		if _, seen := counts[l.Domain]; !seen && l.Domain != link.DefaultDomain {
			domains = append(domains, testDomain(l.Domain))
		}
		counts[l.Domain]++
	}
	var buf bytes.Buffer
	if err := w.Write(&buf, h, sealed, domains, func(d link.DomainID) ([]byte, uint64) {
		if d == link.DefaultDomain {
			return bloom, h.BloomCount
		}
		return []byte(fmt.Sprintf("bloom-%d", d)), counts[d]
	}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func buildV1(t testing.TB, links []Link, h Header, sealed []Sealed, bloom []byte) []byte {
	t.Helper()
	var w writerV1
	for _, l := range links {
		if err := w.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := w.Write(&buf, h, sealed, bloom); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var (
	sampleSealed = []Sealed{{Namespace: "default", Intervals: []Interval{{1, 1001}, {2001, 3001}}}, {Namespace: "acme", Intervals: []Interval{{1 << 40, 1<<40 + 5}}}}
	sampleHeader = Header{Flags: FlagPartial, ChangeVersion: 77, StreamSeq: 70, CreatedMillis: 1700000000000, BloomCount: 9}
)

// checkSample checks that s answers exactly what sampleLinks says.
func checkSample(t *testing.T, s *Snapshot) {
	t.Helper()
	links := sampleLinks()
	h := sampleHeader
	h.Entries = uint64(len(links))
	if s.Header != h {
		t.Errorf("header %+v, want %+v", s.Header, h)
	}
	if fmt.Sprint(s.Sealed()) != fmt.Sprint(sampleSealed) || string(s.Bloom(link.DefaultDomain)) != "bloom-bytes" {
		t.Errorf("sealed %v bloom %q", s.Sealed(), s.Bloom(link.DefaultDomain))
	}
	if b := s.Bloom(7); b != nil {
		t.Errorf("Bloom(7) of a file without domain 7 = %q", b)
	}
	if ds := s.Domains(); (s.Format() >= 3) != (ds != nil) || (ds != nil && !reflect.DeepEqual(ds, []link.Domain{testDomain(0)})) {
		t.Errorf("format %d: Domains() = %+v", s.Format(), ds)
	}
	for _, l := range links {
		if _, ok := s.Lookup(1, []byte(l.Code)); ok {
			t.Errorf("Lookup(1, %q) found domain 0's link on domain 1", l.Code)
		}
		e, ok := s.Lookup(link.DefaultDomain, []byte(l.Code))
		if !ok {
			t.Fatalf("Lookup(%q) missing", l.Code)
		}
		wantVersion := max(l.Version, h.ChangeVersion)
		if got := string(e.AppendURL(nil)); got != l.URL || e.Status != l.Status || e.ExpiresAt != l.ExpiresAt || e.Version != wantVersion ||
			(l.Status == link.Active && e.RedirectType != l.RedirectType) {
			t.Errorf("Lookup(%q) = %q %v %v %d v%d; want %+v", l.Code, got, e.RedirectType, e.Status, e.ExpiresAt, e.Version, l)
		}
	}
	for _, miss := range []string{"00000B", "00000b", "000000", "ABCD", "summer-salE", "zzzzzy", "abc", "zzzzzzz"} {
		if _, ok := s.Lookup(link.DefaultDomain, []byte(miss)); ok {
			t.Errorf("Lookup(%q) found a link that does not exist", miss)
		}
	}
	// Find numbers the entries apart and At agrees with Lookup.
	seen := make([]bool, s.Slots())
	for _, l := range links {
		i, ok := s.Find(link.DefaultDomain, []byte(l.Code))
		if !ok || i < 0 || i >= s.Slots() || seen[i] {
			t.Fatalf("Find(%q) = %d, %v: want a fresh index in [0, %d)", l.Code, i, ok, s.Slots())
		}
		seen[i] = true
		e, _ := s.Lookup(link.DefaultDomain, []byte(l.Code))
		if got := s.At(i); string(got.AppendURL(nil)) != string(e.AppendURL(nil)) || got.Version != e.Version || got.Status != e.Status {
			t.Errorf("At(Find(%q)) = %+v; Lookup gives %+v", l.Code, got, e)
		}
	}
	n := 0
	s.Each(func(d link.DomainID, code []byte, e Entry) bool {
		if _, ok := s.Lookup(d, code); !ok || d != link.DefaultDomain {
			t.Errorf("Each yielded %d/%q which Lookup misses", d, code)
		}
		n++
		return true
	})
	if n != len(links) || s.Len() != len(links) {
		t.Errorf("Each yielded %d entries, Len %d; want %d", n, s.Len(), len(links))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		format int
	}{
		{"format 3", build(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes")), 3},
		{"format 1", buildV1(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if s.Format() != tc.format || !s.Verified() || s.Size() != len(tc.data) {
				t.Errorf("format %d verified %v size %d; want %d, true, %d", s.Format(), s.Verified(), s.Size(), tc.format, len(tc.data))
			}
			checkSample(t, s)
		})
	}
}

// TestFormat1FileStillReads reads a file written by the format 1 writer
// itself (testdata/v1-sample.snap), as control wrote them before format 2.
func TestFormat1FileStillReads(t *testing.T) {
	data, err := os.ReadFile("testdata/v1-sample.snap")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Format() != 1 {
		t.Fatalf("format %d, want 1", s.Format())
	}
	checkSample(t, s)
}

// TestFormat2FileStillReads reads a file written by the format 2 writer
// (testdata/v2-sample.snap, sampleLinks as the writer wrote them before
// format 3): domain 0's links, no domain table.
func TestFormat2FileStillReads(t *testing.T) {
	s, err := Open(v2Sample(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Format() != 2 {
		t.Fatalf("format %d, want 2", s.Format())
	}
	checkSample(t, s)
}

func v2Sample(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/v2-sample.snap")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestWriterRejects(t *testing.T) {
	var w Writer
	for _, l := range []Link{
		{Code: "a/b", URL: "https://x/", RedirectType: 302, Status: link.Active},
		{Code: "abcd", URL: "https://x/", RedirectType: 200, Status: link.Active},
		{Code: "abcd", URL: "https://x/", RedirectType: 302, Status: "gone"},
		{Code: "abcd", URL: "https://x/" + strings.Repeat("a", 1<<16), RedirectType: 302, Status: link.Active},
		{Domain: link.MaxDomainID + 1, Code: "abcd", URL: "https://x/", RedirectType: 302, Status: link.Active},
	} {
		if err := w.Add(l); err == nil {
			t.Errorf("Add(%.40q…) accepted", l.Code+" "+l.URL)
		}
	}
	if w.Len() != 0 {
		t.Fatalf("refused links were kept: Len %d", w.Len())
	}
	for _, dup := range [][]Link{
		{{Code: "00000A", Status: link.Deleted}, {Code: "00000A", Status: link.Deleted}},
		{{Code: "abcd", Status: link.Deleted}, {Code: "abcd", Status: link.Deleted}},
	} {
		var w Writer
		for _, l := range dup {
			_ = w.Add(l)
		}
		if err := w.Write(&bytes.Buffer{}, Header{}, nil, []link.Domain{testDomain(0)}, nil); err == nil || !strings.Contains(err.Error(), dup[0].Code) {
			t.Errorf("duplicate %q written: %v", dup[0].Code, err)
		}
	}
}

func TestWriteTwiceIsTheSame(t *testing.T) {
	var w Writer
	for _, l := range bigSet(5000) {
		if err := w.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	var a, b bytes.Buffer
	if err := w.Write(&a, Header{ChangeVersion: 3}, nil, []link.Domain{testDomain(0)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&b, Header{ChangeVersion: 3}, nil, []link.Domain{testDomain(0)}, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of the same links differ")
	}
}

func TestMixIsABijection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, x := range []uint64{0, 1, base62.MaxID, ^uint64(0)} {
		if unmix(mix(x)) != x {
			t.Fatalf("unmix(mix(%d)) = %d", x, unmix(mix(x)))
		}
	}
	for range 100000 {
		if x := r.Uint64(); unmix(mix(x)) != x {
			t.Fatalf("unmix(mix(%d)) = %d", x, unmix(mix(x)))
		}
	}
}

// TestTablesAtScale: every code of a large file is found with its own
// target, and codes it does not hold are not, with IDs in runs (as
// segments hand them out), spread, and a share of custom codes.
func TestTablesAtScale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	want := map[string]string{}
	var links []Link
	add := func(code string) {
		if _, dup := want[code]; dup {
			return
		}
		u := fmt.Sprintf("https://o%d.example/%d", r.IntN(50), r.IntN(1e9))
		want[code] = u
		links = append(links, Link{Code: code, URL: u, RedirectType: 302, Status: link.Active})
	}
	for i := range 60000 {
		c, _ := base62.Encode(uint64(i + 1)) // a dense run from the first ID
		add(c)
		c, _ = base62.Encode(r.Uint64N(base62.MaxID) + 1) // spread, as with keyed codes
		add(c)
		if i%10 == 0 {
			add(fmt.Sprintf("promo-%d", r.IntN(1e9)))
		}
	}
	s, err := Open(build(t, links, Header{}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for code, u := range want {
		e, ok := s.Lookup(link.DefaultDomain, []byte(code))
		if !ok || string(e.AppendURL(nil)) != u {
			t.Fatalf("Lookup(%q) = %q, %v; want %q", code, e.AppendURL(nil), ok, u)
		}
	}
	for range 100000 {
		code, _ := base62.Encode(r.Uint64N(base62.MaxID) + 1)
		if r.IntN(4) == 0 {
			code = fmt.Sprintf("promo-%d", r.IntN(1e9))
		}
		if _, ok := s.Lookup(link.DefaultDomain, []byte(code)); ok != (want[code] != "") {
			t.Fatalf("Lookup(%q) = %v, want %v", code, ok, want[code] != "")
		}
	}
}

func TestEveryCorruptionIsRejected(t *testing.T) {
	for name, data := range map[string][]byte{
		"format 3":         build(t, sampleLinks(), Header{ChangeVersion: 5}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("bloom")),
		"format 3 domains": build(t, multiDomainLinks(), Header{ChangeVersion: 5}, nil, []byte("bloom")),
		"format 4":         build(t, extrasLinks(t), Header{ChangeVersion: 5}, nil, []byte("bloom")),
		"format 2":         v2Sample(t),
		"format 1":         buildV1(t, sampleLinks(), Header{ChangeVersion: 5}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("bloom")),
	} {
		t.Run(name, func(t *testing.T) {
			for i := range data {
				bad := bytes.Clone(data)
				bad[i] ^= 0x5a
				if _, err := Open(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d flipped: Open error = %v, want ErrCorrupt", i, err)
				}
				// Deferred: refused at once, or by Verify; the lookups
				// meanwhile do not fault.
				s, err := OpenDeferred(bad)
				if err == nil {
					lookAround(s)
					err = s.Verify(context.Background())
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("byte %d flipped: OpenDeferred then Verify = %v, want ErrCorrupt", i, err)
				}
			}
			for n := range len(data) {
				if _, err := OpenDeferred(data[:n]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("truncated to %d bytes: OpenDeferred error = %v, want ErrCorrupt", n, err)
				}
			}
			if _, err := OpenDeferred(append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte accepted: %v", err)
			}
		})
	}
}

// lookAround looks up every sample code and walks the file, as an edge
// does before Verify finishes.
func lookAround(s *Snapshot) {
	for _, l := range append(sampleLinks(), multiDomainLinks()...) {
		for _, d := range []link.DomainID{l.Domain, 0, 1, 2, 3, 1 << 23} {
			e, _ := s.Lookup(d, []byte(l.Code))
			_ = e.AppendURL(nil)
			if i, ok := s.Find(d, []byte(l.Code)); ok {
				_ = s.At(i)
			}
			_ = s.Bloom(d)
		}
	}
	_ = s.Domains()
	s.Each(func(_ link.DomainID, code []byte, e Entry) bool { _ = e.AppendURL(nil); return true })
}

// TestDeferredVerification: a damaged entry section passes OpenDeferred
// (only its checksum shows the damage), Verify names it, and keeps
// refusing it; an intact file opened the same way verifies.
func TestDeferredVerification(t *testing.T) {
	data := build(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes"))
	s, err := OpenDeferred(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Verified() {
		t.Fatal("a deferred file counts as verified before Verify")
	}
	checkSample(t, s) // answers before verification
	if err := s.Verify(context.Background()); err != nil || !s.Verified() {
		t.Fatalf("Verify of an intact file: %v (verified %v)", err, s.Verified())
	}
	for _, kind := range []int{sectionGenerated, sectionCustom, sectionCodes, sectionRest, sectionExpiry, sectionNewer} {
		bad := bytes.Clone(data)
		row := bad[headerLen+(kind-1)*tableRowLen:]
		off, n := le.Uint64(row[8:]), le.Uint64(row[16:])
		if n == 0 {
			t.Fatalf("section %d is empty in the sample", kind)
		}
		bad[off+n-1] ^= 0x01
		s, err := OpenDeferred(bad)
		if err != nil {
			t.Fatalf("section %d damaged: OpenDeferred refused it (%v); only Verify reads it", kind, err)
		}
		lookAround(s)
		want := fmt.Sprintf("section %d checksum mismatch", kind)
		for range 2 {
			if err := s.Verify(context.Background()); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) || s.Verified() {
				t.Fatalf("section %d damaged: Verify = %v, want ErrCorrupt mentioning %q", kind, err, want)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, _ = OpenDeferred(data)
	if err := s.Verify(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with an ended context = %v", err)
	}
	if err := s.Verify(context.Background()); err != nil {
		t.Fatalf("Verify after an interrupted one: %v", err)
	}
}

func TestWrongVersionIsNamed(t *testing.T) {
	data := build(t, sampleLinks(), Header{}, nil, nil)
	le.PutUint32(data[8:], 5)
	crcAt := headerLen + sectionCount*tableRowLen
	le.PutUint32(data[crcAt:], crc32.Checksum(data[:crcAt], castagnoli))
	_, err := Open(data)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format version 5") {
		t.Fatalf("Open of a version-5 file: %v", err)
	}
}

// bigSet makes n links shaped like a campaign: a few hundred origins, paths
// and UTM query strings averaging about 80 bytes.
func bigSet(n int) []Link {
	r := rand.New(rand.NewPCG(1, 2))
	links := make([]Link, 0, n)
	for i := range n {
		code, _ := base62.Encode((uint64(i)*7919+100_000)%base62.MaxID + 1)
		links = append(links, Link{
			Code: code, RedirectType: 302, Status: link.Active,
			URL: fmt.Sprintf("https://shop%d.example.com/products/%d?utm_source=newsletter&utm_campaign=c%d", r.IntN(300), r.IntN(1e6), r.IntN(50)),
		})
	}
	return links
}

func TestLookupDoesNotAllocate(t *testing.T) {
	for name, data := range map[string][]byte{
		"format 3": build(t, append(append(bigSet(1000), sampleLinks()...), multiDomainLinks()[1:]...), Header{}, nil, nil),
		"format 4": build(t, append(bigSet(1000), extrasLinks(t)...), Header{}, nil, nil),
		"format 2": v2Sample(t),
		"format 1": buildV1(t, append(bigSet(1000), sampleLinks()...), Header{}, nil, nil),
	} {
		s, err := Open(data)
		if err != nil {
			t.Fatal(err)
		}
		hit, custom, miss := []byte("00000A"), []byte("summer-sale"), []byte("zzzzzx")
		var buf []byte
		n := testing.AllocsPerRun(200, func() {
			e, _ := s.Lookup(link.DefaultDomain, hit)
			buf = e.AppendURL(buf[:0])
			s.Lookup(link.DefaultDomain, custom)
			s.Lookup(link.DefaultDomain, miss)
			s.Lookup(2, hit)
			s.Lookup(2, custom)
			s.Lookup(1<<20, hit)
			i, _ := s.Find(link.DefaultDomain, hit)
			_ = s.At(i)
			_ = s.Bloom(2)
		})
		if n != 0 {
			t.Fatalf("%s: lookups allocated %v times", name, n)
		}
	}
}

// BenchmarkLookup compares the formats and a Go map of the same links on
// one million links, with codes drawn from all of them (laid out flat, so
// that fetching the code costs nothing), so that most lookups miss the CPU
// caches as an edge's do.
func BenchmarkLookup(b *testing.B) {
	links := bigSet(1_000_000)
	const sample = 1 << 20
	codes := make([]byte, 0, sample*base62.Length)
	picks := make([]int, 0, sample)
	for range sample {
		picks = append(picks, rand.IntN(len(links)))
		codes = append(codes, links[picks[len(picks)-1]].Code...)
	}
	code := func(i int) []byte { i &= sample - 1; return codes[i*base62.Length : i*base62.Length+base62.Length] }
	// The same links spread over 100 domains, looked up on theirs.
	spread := slices.Clone(links)
	for i := range spread {
		spread[i].Domain = link.DomainID(i % 100)
	}
	domains := make([]link.DomainID, sample)
	for i, p := range picks {
		domains[i] = spread[p].Domain
	}
	// The same links with extras (two rules, a password hash, a limit):
	// on every link, and on one in a hundred.
	x := extrasOf(b, link.Extras{Rules: []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=x"}}, PasswordHash: testHash, MaxClicks: 1000})
	allExtras, someExtras := slices.Clone(links), slices.Clone(links)
	for i := range allExtras {
		allExtras[i].Extras = x
		if i%100 == 0 {
			someExtras[i].Extras = x
		}
	}
	for _, f := range []struct {
		name   string
		build  func(testing.TB, []Link, Header, []Sealed, []byte) []byte
		links  []Link
		domain func(i int) link.DomainID
	}{
		{"format3", build, links, func(int) link.DomainID { return link.DefaultDomain }},
		{"format3-100domains", build, spread, func(i int) link.DomainID { return domains[i&(sample-1)] }},
		{"format4-extras-every-link", build, allExtras, func(int) link.DomainID { return link.DefaultDomain }},
		{"format4-extras-1-in-100", build, someExtras, func(int) link.DomainID { return link.DefaultDomain }},
		{"format1", buildV1, links, func(int) link.DomainID { return link.DefaultDomain }},
	} {
		data := f.build(b, f.links, Header{}, nil, nil)
		s, err := Open(data)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC() // the build's garbage, not the lookups', is collected here
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, ok := s.Lookup(f.domain(i), code(i)); !ok {
					b.Fatal("miss")
				}
			}
			b.ReportMetric(float64(len(data))/float64(len(links)), "file-bytes/link")
		})
	}
	m := make(map[string]string, len(links))
	for _, l := range links {
		m[l.Code] = l.URL
	}
	b.Run("gomap", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := m[string(code(i))]; !ok {
				b.Fatal("miss")
			}
		}
	})
}

func BenchmarkOpen1M(b *testing.B) {
	data := build(b, bigSet(1_000_000), Header{}, nil, nil)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Open(data); err != nil {
			b.Fatal(err)
		}
	}
}

// checkUsable fails t unless every entry of an accepted file can be
// looked up and its URL assembled.
func checkUsable(t *testing.T, s *Snapshot) {
	t.Helper()
	n := 0
	s.Each(func(d link.DomainID, code []byte, e Entry) bool {
		if _, ok := s.Lookup(d, code); !ok {
			t.Fatalf("accepted file: Each yields %d/%q but Lookup misses it", d, code)
		}
		_ = e.AppendURL(nil)
		n++
		return true
	})
	if n != s.Len() {
		t.Fatalf("accepted file: Each yields %d entries, Len is %d", n, s.Len())
	}
}

func fuzzSeeds(f *testing.F) {
	f.Add(build(f, sampleLinks(), Header{ChangeVersion: 3}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("b")))
	f.Add(build(f, nil, Header{}, nil, nil))
	f.Add(build(f, multiDomainLinks(), Header{ChangeVersion: 3}, nil, []byte("b")))
	f.Add(build(f, extrasLinks(f), Header{ChangeVersion: 3}, nil, []byte("b")))
	f.Add(v2Sample(f))
	f.Add(buildV1(f, sampleLinks(), Header{ChangeVersion: 3}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("b")))
}

func FuzzOpen(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Whatever Open accepts must be fully usable.
		checkUsable(t, s)
	})
}

// FuzzOpenChecksummed re-signs mutated files before opening them, so the
// fuzzer reaches the structural checks behind the checksums, and looks up
// in what OpenDeferred accepts before Verify: that must never fault.
func FuzzOpenChecksummed(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < headerLen {
			return
		}
		n := v1Sections
		switch le.Uint32(data[8:]) {
		case 2:
			n = sectionCountV2
		case 3:
			n = sectionCount
		case 4:
			n = sectionCountV4
		}
		if len(data) < prefaceLen(n) {
			return
		}
		data = resign(bytes.Clone(data), n)
		s, err := OpenDeferred(data)
		if err != nil {
			return
		}
		lookAround(s)
		for _, c := range []string{"000000", "00000A", "zzzzzz", "abcd", "fresh-1", "nope-nope"} {
			for d := range link.DomainID(4) {
				e, _ := s.Lookup(d, []byte(c))
				_ = e.AppendURL(nil)
			}
		}
		if s.Verify(context.Background()) != nil {
			return
		}
		checkUsable(t, s)
	})
}

// hitFile is a snapshot file for BenchmarkHit to run on instead of 2M
// links built in memory, e.g. one bench/snapshot -dir kept at 10⁸ links.
var hitFile = flag.String("hitfile", "", "BenchmarkHit: measure this snapshot file (mapped) instead of 2M links built in memory")

// BenchmarkHit is a hit as the edge serves it: the lookup, the work a
// handler does before it copies the target (headers, counters: stood in
// for by hashing the code), then the copy; with the target prefetched by
// the lookup and without, in alternating rounds of 10,000 hits, each
// timed in this thread's CPU time, so that both see the same machine:
// on a shared one only their ratio (prefetch/plain) means anything.
// -hitfile runs it on a file of any size, opened as an edge opens its
// local copy.
func BenchmarkHit(b *testing.B) {
	var s *Snapshot
	if *hitFile != "" {
		var err error
		if s, err = OpenFile(*hitFile); err != nil {
			b.Fatal(err)
		}
		if err := s.Verify(context.Background()); err != nil { // reads it in, as at an edge
			b.Fatal(err)
		}
	} else {
		var err error
		if s, err = Open(build(b, bigSet(2_000_000), Header{}, nil, nil)); err != nil { // ~150 MB: past the caches
			b.Fatal(err)
		}
	}
	// Codes of rows drawn uniformly: generated codes from their IDs.
	const sample = 1 << 20
	codes := make([]byte, 0, sample*base62.Length)
	for len(codes) < cap(codes) {
		id := le.Uint64(s.t.gen[rand.IntN(s.t.genRows)*genRowLen:]) & keyMask
		if id != 0 {
			var c [base62.Length]byte
			if err := base62.Put(c[:], id); err != nil {
				b.Fatal(err)
			}
			codes = append(codes, c[:]...)
		}
	}
	code := func(i int) []byte { i &= sample - 1; return codes[i*base62.Length : i*base62.Length+base62.Length] }
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, 0, 512)
	var sum uint32
	hit := func(i int, warm bool) {
		c := code(i)
		j, ok := s.find(link.DefaultDomain, c)
		if !ok {
			b.Fatal("miss")
		}
		e, _ := s.decodeV2(j, warm)
		for range 4 {
			sum = crc32.Update(sum, crc32.IEEETable, c)
		}
		buf = e.AppendURL(buf[:0])
	}
	const round = 10_000
	var cpu [2]time.Duration
	var n [2]int
	i := 0
	for r := 0; b.Loop(); r++ {
		warm := r%2 == 1
		c0 := threadCPU()
		for range round {
			hit(i, warm)
			i++
		}
		cpu[r%2] += threadCPU() - c0
		n[r%2] += round
	}
	runtime.KeepAlive(sum)
	plain, pf := float64(cpu[0])/float64(max(n[0], 1)), float64(cpu[1])/float64(max(n[1], 1))
	b.ReportMetric(plain, "plain-cpu-ns/hit")
	b.ReportMetric(pf, "prefetch-cpu-ns/hit")
	b.ReportMetric(pf/plain, "prefetch/plain")
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
