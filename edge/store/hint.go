package store

import (
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"
)

// Hint is the bloom filter of live codes: at the snapshot's version (the
// base, read from the snapshot's bloom section), extended by every code the
// stream brings (a second filter). "No" is certain, "yes" may be a false
// positive. The base is never mutated, so it is read without a lock and
// swapped whole; bloom's Test is not safe with a concurrent Add, so the
// stream's filter is guarded. It is consulted only on misses, never on the
// hit path. Safe for concurrent use.
type Hint struct {
	base     atomic.Pointer[bloom.BloomFilter]
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

// Add records code as live.
func (h *Hint) Add(code string) {
	h.mu.Lock()
	h.f.AddString(code)
	h.mu.Unlock()
	h.adds.Add(1)
}

// SetBase replaces the snapshot's filter. f must not be modified
// afterwards.
func (h *Hint) SetBase(f *bloom.BloomFilter) { h.base.Store(f) }

// MayContain reports whether code may be live; false is certain.
func (h *Hint) MayContain(code []byte) bool {
	if b := h.base.Load(); b != nil && b.Test(code) {
		return true
	}
	h.mu.RLock()
	ok := h.f.Test(code)
	h.mu.RUnlock()
	return ok
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
// every code each yields; the snapshot's filter is left alone.
func (h *Hint) Rebuild(capacity uint, each func(add func(code string))) {
	f := bloom.NewWithEstimates(capacity, h.fp)
	each(func(code string) { f.AddString(code) })
	h.mu.Lock()
	h.f, h.capacity = f, capacity
	// Codes added to the old filter during the build are re-added by the
	// caller; counting from the new filter's size keeps the bound an
	// upper one.
	h.adds.Store(uint64(f.ApproximatedSize()))
	h.mu.Unlock()
}
