package clickpub

import "sync"

var benchMu sync.Mutex

// drainForBench frees every published slot without encoding, so a
// benchmark measures Record alone.
func (r *Recorder) drainForBench(seen *uint64) {
	benchMu.Lock()
	defer benchMu.Unlock()
	for r.ring[r.head&r.mask].seq.Load() == r.head+1 {
		r.ring[r.head&r.mask].seq.Store(r.head + r.mask + 1)
		r.head++
	}
	*seen = r.head
}
