package resolve

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/edgelink/edgelink/shared/link"
)

// learned is a small bloom filter of the links, (domain, code), the
// authority answered "found" for. It decides whether a miss on a code that could be recent is
// worth a long-tail cache lookup at all: for such a code a cached negative
// is never trusted, so only a cached positive could answer, and every
// positive was added here first.
//
// It exists for cost, not correctness: a cache lookup records the access in
// ristretto's admission sketch (tens of megabytes, a few cache misses),
// which a scan of random codes would otherwise pay on every request.
// Forgetting a code (the filter is cleared when full) only sends its next
// miss to the authority again. Lock-free, unlike bloom/v3 (whose Test may
// not run beside an Add), since every scanned code reads it; safe for
// concurrent use.
type learned struct {
	seed maphash.Seed
	bits atomic.Pointer[[learnedWords]atomic.Uint64]
	adds atomic.Uint64
}

const (
	// 2^20 bits (128 KiB, cache-resident) with 4 probes: about 1% false
	// positives at learnedCap codes, past which the filter starts over.
	learnedWords  = 1 << 14
	learnedProbes = 4
	learnedCap    = 100_000
)

func newLearned() *learned {
	l := &learned{seed: maphash.MakeSeed()}
	l.bits.Store(new([learnedWords]atomic.Uint64))
	return l
}

func (l *learned) add(d link.DomainID, code []byte) {
	if l.adds.Add(1)%learnedCap == 0 {
		l.bits.Store(new([learnedWords]atomic.Uint64))
	}
	b := l.bits.Load()
	h1, h2 := l.hashes(d, code)
	for i := range uint64(learnedProbes) {
		bit := (h1 + i*h2) % (learnedWords * 64)
		b[bit/64].Or(1 << (bit % 64))
	}
}

func (l *learned) mayContain(d link.DomainID, code []byte) bool {
	b := l.bits.Load()
	h1, h2 := l.hashes(d, code)
	for i := range uint64(learnedProbes) {
		bit := (h1 + i*h2) % (learnedWords * 64)
		if b[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// hashes derives the probe sequence from one 64-bit hash of (d, code)
// (Kirsch and Mitzenmacher); the second hash is odd so the probes never
// repeat. The domain is folded into the code's seeded hash and mixed
// (SplitMix64's finalizer), so one code on two domains probes unrelated
// bits.
func (l *learned) hashes(d link.DomainID, code []byte) (uint64, uint64) {
	h := maphash.Bytes(l.seed, code)
	if d != link.DefaultDomain {
		h ^= uint64(d) * 0x9e3779b97f4a7c15
		h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
		h = (h ^ h>>27) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h, (h>>32 | h<<32) | 1
}
