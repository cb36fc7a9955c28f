//go:build amd64 || arm64

package snapshot

// prefetch asks the CPU to start loading the cache line at p without
// waiting for it: the target bytes of a hit, read only after the handler
// has done its other work, so that their miss overlaps that work instead
// of following it. A hint: it never faults, whatever p points at.
//
//go:noescape
func prefetch(p *byte)
