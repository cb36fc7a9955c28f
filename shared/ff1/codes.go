package ff1

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/edgelink/edgelink/shared/base62"
)

// half is 62^3: a code is two base62 halves of three characters each. Because
// 62^6 = (62^3)^2, FF1 at radix 62 and length 6 permutes exactly the integers
// [0, 62^6), so an ID maps to a code with no cycle walking.
const half = 62 * 62 * 62

var (
	// ErrOutOfRange is returned by Encode for an ID outside [1, 62^6 − 1].
	ErrOutOfRange = errors.New("ff1: id out of range")
	// ErrSentinel is returned by ID for the one code that names ID 0.
	ErrSentinel = errors.New("ff1: code names the reserved id 0")
	// ErrDomain is returned by NewCodes for a domain that is not a canonical
	// host name.
	ErrDomain = errors.New("ff1: domain must be a lower-case ASCII host name")
)

// Codes is the keyed permutation that turns a domain's link IDs into its
// generated 6-character codes and back: FF1 with radix 62, length 6 and the
// domain as the tweak, over the digits of shared/base62 (numeral j is
// base62.Alphabet[j]). Consecutive IDs give unrelated codes; distinct IDs give
// distinct codes, so generated codes need no collision retry.
//
// ID 0 stays the sentinel it is in shared/base62: Encode refuses it and the
// one code that decrypts to it does not Decode. Every other ID in
// [1, 62^6 − 1] has exactly one code, and every other well-formed
// 6-character string decodes to exactly one ID.
//
// A Codes is safe for concurrent use and must not be copied. Decode does not
// allocate, so the edge can decode a miss on its request path.
type Codes struct {
	block  cipher.Block
	domain string
	// last is the CBC-MAC state of P || Q up to Q's final block, already
	// XORed with the constant bytes of that block. Only the round number and
	// the three bytes of NUM(B) vary per round, and they sit in its last four
	// bytes, so each round costs one AES block instead of 2 + len(domain)/16.
	last [aes.BlockSize]byte
	// scratch holds the block each Encrypt call writes: a stack buffer would
	// escape through the cipher.Block interface and cost an allocation.
	scratch sync.Pool
}

// NewCodes returns the code permutation of domain under key (16, 24 or 32
// bytes). domain must be the canonical host the edge derives from Host:
// lower-case ASCII letters, digits, '-' and '.', IDN in punycode, no port, no
// trailing dot, at most 253 bytes. It is the FF1 tweak, so one byte of
// difference is a different permutation; refusing other spellings keeps
// control and the edges from disagreeing about which ID a code names.
func NewCodes(key []byte, domain string) (*Codes, error) {
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	if err := checkDomain(domain); err != nil {
		return nil, err
	}
	c := &Codes{block: block, domain: domain}
	c.scratch.New = func() any { return new([aes.BlockSize]byte) }

	// Q = T || 0^pad || [i] || [NUM(B)]^3 with b = 3 (62^3 − 1 needs 18 bits)
	// and pad chosen so that Q fills whole blocks.
	t := len(domain)
	pad := mod(-t-3-1, aes.BlockSize)
	q := make([]byte, t+pad+4)
	copy(q, domain)
	p := headerBlock(62, 3, 6, t)
	var state [aes.BlockSize]byte
	block.Encrypt(state[:], p[:])
	final := len(q) - aes.BlockSize
	for off := 0; off < final; off += aes.BlockSize {
		for j := range state {
			state[j] ^= q[off+j]
		}
		block.Encrypt(state[:], state[:])
	}
	for j := range state {
		c.last[j] = state[j] ^ q[final+j]
	}
	return c, nil
}

func checkDomain(domain string) error {
	if domain == "" || len(domain) > 253 {
		return fmt.Errorf("%w: length %d not in [1, 253]", ErrDomain, len(domain))
	}
	if domain[0] == '.' || domain[len(domain)-1] == '.' {
		return fmt.Errorf("%w: leading or trailing dot", ErrDomain)
	}
	for i := 0; i < len(domain); i++ {
		switch c := domain[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.':
		default:
			return fmt.Errorf("%w: byte %q at position %d", ErrDomain, c, i)
		}
	}
	return nil
}

// Domain returns the domain the permutation is keyed to (the FF1 tweak).
func (c *Codes) Domain() string { return c.domain }

// Encode returns the code of id, which must be in [1, 62^6 − 1].
func (c *Codes) Encode(id uint64) ([base62.Length]byte, error) {
	var code [base62.Length]byte
	if id < base62.MinID || id > base62.MaxID {
		return code, fmt.Errorf("%w: %d not in [%d, %d]", ErrOutOfRange, id, base62.MinID, base62.MaxID)
	}
	buf := c.scratch.Get().(*[aes.BlockSize]byte)
	a, b := uint32(id/half), uint32(id%half)
	for i := byte(0); i < rounds; i++ {
		a, b = b, uint32((uint64(a)+c.round(buf, i, b))%half)
	}
	c.scratch.Put(buf)
	put(code[:3], a)
	put(code[3:], b)
	return code, nil
}

// Decode returns the ID whose code is code. ok is false when code is not six
// base62 characters or names the sentinel ID 0: such a string is not a
// generated code of this domain. Decode does not allocate.
func (c *Codes) Decode(code []byte) (id uint64, ok bool) {
	if len(code) != base62.Length {
		return 0, false
	}
	a, okA := get(code[:3])
	b, okB := get(code[3:])
	if !okA || !okB {
		return 0, false
	}
	buf := c.scratch.Get().(*[aes.BlockSize]byte)
	for i := byte(rounds); i > 0; i-- {
		y := c.round(buf, i-1, a)
		a, b = uint32((uint64(b)+half-y)%half), a
	}
	c.scratch.Put(buf)
	id = uint64(a)*half + uint64(b)
	return id, id != 0
}

// ID is Decode for callers off the hot path that must say why a string is
// not a generated code: its error wraps base62.ErrLength, base62.ErrAlphabet
// or ErrSentinel.
func (c *Codes) ID(code string) (uint64, error) {
	if _, err := base62.Digits(code); err != nil {
		return 0, fmt.Errorf("ff1: decode code: %w", err)
	}
	id, ok := c.Decode([]byte(code))
	if !ok {
		return 0, ErrSentinel
	}
	return id, nil
}

// round is the FF1 round function for round i on half x, reduced mod 62^3:
// the first d = 8 bytes of R = PRF(P || Q) read as an integer. One AES block
// suffices because d ≤ 16.
func (c *Codes) round(buf *[aes.BlockSize]byte, i byte, x uint32) uint64 {
	*buf = c.last
	buf[12] ^= i
	buf[13] ^= byte(x >> 16)
	buf[14] ^= byte(x >> 8)
	buf[15] ^= byte(x)
	c.block.Encrypt(buf[:], buf[:])
	return binary.BigEndian.Uint64(buf[:8]) % half
}

// put writes v < 62^3 as three base62 characters.
func put(dst []byte, v uint32) {
	dst[2] = base62.Alphabet[v%62]
	v /= 62
	dst[1] = base62.Alphabet[v%62]
	dst[0] = base62.Alphabet[v/62]
}

// get reads three base62 characters.
func get(src []byte) (uint32, bool) {
	var v uint32
	for _, ch := range src[:3] {
		d, ok := digit(ch)
		if !ok {
			return 0, false
		}
		v = v*62 + d
	}
	return v, true
}

// digit is the value of ch in base62.Alphabet (0-9, A-Z, a-z).
func digit(ch byte) (uint32, bool) {
	switch {
	case '0' <= ch && ch <= '9':
		return uint32(ch - '0'), true
	case 'A' <= ch && ch <= 'Z':
		return uint32(ch-'A') + 10, true
	case 'a' <= ch && ch <= 'z':
		return uint32(ch-'a') + 36, true
	}
	return 0, false
}

// String shows the domain only.
func (c *Codes) String() string { return fmt.Sprintf("ff1.Codes{domain: %q}", c.domain) }

// GoString keeps %#v from printing the round keys.
func (c *Codes) GoString() string { return c.String() }

// Format makes every fmt verb print String, so no verb reaches the fields.
func (c *Codes) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, c.String()) }
