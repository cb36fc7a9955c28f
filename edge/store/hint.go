package store

import (
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// Hint is the bloom filter of live codes: at the snapshot's version,
// extended by every code the stream brings. "No" is certain, "yes" may be a
// false positive. bloom's Test is not safe with a concurrent Add, so the
// filter is guarded; it is consulted only on overlay misses, never on the
// hit path. Safe for concurrent use.
type Hint struct {
	mu       sync.RWMutex
	f        *bloom.BloomFilter
	capacity uint
	fp       float64
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
}

// MayContain reports whether code may be live; false is certain.
func (h *Hint) MayContain(code []byte) bool {
	h.mu.RLock()
	ok := h.f.Test(code)
	h.mu.RUnlock()
	return ok
}

// Saturated reports whether the filter holds more codes (approximately)
// than it was sized for.
func (h *Hint) Saturated() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.f.ApproximatedSize() > uint32(h.capacity)
}

// Rebuild replaces the filter by one sized for capacity holding every code
// each yields; the snapshot loader will use it with the snapshot's filter.
func (h *Hint) Rebuild(capacity uint, each func(add func(code string))) {
	f := bloom.NewWithEstimates(capacity, h.fp)
	each(func(code string) { f.AddString(code) })
	h.mu.Lock()
	h.f, h.capacity = f, capacity
	h.mu.Unlock()
}
