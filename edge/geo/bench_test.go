package geo

import (
	"math/rand/v2"
	"net/netip"
	"sort"
	"testing"
)

// Lookup on the full IPFire data (go tool task geoip), at addresses spread
// over its ranges as clicks would be, beside two baselines: sort.Search
// over the ranges as read (a first version anyone would write) and a Go map
// holding exactly the addresses asked (an ideal cache, and no answer for
// any other address).
//
//	go test -run '^$' -bench . -benchmem ./edge/geo

// benchAddrs are n addresses inside randomly chosen ranges of t's family.
func benchAddrs(t *Table, v6 bool, n int) []netip.Addr {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]netip.Addr, 0, n)
	for len(out) < n {
		if v6 {
			i := rng.IntN(len(t.v6hi) - 1)
			if t.v6cc[i] == 0 {
				continue
			}
			a := u128{t.v6hi[i], t.v6lo[i]}
			a.lo += rng.Uint64N(1 << 16) // inside any range of /112 or wider
			out = append(out, a.addr())
		} else {
			i := rng.IntN(len(t.v4) - 1)
			if t.v4cc[i] == 0 {
				continue
			}
			out = append(out, num4(t.v4[i]+uint32(rng.Uint64N(uint64(t.v4[i+1]-t.v4[i])))))
		}
	}
	return out
}

func BenchmarkLookup(b *testing.B) {
	tb, err := LoadTor(shippedData(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"v4", false}, {"v6", true}} {
		addrs := benchAddrs(tb, fam.v6, 1<<12)
		b.Run(fam.name+"/table", func(b *testing.B) {
			b.ReportAllocs()
			var hits int
			i := 0
			for b.Loop() {
				if _, ok := tb.Lookup(addrs[i&(len(addrs)-1)]); ok {
					hits++
				}
				i++
			}
			if hits != i {
				b.Fatalf("%d of %d found", hits, i)
			}
		})

		// The ranges as a sorted slice of structs and sort.Search.
		type span struct {
			lo, hi netip.Addr
			cc     [2]byte
		}
		var spans []span
		if fam.v6 {
			for i := range len(tb.v6hi) - 1 {
				if tb.v6cc[i] != 0 {
					lo, next := u128{tb.v6hi[i], tb.v6lo[i]}, u128{tb.v6hi[i+1], tb.v6lo[i+1]}
					spans = append(spans, span{lo.addr(), next.prev().addr(), tb.codes[tb.v6cc[i]]})
				}
			}
		} else {
			for i := range len(tb.v4) - 1 {
				if tb.v4cc[i] != 0 {
					spans = append(spans, span{num4(tb.v4[i]), num4(tb.v4[i+1] - 1), tb.codes[tb.v4cc[i]]})
				}
			}
		}
		b.Run(fam.name+"/sort.Search", func(b *testing.B) {
			b.ReportAllocs()
			var hits int
			i := 0
			for b.Loop() {
				a := addrs[i&(len(addrs)-1)]
				j := sort.Search(len(spans), func(j int) bool { return a.Less(spans[j].lo) }) - 1
				if j >= 0 && !spans[j].hi.Less(a) {
					hits++
				}
				i++
			}
			if hits != i {
				b.Fatalf("%d of %d found", hits, i)
			}
		})

		m := make(map[netip.Addr][2]byte, len(addrs))
		for _, a := range addrs {
			m[a], _ = tb.Lookup(a)
		}
		b.Run(fam.name+"/map", func(b *testing.B) {
			b.ReportAllocs()
			var hits int
			i := 0
			for b.Loop() {
				if _, ok := m[addrs[i&(len(addrs)-1)]]; ok {
					hits++
				}
				i++
			}
			if hits != i {
				b.Fatalf("%d of %d found", hits, i)
			}
		})
	}
}

func BenchmarkLoadTor(b *testing.B) {
	dir := shippedData(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadTor(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// prev is a-1 (wrapping at 0).
func (a u128) prev() u128 {
	if a.lo != 0 {
		return u128{a.hi, a.lo - 1}
	}
	return u128{a.hi - 1, ^uint64(0)}
}
