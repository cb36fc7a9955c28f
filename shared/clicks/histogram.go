package clicks

import (
	"math/bits"
	"time"
)

// Histogram buckets are HDR-style: log-linear over nanoseconds, 16
// sub-buckets per power of two, so any value is within 1/16 (6.25%) of its
// bucket's bounds, from 1 ns to the full uint64 range in a fixed 976
// buckets. Edges count into an array of atomics with the same layout;
// control adds histograms bucket by bucket, which is exact, unlike averaging
// percentiles.
const (
	subBits = 4
	subs    = 1 << subBits
	// Buckets is the number of buckets of a Histogram.
	Buckets = (64-subBits)*subs + subs
)

// Histogram is a count per bucket. The zero value is empty.
type Histogram [Buckets]uint64

// Bucket returns the bucket holding v nanoseconds.
func Bucket(v uint64) int {
	if v < 2*subs {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	return shift*subs + int(v>>shift)
}

// BucketBounds returns the smallest and largest value bucket i holds.
func BucketBounds(i int) (lo, hi uint64) {
	if i < 2*subs {
		return uint64(i), uint64(i)
	}
	shift := i/subs - 1
	top := uint64(i%subs + subs)
	return top << shift, (top+1)<<shift - 1
}

// Add adds o's counts to h.
func (h *Histogram) Add(o *Histogram) {
	for i, c := range o {
		h[i] += c
	}
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the value at quantile q (0 < q ≤ 1) by nearest rank, as
// the upper bound of its bucket: never under-reports a latency. An empty
// histogram answers 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n) + 0.999999999)
	rank = max(1, min(rank, n))
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			_, hi := BucketBounds(i)
			return time.Duration(min(hi, uint64(1<<63-1)))
		}
	}
	return 0
}
