package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

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

func build(t testing.TB, links []Link, h Header, sealed []Sealed, bloom []byte) []byte {
	t.Helper()
	var w Writer
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

func TestRoundTrip(t *testing.T) {
	links := sampleLinks()
	sealed := []Sealed{{Namespace: "default", Intervals: []Interval{{1, 1001}, {2001, 3001}}}, {Namespace: "acme", Intervals: []Interval{{1 << 40, 1<<40 + 5}}}}
	h := Header{Flags: FlagPartial, ChangeVersion: 77, StreamSeq: 70, CreatedMillis: 1700000000000, BloomCount: 9}
	data := build(t, links, h, sealed, []byte("bloom-bytes"))
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	h.Entries = uint64(len(links))
	if s.Header != h {
		t.Errorf("header %+v, want %+v", s.Header, h)
	}
	if fmt.Sprint(s.Sealed()) != fmt.Sprint(sealed) || string(s.Bloom()) != "bloom-bytes" {
		t.Errorf("sealed %v bloom %q", s.Sealed(), s.Bloom())
	}
	for _, l := range links {
		e, ok := s.Lookup([]byte(l.Code))
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
		if _, ok := s.Lookup([]byte(miss)); ok {
			t.Errorf("Lookup(%q) found a link that does not exist", miss)
		}
	}
	// Find numbers the entries densely and At agrees with Lookup.
	seen := make([]bool, s.Len())
	for _, l := range links {
		i, ok := s.Find([]byte(l.Code))
		if !ok || i < 0 || i >= s.Len() || seen[i] {
			t.Fatalf("Find(%q) = %d, %v: want a fresh index in [0, %d)", l.Code, i, ok, s.Len())
		}
		seen[i] = true
		e, _ := s.Lookup([]byte(l.Code))
		if got := s.At(i); string(got.AppendURL(nil)) != string(e.AppendURL(nil)) || got.Version != e.Version || got.Status != e.Status {
			t.Errorf("At(Find(%q)) = %+v; Lookup gives %+v", l.Code, got, e)
		}
	}
	n := 0
	s.Each(func(code []byte, e Entry) bool {
		if _, ok := s.Lookup(code); !ok {
			t.Errorf("Each yielded %q which Lookup misses", code)
		}
		n++
		return true
	})
	if n != len(links) {
		t.Errorf("Each yielded %d entries, want %d", n, len(links))
	}
}

func TestWriterRejects(t *testing.T) {
	var w Writer
	for _, l := range []Link{
		{Code: "a/b", URL: "https://x/", RedirectType: 302, Status: link.Active},
		{Code: "abcd", URL: "https://x/", RedirectType: 200, Status: link.Active},
		{Code: "abcd", URL: "https://x/", RedirectType: 302, Status: "gone"},
	} {
		if err := w.Add(l); err == nil {
			t.Errorf("Add(%+v) accepted", l)
		}
	}
	for _, dup := range [][]Link{
		{{Code: "00000A", Status: link.Deleted}, {Code: "00000A", Status: link.Deleted}},
		{{Code: "abcd", Status: link.Deleted}, {Code: "abcd", Status: link.Deleted}},
	} {
		var w Writer
		for _, l := range dup {
			_ = w.Add(l)
		}
		if err := w.Write(&bytes.Buffer{}, Header{}, nil, nil); err == nil {
			t.Errorf("duplicate %q written", dup[0].Code)
		}
	}
}

func TestEveryCorruptionIsRejected(t *testing.T) {
	data := build(t, sampleLinks(), Header{ChangeVersion: 5}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("bloom"))
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		if _, err := Open(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: Open error = %v, want ErrCorrupt", i, err)
		}
	}
	for n := range len(data) {
		if _, err := Open(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: Open error = %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := Open(append(bytes.Clone(data), 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

func TestWrongVersionIsNamed(t *testing.T) {
	data := build(t, sampleLinks(), Header{}, nil, nil)
	le.PutUint32(data[8:], 2)
	crcAt := headerLen + sectionCount*tableRowLen
	le.PutUint32(data[crcAt:], crc32.Checksum(data[:crcAt], castagnoli))
	_, err := Open(data)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "format version 2") {
		t.Fatalf("Open of a version-2 file: %v", err)
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
	s, err := Open(build(t, append(bigSet(1000), sampleLinks()...), Header{}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	hit, custom, miss := []byte("00000A"), []byte("summer-sale"), []byte("zzzzzx")
	var buf []byte
	n := testing.AllocsPerRun(200, func() {
		e, _ := s.Lookup(hit)
		buf = e.AppendURL(buf[:0])
		s.Lookup(custom)
		s.Lookup(miss)
	})
	if n != 0 {
		t.Fatalf("lookups allocated %v times", n)
	}
}

func BenchmarkLookup1M(b *testing.B) {
	links := bigSet(1_000_000)
	data := build(b, links, Header{}, nil, nil)
	s, err := Open(data)
	if err != nil {
		b.Fatal(err)
	}
	urlBytes := 0
	for _, l := range links {
		urlBytes += len(l.URL)
	}
	codes := make([][]byte, 4096)
	for i := range codes {
		codes[i] = []byte(links[rand.IntN(len(links))].Code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s.Lookup(codes[i&4095])
	}
	b.ReportMetric(float64(len(data))/float64(len(links)), "file-bytes/link")
	b.ReportMetric(float64(urlBytes)/float64(len(links)), "url-bytes/link")
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
	s.Each(func(code []byte, e Entry) bool {
		if _, ok := s.Lookup(code); !ok {
			t.Fatalf("accepted file: Each yields %q but Lookup misses it", code)
		}
		_ = e.AppendURL(nil)
		return true
	})
}

func FuzzOpen(f *testing.F) {
	f.Add(build(f, sampleLinks(), Header{ChangeVersion: 3}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("b")))
	f.Add(build(f, nil, Header{}, nil, nil))
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
// fuzzer reaches the structural checks behind the checksums.
func FuzzOpenChecksummed(f *testing.F) {
	f.Add(build(f, sampleLinks(), Header{ChangeVersion: 3}, []Sealed{{Namespace: "default", Intervals: []Interval{{1, 10}}}}, []byte("b")))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < prefaceLen {
			return
		}
		data = bytes.Clone(data)
		for i := range sectionCount {
			row := data[headerLen+i*tableRowLen:]
			off, n := le.Uint64(row[8:]), le.Uint64(row[16:])
			if off <= uint64(len(data)) && n <= uint64(len(data))-off {
				le.PutUint32(row[4:], crc32.Checksum(data[off:off+n], castagnoli))
			}
		}
		crcAt := headerLen + sectionCount*tableRowLen
		le.PutUint32(data[crcAt:], crc32.Checksum(data[:crcAt], castagnoli))
		s, err := Open(data)
		if err != nil {
			return
		}
		checkUsable(t, s)
	})
}
