// Package base62 converts link IDs to and from their 6-character codes.
//
// The alphabet is fixed as 0-9, A-Z, a-z in that order, codes always have
// exactly six characters (leading zeros kept), and codes compare byte-wise:
// "00000A" and "00000a" are different codes. ID 0 is the sentinel and is never
// encoded; usable IDs are [MinID, MaxID].
package base62

import (
	"errors"
	"fmt"
)

const (
	// Alphabet is the digit order; changing it would change every code issued.
	Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	// Length is the number of characters in every generated code.
	Length = 6
	// Space is the number of distinct 6-character codes, 62^6.
	Space uint64 = 62 * 62 * 62 * 62 * 62 * 62
	// MinID is the smallest usable ID; 0 is reserved as a sentinel.
	MinID uint64 = 1
	// MaxID is the largest usable ID, 62^6 − 1.
	MaxID = Space - 1
)

var (
	// ErrOutOfRange is returned for an ID outside [MinID, MaxID].
	ErrOutOfRange = errors.New("base62: id out of range")
	// ErrLength is returned for a code that is not exactly Length characters.
	ErrLength = errors.New("base62: code must be 6 characters")
	// ErrAlphabet is returned for a code with a character outside Alphabet.
	ErrAlphabet = errors.New("base62: code has a character outside 0-9A-Za-z")
	// ErrSentinel is returned when a code decodes to the reserved ID 0.
	ErrSentinel = errors.New("base62: code 000000 is the reserved sentinel")
)

// decodeTable maps a byte to its digit value plus one; zero marks a byte that
// is not in the alphabet, so the table needs no separate validity bitmap.
var decodeTable = func() (t [256]uint8) {
	for i := 0; i < len(Alphabet); i++ {
		t[Alphabet[i]] = uint8(i + 1)
	}
	return t
}()

// Encode returns the 6-character code for id.
func Encode(id uint64) (string, error) {
	var buf [Length]byte
	if err := Put(buf[:], id); err != nil {
		return "", err
	}
	return string(buf[:]), nil
}

// Put writes the code for id into dst, which must hold at least Length bytes.
// It does not allocate.
func Put(dst []byte, id uint64) error {
	if id < MinID || id > MaxID {
		return fmt.Errorf("%w: %d not in [%d, %d]", ErrOutOfRange, id, MinID, MaxID)
	}
	_ = dst[Length-1]
	for i := Length - 1; i >= 0; i-- {
		dst[i] = Alphabet[id%62]
		id /= 62
	}
	return nil
}

// Decode returns the ID of a 6-character code.
func Decode(code string) (uint64, error) {
	v, err := Digits(code)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		return 0, ErrSentinel
	}
	return v, nil
}

// Digits reads any 6-character base62 string as a number in [0, Space),
// including the sentinel "000000". Callers that work on the whole code space
// (such as a bijection over it) need this; everyone else wants Decode.
func Digits[S ~string | ~[]byte](code S) (uint64, error) {
	if len(code) != Length {
		return 0, ErrLength
	}
	var v uint64
	for i := 0; i < Length; i++ {
		d := decodeTable[code[i]]
		if d == 0 {
			return 0, fmt.Errorf("%w: %q at position %d", ErrAlphabet, code[i], i)
		}
		v = v*62 + uint64(d-1)
	}
	return v, nil
}

// Valid reports whether code is a well-formed 6-character code of a usable ID.
// It does not allocate, so the edge can call it before any lookup.
func Valid[S ~string | ~[]byte](code S) bool {
	if len(code) != Length {
		return false
	}
	zero := true
	for i := 0; i < Length; i++ {
		c := code[i]
		if decodeTable[c] == 0 {
			return false
		}
		if c != '0' {
			zero = false
		}
	}
	return !zero
}
