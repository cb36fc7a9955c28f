package snapshot

import "math/bits"

// mix is the splitmix64 finalizer: a bijection of uint64 that spreads IDs
// allocated in runs uniformly over a table. A table's rows are sorted by it.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// unmix inverts mix: the writer keeps only mix(ID) per row and gets the ID
// back when it writes the row.
func unmix(x uint64) uint64 {
	x ^= x>>31 ^ x>>62
	x *= 0x319642b2d24d8ec3 // the inverse of 0x94d049bb133111eb modulo 2^64
	x ^= x>>27 ^ x>>54
	x *= 0x96de1b173f119089 // the inverse of 0xbf58476d1ce4e5b9
	x ^= x>>30 ^ x>>60
	return x
}

// codeHash is a custom code's table hash: FNV-1a, then mix for its high
// bits, which home takes.
func codeHash[S ~string | ~[]byte](code S) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(code); i++ {
		h ^= uint64(code[i])
		h *= 1099511628211
	}
	return mix(h)
}

// home is the first row a key with hash m may occupy in a table of homes
// home rows: monotone in m, so rows sorted by hash are sorted by home.
func home(m, homes uint64) uint64 {
	hi, _ := bits.Mul64(m, homes)
	return hi
}

// homesFor is how many home rows the writer gives n keys: a load factor of
// 0.8, at which a hit reads three rows (48 bytes) on average.
func homesFor(n int) uint64 {
	if n == 0 {
		return 0
	}
	return uint64(n) + uint64(n)/4 + 1
}
