package visitorsalt

import (
	"encoding/binary"
	"math/bits"
)

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
// short-input PRF", 2012) of pre followed by m, under the 128-bit key
// (k0, k1), the key's bytes read little-endian as in the reference
// implementation. pre's length must be a multiple of 8: taking it apart
// saves copying a client's address and a digest into one buffer per
// click. It does not allocate. The standard library has SipHash only
// inside the runtime, unexported; hash/maphash cannot take a key of our
// own.
func sipHash24(k0, k1 uint64, pre, m []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	// A closure the compiler inlines: measured faster here than a
	// function passing the four words in and out.
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	word := func(w uint64) {
		v3 ^= w
		round()
		round()
		v0 ^= w
	}
	n := len(pre) + len(m)
	for ; len(pre) >= 8; pre = pre[8:] {
		word(binary.LittleEndian.Uint64(pre))
	}
	for ; len(m) >= 8; m = m[8:] {
		word(binary.LittleEndian.Uint64(m))
	}
	// The last word: the remaining bytes, and the length's low byte on top.
	w := uint64(n) << 56
	for i, c := range m {
		w |= uint64(c) << (8 * i)
	}
	word(w)
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
