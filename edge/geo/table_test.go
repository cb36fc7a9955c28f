package geo

import (
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func mustTor(t testing.TB, text string) *Table {
	t.Helper()
	tb, err := ReadTor("test", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func check(t *testing.T, tb *Table, addr, want string) {
	t.Helper()
	cc, ok := tb.Lookup(netip.MustParseAddr(addr))
	switch {
	case want == "" && ok:
		t.Errorf("Lookup(%s) = %s, want no country", addr, cc[:])
	case want != "" && (!ok || string(cc[:]) != want):
		t.Errorf("Lookup(%s) = %q, %v; want %s", addr, cc[:], ok, want)
	}
}

// TestFixtureKnownAddresses: the committed subset of the IPFire data gives
// the known countries, and none for private and reserved addresses.
func TestFixtureKnownAddresses(t *testing.T) {
	tb, err := LoadTor("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range known {
		check(t, tb, k.addr, k.cc)
	}
	for _, a := range nowhere {
		check(t, tb, a, "")
	}
	info := tb.Info()
	if info.Generated.Format("2006-01-02") != "2026-06-25" || info.V4Ranges == 0 || info.V6Ranges == 0 ||
		!strings.Contains(info.Source, filepath.Join("testdata", "geoip6")) {
		t.Errorf("Info() = %+v; want the header's date, both families, the files named", info)
	}
}

// TestShippedDataKnownAddresses: the full data the Taskfile fetches loads,
// with about the ranges Debian's package is known to hold, and gives the
// known countries.
func TestShippedDataKnownAddresses(t *testing.T) {
	tb, err := LoadTor(shippedData(t))
	if err != nil {
		t.Fatal(err)
	}
	info := tb.Info()
	t.Logf("%+v", info)
	if info.V4Ranges < 300_000 || info.V6Ranges < 200_000 || info.Countries < 200 || info.Generated.IsZero() {
		t.Errorf("Info() = %+v; want the whole IPFire export (about 385,000 IPv4 and 276,000 IPv6 ranges, ~250 countries, dated)", info)
	}
	for _, k := range known {
		check(t, tb, k.addr, k.cc)
	}
	for _, a := range nowhere {
		check(t, tb, a, "")
	}
}

func TestLookupEdges(t *testing.T) {
	tb := mustTor(t, `# a comment
0,9,aa
10,19,AA
20,29,??
40,49,uk
4294967040,4294967295,ZZ
::,::ff,JP
::100,::1ff,JP
2001:db8::,2001:db8::ffff,EU
ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,AP
`)
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0", "AA"}, {"0.0.0.19", "AA"}, {"0.0.0.20", ""}, {"0.0.0.29", ""}, {"0.0.0.30", ""},
		{"0.0.0.39", ""}, {"0.0.0.40", "GB"}, {"0.0.0.49", "GB"}, {"0.0.0.50", ""},
		{"255.255.254.255", ""}, {"255.255.255.0", "ZZ"}, {"255.255.255.255", "ZZ"},
		{"::ffff:0.0.0.5", "AA"}, {"::ffff:255.255.255.255", "ZZ"},
		{"::", "JP"}, {"::1ff", "JP"}, {"::200", ""},
		{"2001:db8::", "EU"}, {"2001:db8::ffff", "EU"}, {"2001:db8::1:0", ""}, {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ""},
		{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:feff", ""}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "AP"},
		{"fe80::1%eth0", ""},
	} {
		check(t, tb, c.addr, c.want)
	}
	if _, ok := tb.Lookup(netip.Addr{}); ok {
		t.Error("Lookup(zero Addr) found a country")
	}
	// Adjacent ranges of one country are one entry; gaps and unknown
	// ranges are entries of none: 0 AA, 20 none, 40 GB, 50 none, ZZ.
	if len(tb.v4) != 5 {
		t.Errorf("IPv4 boundaries %v, want 5 (adjacent AA merged)", tb.v4)
	}
	if info := tb.Info(); info.V4Ranges != 4 || info.V6Ranges != 4 || info.Unknown != 1 || info.Countries != 6 {
		t.Errorf("Info() = %+v; want 4 IPv4 and 4 IPv6 ranges, 1 unknown, 6 countries (AA GB ZZ JP EU AP)", info)
	}
}

func TestNilTable(t *testing.T) {
	var tb *Table
	if cc, ok := tb.Lookup(netip.MustParseAddr("8.8.8.8")); ok || cc != ([2]byte{}) {
		t.Errorf("nil table Lookup = %q, %v", cc[:], ok)
	}
	if tb.Info() != (Info{}) {
		t.Error("nil table Info not zero")
	}
}

// TestLookupMatchesRanges builds tables of random ranges, in random order,
// and compares every lookup with a scan of the ranges.
func TestLookupMatchesRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	codes := []string{"US", "DE", "??", "JP", "BR"}
	for round := range 50 {
		type r4 struct {
			lo, hi uint32
			cc     string
		}
		var rs []r4
		var text strings.Builder
		x := uint64(rng.IntN(3)) // sometimes a range at 0
		for x <= 1<<32-1 && len(rs) < 200 {
			lo := x
			hi := min(lo+uint64(rng.IntN(1<<26)), 1<<32-1)
			if rng.IntN(50) == 0 {
				hi = 1<<32 - 1 // sometimes a range to the end
			}
			rs = append(rs, r4{uint32(lo), uint32(hi), codes[rng.IntN(len(codes))]})
			x = hi + 1 + uint64(rng.IntN(3)*rng.IntN(1<<24)) // adjacent or a gap
		}
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		for _, r := range rs {
			text.WriteString(num4Dec(r.lo) + "," + num4Dec(r.hi) + "," + r.cc + "\n")
		}
		tb := mustTor(t, text.String())
		probe := func(a uint32) {
			want := ""
			for _, r := range rs {
				if r.lo <= a && a <= r.hi && r.cc != "??" {
					want = r.cc
				}
			}
			check(t, tb, num4(a).String(), want)
		}
		for _, r := range rs {
			probe(r.lo)
			probe(r.hi)
			probe(r.lo - 1)
			probe(r.hi + 1)
		}
		for range 200 {
			probe(rng.Uint32())
		}
		if t.Failed() {
			t.Fatalf("round %d: ranges %v", round, rs)
		}
	}
}

// TestLookupMatchesRanges6 is TestLookupMatchesRanges for IPv6, with
// ranges both wider and narrower than a /64, several starting in one /64.
func TestLookupMatchesRanges6(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	codes := []string{"US", "DE", "??", "JP", "BR"}
	type r6 struct {
		lo, hi u128
		cc     string
	}
	// few distinct top halves, so starts share them
	tops := []uint64{0, 0x2001_0db8_0000_0000, 0x2001_0db8_0000_0001, 0x2001_0db8_0000_0002, 0x2a10_0000_0000_0000, 0x2a10_0000_0000_0005, ^uint64(0)}
	for round := range 100 {
		var rs []r6
		var text strings.Builder
		x := u128{hi: tops[rng.IntN(2)], lo: rng.Uint64N(4)}
		for len(rs) < 60 {
			lo := x
			var hi u128
			switch rng.IntN(3) {
			case 0: // within the /64
				hi = u128{lo.hi, lo.lo + rng.Uint64N(1<<20)}
				if hi.lo < lo.lo {
					hi.lo = ^uint64(0)
				}
			case 1: // to the end of the /64
				hi = u128{lo.hi, ^uint64(0)}
			default: // over several /64s
				hi = u128{lo.hi + rng.Uint64N(3), rng.Uint64()}
				if hi.hi < lo.hi {
					hi = u128{^uint64(0), ^uint64(0)}
				}
				if hi.less(lo) {
					hi = u128{lo.hi, ^uint64(0)}
				}
			}
			rs = append(rs, r6{lo, hi, codes[rng.IntN(len(codes))]})
			next, ok := hi.next()
			if !ok {
				break
			}
			if rng.IntN(3) == 0 { // a gap, maybe to another top half
				if top := tops[rng.IntN(len(tops))]; top > next.hi {
					next = u128{top, rng.Uint64N(1 << 10)}
				} else {
					next.lo += rng.Uint64N(1 << 10)
					if next.lo < rng.Uint64N(1<<10) {
						break
					}
				}
			}
			x = next
		}
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		for _, r := range rs {
			text.WriteString(r.lo.addr().String() + "," + r.hi.addr().String() + "," + r.cc + "\n")
		}
		tb := mustTor(t, text.String())
		probe := func(a u128) {
			want := ""
			for _, r := range rs {
				if !a.less(r.lo) && !r.hi.less(a) && r.cc != "??" {
					want = r.cc
				}
			}
			check(t, tb, a.addr().String(), want)
		}
		for _, r := range rs {
			probe(r.lo)
			probe(r.hi)
			probe(u128{r.lo.hi, r.lo.lo - 1})
			if n, ok := r.hi.next(); ok {
				probe(n)
			}
			probe(u128{r.lo.hi, rng.Uint64()})
		}
		for range 100 {
			probe(u128{tops[rng.IntN(len(tops))], rng.Uint64()})
		}
		if t.Failed() {
			t.Fatalf("round %d: ranges %v", round, rs)
		}
	}
}

func num4Dec(x uint32) string { return strconv.FormatUint(uint64(x), 10) }

// TestLookupAllocatesNothing: the click publisher calls Lookup per click.
func TestLookupAllocatesNothing(t *testing.T) {
	tb, err := LoadTor("testdata")
	if err != nil {
		t.Fatal(err)
	}
	addrs := []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2001:4860:4860::8888"),
		netip.MustParseAddr("::ffff:1.1.1.1"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fe80::1%eth0"), {}}
	var sink byte
	for _, a := range addrs {
		if n := testing.AllocsPerRun(1000, func() {
			cc, _ := tb.Lookup(a)
			sink += cc[0]
		}); n != 0 {
			t.Errorf("Lookup(%v) allocates %v times", a, n)
		}
	}
	_ = sink
}

// TestConcurrentLookups: one table, many goroutines (run under -race).
func TestConcurrentLookups(t *testing.T) {
	tb, err := LoadTor("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := known[(g+i)%len(known)]
				if cc, ok := tb.Lookup(netip.MustParseAddr(k.addr)); !ok || string(cc[:]) != k.cc {
					errs <- k.addr + " gave " + string(cc[:])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestLoadTorDirectoryNeedsBothFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "geoip"), []byte("16777216,16777471,AU\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTor(dir); err == nil || !strings.Contains(err.Error(), "geoip6") {
		t.Fatalf("LoadTor(dir without geoip6) = %v; want an error naming geoip6", err)
	}
	// The IPv4 file alone, named, is enough.
	tb, err := LoadTor(filepath.Join(dir, "geoip"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, tb, "1.0.0.1", "AU")
	if _, err := LoadTor(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("LoadTor(missing) = %v; want an error naming the file", err)
	}
	if _, err := LoadTor(); err == nil {
		t.Fatal("LoadTor() with no path: no error")
	}
}
