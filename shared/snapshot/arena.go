package snapshot

import "io"

// arena holds bytes in chunks of at most 64 MiB, so that neither growing
// it nor holding it needs one allocation the size of all the targets. An
// address is a chunk number and an offset in it; offset gives the byte's
// place once the chunks are written one after the other.
type arena struct {
	chunks [][]byte
	base   []uint64 // each chunk's offset in the written bytes (index)
}

const (
	chunkBits  = 26
	chunkSize  = 1 << chunkBits
	restChunks = maxRestBytes >> chunkBits  // the rest offset's 40 bits
	codeChunks = (keyMask + 1) >> chunkBits // the custom key's 36 bits
	// extraChunks: an extras row's offset has 64 - extraLenBits bits.
	extraChunks = (1 << (64 - extraLenBits)) >> chunkBits
)

// fits reports whether n more bytes fit in an arena of at most max chunks.
func (a *arena) fits(n, maxChunks int) bool {
	k := len(a.chunks)
	return k < maxChunks || (k == maxChunks && len(a.chunks[k-1])+n <= chunkSize)
}

func (a *arena) add(b string) uint64 {
	if k := len(a.chunks); k == 0 || len(a.chunks[k-1])+len(b) > chunkSize {
		a.chunks = append(a.chunks, make([]byte, 0, max(4096, 2*len(b))))
	}
	k := len(a.chunks) - 1
	off := len(a.chunks[k])
	a.chunks[k] = append(a.chunks[k], b...)
	a.base = nil
	return uint64(k)<<chunkBits | uint64(off)
}

// at returns a code's bytes: its length byte and the code.
func (a *arena) at(addr uint64) []byte {
	c, off := a.chunks[addr>>chunkBits], addr&(chunkSize-1)
	return c[off : off+1+uint64(c[off])]
}

func (a *arena) index() {
	a.base = make([]uint64, len(a.chunks))
	var n uint64
	for i, c := range a.chunks {
		a.base[i] = n
		n += uint64(len(c))
	}
}

func (a *arena) offset(addr uint64) uint64 {
	if len(a.chunks) == 0 {
		return 0
	}
	return a.base[addr>>chunkBits] + addr&(chunkSize-1)
}

func (a *arena) writeTo(out io.Writer) error {
	for _, c := range a.chunks {
		if _, err := out.Write(c); err != nil {
			return err
		}
	}
	return nil
}
