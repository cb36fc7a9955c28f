package store

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/link"
)

// Hint is the bloom filter of live codes, per domain: at the snapshot's
// version (the base, each domain's filter read from the snapshot's bloom
// sections), extended by every (domain, code) the stream brings (a second
// filter, over all domains, the domain hashed in). "No" is certain, "yes"
// may be a false positive. The base is never mutated, so it is read without
// a lock and swapped whole; bloom's Test is not safe with a concurrent Add,
// so the stream's filter is guarded. It is consulted only on misses, never
// on the hit path. Safe for concurrent use.
type Hint struct {
	base     atomic.Pointer[map[link.DomainID]*bloom.BloomFilter]
	mu       sync.RWMutex
	f        *bloom.BloomFilter
	capacity uint
	fp       float64
	// adds counts Add calls since the filter was built: an upper bound of
	// the codes it holds, so Saturated can skip the estimate (a scan of the
	// whole bit set) until it could possibly be over capacity.
	adds atomic.Uint64
}

// NewHint returns an empty hint sized for capacity codes at false-positive
// rate fp. Past capacity it stays correct, only less selective: call Rebuild
// with a larger capacity.
func NewHint(capacity uint, fp float64) *Hint {
	return &Hint{f: bloom.NewWithEstimates(capacity, fp), capacity: capacity, fp: fp}
}

// Add records (d, code) as live.
func (h *Hint) Add(d link.DomainID, code string) {
	var buf [hintKeyRoom]byte
	k := hintKey(&buf, d, codeBytes(code))
	h.mu.Lock()
	h.f.Add(k)
	h.mu.Unlock()
	h.adds.Add(1)
}

// SetBase replaces the snapshot's filters, one per domain; a domain
// without one has no code in the snapshot. The map and its filters must
// not be modified afterwards.
func (h *Hint) SetBase(f map[link.DomainID]*bloom.BloomFilter) { h.base.Store(&f) }

// MayContain reports whether (d, code) may be live; false is certain. It
// does not allocate.
func (h *Hint) MayContain(d link.DomainID, code []byte) bool {
	if m := h.base.Load(); m != nil {
		if b := (*m)[d]; b != nil && b.Test(code) {
			return true
		}
	}
	var buf [hintKeyRoom]byte
	k := hintKey(&buf, d, code)
	h.mu.RLock()
	ok := h.f.Test(k)
	h.mu.RUnlock()
	return ok
}

// hintKeyRoom holds a domain's prefix and any code a link can have without
// a heap allocation.
const hintKeyRoom = 1 + binary.MaxVarintLen32 + 256

// hintKey is (d, code) as the stream's filter holds it: the code alone on
// the platform's domain, else a 0 byte (never in a code), the domain and
// the code. Two keys that collide cost a false positive, never a miss.
func hintKey(buf *[hintKeyRoom]byte, d link.DomainID, code []byte) []byte {
	if d == link.DefaultDomain {
		return code
	}
	b := append(buf[:0], 0)
	b = binary.AppendUvarint(b, uint64(d))
	return append(b, code...)
}

// Saturated reports whether the stream's filter holds more codes (approximately)
// than it was sized for.
func (h *Hint) Saturated() bool {
	if h.adds.Load() <= uint64(h.capacity) {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.f.ApproximatedSize() > uint32(h.capacity)
}

// Rebuild replaces the stream's filter by one sized for capacity holding
// every (domain, code) each yields; the snapshot's filters are left alone.
func (h *Hint) Rebuild(capacity uint, each func(add func(d link.DomainID, code string))) {
	f := bloom.NewWithEstimates(capacity, h.fp)
	var buf [hintKeyRoom]byte
	each(func(d link.DomainID, code string) { f.Add(hintKey(&buf, d, codeBytes(code))) })
	h.mu.Lock()
	h.f, h.capacity = f, capacity
	// Codes added to the old filter during the build are re-added by the
	// caller; counting from the new filter's size keeps the bound an
	// upper one.
	h.adds.Store(uint64(f.ApproximatedSize()))
	h.mu.Unlock()
}
