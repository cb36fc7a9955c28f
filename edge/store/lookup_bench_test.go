package store

import (
	"strconv"
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// benchOverlay holds n generated codes with the benchmark suite's targets.
func benchOverlay(b *testing.B, n int) (*Overlay, [][]byte) {
	o := NewOverlay()
	codes := make([][]byte, n)
	for i := range codes {
		c, err := base62.Encode(uint64(i + 1))
		if err != nil {
			b.Fatal(err)
		}
		codes[i] = []byte(c)
		o.Apply(&Entry{Code: c, URL: "https://example.com/landing?utm_source=bench&n=" + strconv.Itoa(i),
			RedirectType: 302, Status: link.Active, Version: uint64(i + 1)})
	}
	return o, codes
}

// One code over and over (the hot link of a campaign), and codes spread
// over a million (a Zipf mix's tail misses the caches).
func BenchmarkOverlayLookup(b *testing.B) {
	for _, n := range []int{1, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			o, codes := benchOverlay(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, ok := o.Lookup(link.DefaultDomain, codes[i%n]); !ok {
					b.Fatal("miss")
				}
				i += 7919
			}
		})
	}
}
