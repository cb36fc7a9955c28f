// Package ff1 provides FF1, the format-preserving encryption mode of NIST
// SP 800-38G (Rev. 1), built on crypto/aes, and on top of it Codes: the keyed
// permutation of the 6-character base62 code space that makes generated link
// codes non-enumerable while keeping them unique and decodable to their IDs.
//
// Cipher is the general mode: any radix in [2, 2^16], any length the standard
// allows, any tweak. It exists so the construction can be checked against
// NIST's published samples and so Codes, its fast path, can be checked against
// it. Codes is what control and the edge use.
//
// Both types hold expanded AES round keys. Neither keeps the raw key, and
// neither prints key material: String, GoString and every fmt verb show only
// the public parameters, and no error quotes a key, a tweak or an input value.
package ff1

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"math"
	"math/big"
)

const (
	// MinRadix and MaxRadix bound the radix, as SP 800-38G does.
	MinRadix = 2
	MaxRadix = 1 << 16
	// MinDomain is the smallest number of distinct inputs SP 800-38G Rev. 1
	// allows (radix^minlen ≥ 10^6); shorter inputs are refused.
	MinDomain = 1_000_000
	// MaxLen is the longest input the standard's 4-byte length field carries.
	MaxLen = math.MaxUint32
	rounds = 10
)

var (
	// ErrKeySize is returned for a key that is not an AES-128, -192 or -256 key.
	ErrKeySize = errors.New("ff1: key must be 16, 24 or 32 bytes")
	// ErrRadix is returned for a radix outside [MinRadix, MaxRadix].
	ErrRadix = errors.New("ff1: radix must be in [2, 65536]")
	// ErrTweak is returned for a tweak longer than the 4-byte length field.
	ErrTweak = errors.New("ff1: tweak too long")
	// ErrLength is returned for an input shorter than the radix allows or
	// longer than MaxLen.
	ErrLength = errors.New("ff1: input length out of range")
	// ErrNumeral is returned for an input numeral that is not below the radix.
	ErrNumeral = errors.New("ff1: numeral not below the radix")
)

// Cipher is FF1 with one AES key, one tweak and one radix. It is safe for
// concurrent use; its zero value is not usable (build it with New).
type Cipher struct {
	block  cipher.Block
	tweak  []byte
	radix  int
	minLen int
}

// New returns FF1 for key (16, 24 or 32 bytes: AES-128, -192 or -256), tweak
// and radix. It keeps a copy of tweak and only the expanded key.
func New(key, tweak []byte, radix int) (*Cipher, error) {
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if radix < MinRadix || radix > MaxRadix {
		return nil, fmt.Errorf("%w: got %d", ErrRadix, radix)
	}
	if uint64(len(tweak)) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes", ErrTweak, len(tweak))
	}
	return &Cipher{
		block:  block,
		tweak:  append([]byte(nil), tweak...),
		radix:  radix,
		minLen: minLen(radix, MinDomain),
	}, nil
}

// newBlock expands an AES key; its error names the size, never the bytes.
func newBlock(key []byte) (cipher.Block, error) {
	switch len(key) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("%w, got %d", ErrKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("ff1: expand key: %w", err)
	}
	return block, nil
}

// minLen is the smallest length n ≥ 2 with radix^n ≥ domain.
func minLen(radix, domain int) int {
	n, size := 1, radix
	for size < domain {
		n++
		size *= radix
	}
	return max(n, 2)
}

// Radix returns the radix the cipher was built for.
func (c *Cipher) Radix() int { return c.radix }

// MinLen returns the shortest input the cipher accepts: the smallest length at
// which the radix gives the standard's minimum of 10^6 distinct inputs.
func (c *Cipher) MinLen() int { return c.minLen }

// Encrypt returns the FF1 encryption of the numeral string x (each element a
// digit below the radix, most significant first) as a new numeral string of
// the same length. x is not modified.
func (c *Cipher) Encrypt(x []uint16) ([]uint16, error) { return c.crypt(x, false) }

// Decrypt is the inverse of Encrypt.
func (c *Cipher) Decrypt(x []uint16) ([]uint16, error) { return c.crypt(x, true) }

// crypt is Algorithms 7 and 8 of SP 800-38G. A and B are kept as integers:
// each round's modulus radix^m matches the length of the half it replaces,
// so numeral strings are needed only at the ends.
func (c *Cipher) crypt(x []uint16, decrypt bool) ([]uint16, error) {
	n := len(x)
	if n < c.minLen || uint64(n) > MaxLen {
		return nil, fmt.Errorf("%w: %d numerals, radix %d needs %d to %d", ErrLength, n, c.radix, c.minLen, uint64(MaxLen))
	}
	for i, d := range x {
		if int(d) >= c.radix {
			return nil, fmt.Errorf("%w: numeral at position %d, radix %d", ErrNumeral, i, c.radix)
		}
	}
	u := n / 2
	v := n - u
	radix := big.NewInt(int64(c.radix))
	modU := new(big.Int).Exp(radix, big.NewInt(int64(u)), nil)
	modV := modU
	if v != u {
		modV = new(big.Int).Mul(modU, radix)
	}
	b := byteLen(modV)
	d := 4*((b+3)/4) + 4

	p := headerBlock(c.radix, u, n, len(c.tweak))
	t := len(c.tweak)
	pad := mod(-t-b-1, 16)
	q := make([]byte, t+pad+1+b)
	copy(q, c.tweak)

	a, bb := num(x[:u], radix), num(x[u:], radix)
	y := new(big.Int)
	s := make([]byte, ((d+15)/16)*16)
	for k := 0; k < rounds; k++ {
		i := k
		if decrypt {
			i = rounds - 1 - k
		}
		q[t+pad] = byte(i)
		src := bb // the half the round function reads
		if decrypt {
			src = a
		}
		src.FillBytes(q[t+pad+1:])
		c.expand(s, c.prf(&p, q))
		y.SetBytes(s[:d])
		m := modU
		if i%2 == 1 {
			m = modV
		}
		if decrypt {
			// (B − y) mod radix^m; big.Int.Mod is Euclidean, so never negative.
			next := new(big.Int).Sub(bb, y)
			next.Mod(next, m)
			a, bb = next, a
		} else {
			next := new(big.Int).Add(a, y)
			next.Mod(next, m)
			a, bb = bb, next
		}
	}
	out := make([]uint16, n)
	str(out[:u], a, radix)
	str(out[u:], bb, radix)
	return out, nil
}

// headerBlock is P of step 5: the fixed block that starts every PRF input.
func headerBlock(radix, u, n, t int) [aes.BlockSize]byte {
	return [aes.BlockSize]byte{
		1, 2, 1,
		byte(radix >> 16), byte(radix >> 8), byte(radix),
		10,
		byte(u),
		byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n),
		byte(t >> 24), byte(t >> 16), byte(t >> 8), byte(t),
	}
}

// prf is the CBC-MAC of P || Q with a zero IV (step 6.ii).
func (c *Cipher) prf(p *[aes.BlockSize]byte, q []byte) [aes.BlockSize]byte {
	var r [aes.BlockSize]byte
	c.block.Encrypt(r[:], p[:])
	for off := 0; off < len(q); off += aes.BlockSize {
		for j := range r {
			r[j] ^= q[off+j]
		}
		c.block.Encrypt(r[:], r[:])
	}
	return r
}

// expand fills s with R || CIPH(R ⊕ [1]^16) || CIPH(R ⊕ [2]^16) || … (step
// 6.iii); len(s) is a multiple of the block size.
func (c *Cipher) expand(s []byte, r [aes.BlockSize]byte) {
	copy(s, r[:])
	for j := 1; j*aes.BlockSize < len(s); j++ {
		blk := r
		for k := 0; k < 8; k++ {
			blk[aes.BlockSize-1-k] ^= byte(uint64(j) >> (8 * k))
		}
		c.block.Encrypt(s[j*aes.BlockSize:], blk[:])
	}
}

// byteLen is b of step 3: ⌈⌈v·log2(radix)⌉/8⌉, computed exactly as the byte
// length of radix^v − 1 (the bit length of radix^v − 1 is ⌈log2(radix^v)⌉).
func byteLen(radixPowV *big.Int) int {
	bits := new(big.Int).Sub(radixPowV, big.NewInt(1)).BitLen()
	return (bits + 7) / 8
}

func mod(x, m int) int {
	r := x % m
	if r < 0 {
		r += m
	}
	return r
}

// num is NUM_radix: the numeral string read most significant first.
func num(x []uint16, radix *big.Int) *big.Int {
	v := new(big.Int)
	d := new(big.Int)
	for _, digit := range x {
		v.Mul(v, radix)
		v.Add(v, d.SetUint64(uint64(digit)))
	}
	return v
}

// str is STR^m_radix: it writes v into dst as len(dst) numerals, most
// significant first. v must be below radix^len(dst).
func str(dst []uint16, v *big.Int, radix *big.Int) {
	v = new(big.Int).Set(v)
	digit := new(big.Int)
	for i := len(dst) - 1; i >= 0; i-- {
		v.QuoRem(v, radix, digit)
		dst[i] = uint16(digit.Uint64())
	}
}

// String shows the public parameters only.
func (c *Cipher) String() string {
	return fmt.Sprintf("ff1.Cipher{radix: %d, tweak: %d bytes}", c.radix, len(c.tweak))
}

// GoString keeps %#v from printing the round keys.
func (c *Cipher) GoString() string { return c.String() }

// Format makes every fmt verb print String, so no verb reaches the fields.
func (c *Cipher) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, c.String()) }
