// Package passhash is the password hash of password-protected links:
// argon2id (RFC 9106, golang.org/x/crypto/argon2) in the PHC string format,
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>
//
// salt and key in standard base64 without padding. Each hash carries its
// parameters and salt, so the parameters can change later: hashes made
// before keep verifying with their own.
//
// Control hashes a password once, when a creator sets it; every edge
// verifies it on each attempt, from memory (the hash reaches edges in
// change events and snapshots as part of a link's extras, shared/link).
// So the cost is paid by edges, per attempt: Default is memory-hard but
// bounded (19 MiB, and 80 ms of one core per attempt on the shared 2-core
// test machine: BenchmarkVerifyDefault), and
// Parse refuses a hash whose parameters leave Bounds, so no value an edge
// reads can make it spend more. Attempts themselves are limited by the
// edge per client and per link.
package passhash

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/edgelink/edgelink/shared/link"
)

// Params are argon2id's cost parameters.
type Params struct {
	// Memory is in KiB.
	Memory uint32
	// Time is the number of passes over the memory.
	Time uint32
	// Threads is the parallelism (lanes).
	Threads uint8
}

// Default is OWASP's first argon2id setting (Password Storage Cheat
// Sheet): 19 MiB, two passes, one lane. One lane because an edge runs
// many requests at once: parallel lanes would only let one attempt take
// more of its cores. Memory-hard enough that guessing on GPUs costs what
// it should, small enough that an edge verifying a few attempts at once
// holds a few tens of MiB for them.
var Default = Params{Memory: 19 * 1024, Time: 2, Threads: 1}

// Bounds on what a hash may ask of its verifier. A hash outside them is
// refused by Parse and never computed: an edge must not be made to spend
// a gigabyte or a second on one attempt by a corrupt or hostile value.
const (
	MinMemory  = 7 * 1024  // KiB: OWASP's lowest setting (7 MiB at t=5)
	MaxMemory  = 64 * 1024 // KiB
	MinTime    = 1
	MaxTime    = 10
	MaxThreads = 4
	SaltLen    = 16 // bytes Hash makes
	KeyLen     = 32 // bytes Hash makes
	minSalt    = 8
	maxSalt    = 64
	minKey     = 16
	maxKey     = 64
)

// Password bounds, the same for control (which refuses others when a
// creator sets a password) and edges (whose form takes no longer input).
const (
	MinPasswordLen = 6   // characters
	MaxPasswordLen = 128 // bytes
)

// CheckPassword refuses a password a link cannot have: fewer than
// MinPasswordLen characters, more than MaxPasswordLen bytes, invalid
// UTF-8 or a control character (which no one can type into the edge's
// form). The error wraps link.ErrInvalidInput and never holds the
// password.
func CheckPassword(p string) error {
	if len(p) > MaxPasswordLen {
		return fmt.Errorf("%w: a password is at most %d bytes, not %d", link.ErrInvalidInput, MaxPasswordLen, len(p))
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: a password must be valid UTF-8", link.ErrInvalidInput)
	}
	n := 0
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("%w: a password holds a control character (%U), which the password form cannot take", link.ErrInvalidInput, r)
		}
		n++
	}
	if n < MinPasswordLen {
		return fmt.Errorf("%w: a password is at least %d characters, not %d", link.ErrInvalidInput, MinPasswordLen, n)
	}
	return nil
}

func (p Params) check() error {
	if p.Memory < MinMemory || p.Memory > MaxMemory || p.Time < MinTime || p.Time > MaxTime || p.Threads < 1 || p.Threads > MaxThreads ||
		p.Memory < 8*uint32(p.Threads) {
		return fmt.Errorf("passhash: parameters m=%d,t=%d,p=%d out of bounds", p.Memory, p.Time, p.Threads)
	}
	return nil
}

// Hash returns password's hash with p's parameters and a fresh salt read
// from random (nil: crypto/rand). It takes p.Memory KiB while it runs.
func Hash(password []byte, p Params, random io.Reader) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	if random == nil {
		random = rand.Reader
	}
	salt := make([]byte, SaltLen)
	if _, err := io.ReadFull(random, salt); err != nil {
		return "", fmt.Errorf("passhash: salt: %w", err)
	}
	key := argon2.IDKey(password, salt, p.Time, p.Memory, p.Threads, KeyLen)
	return encode(p, salt, key), nil
}

func encode(p Params, salt, key []byte) string {
	b := make([]byte, 0, 40+base64.RawStdEncoding.EncodedLen(len(salt))+base64.RawStdEncoding.EncodedLen(len(key)))
	b = append(b, "$argon2id$v=19$m="...)
	b = strconv.AppendUint(b, uint64(p.Memory), 10)
	b = append(b, ",t="...)
	b = strconv.AppendUint(b, uint64(p.Time), 10)
	b = append(b, ",p="...)
	b = strconv.AppendUint(b, uint64(p.Threads), 10)
	b = append(b, '$')
	b = base64.RawStdEncoding.AppendEncode(b, salt)
	b = append(b, '$')
	b = base64.RawStdEncoding.AppendEncode(b, key)
	return string(b)
}

// Hashed is a parsed hash.
type Hashed struct {
	Params
	Salt, Key []byte
}

// ErrMalformed wraps every reason Parse refuses a hash.
var ErrMalformed = errors.New("passhash: not an argon2id hash this reader takes")

// Parse reads a hash in the PHC string format: argon2id, version 19,
// parameters m, t and p in that order as decimal numbers without leading
// zeros and within Bounds, a salt of 8 to 64 bytes and a key of 16 to 64,
// each in standard base64 without padding. Anything else wraps
// ErrMalformed.
func Parse[S ~string | ~[]byte](encoded S) (Hashed, error) {
	var h Hashed
	s := string(encoded)
	if len(s) > link.MaxPasswordHash {
		return h, fmt.Errorf("%w: %d bytes", ErrMalformed, len(s))
	}
	rest, ok := cut(s, "$argon2id$v=19$m=")
	if !ok {
		return h, fmt.Errorf("%w: not $argon2id$v=19$", ErrMalformed)
	}
	var m, t, p uint64
	if m, rest, ok = number(rest, ",t="); ok {
		if t, rest, ok = number(rest, ",p="); ok {
			p, rest, ok = number(rest, "$")
		}
	}
	if !ok || m > MaxMemory || t > MaxTime || p > MaxThreads {
		return h, fmt.Errorf("%w: parameters", ErrMalformed)
	}
	h.Params = Params{Memory: uint32(m), Time: uint32(t), Threads: uint8(p)}
	if err := h.Params.check(); err != nil {
		return h, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	i := indexByte(rest, '$')
	if i < 0 {
		return h, fmt.Errorf("%w: no key", ErrMalformed)
	}
	var err error
	if h.Salt, err = base64.RawStdEncoding.Strict().DecodeString(rest[:i]); err != nil || len(h.Salt) < minSalt || len(h.Salt) > maxSalt {
		return h, fmt.Errorf("%w: salt", ErrMalformed)
	}
	if h.Key, err = base64.RawStdEncoding.Strict().DecodeString(rest[i+1:]); err != nil || len(h.Key) < minKey || len(h.Key) > maxKey {
		return h, fmt.Errorf("%w: key", ErrMalformed)
	}
	return h, nil
}

// Verify reports whether password is the one encoded was made from,
// comparing in constant time. A hash Parse refuses is an error (and no
// work is done for it): a link whose hash cannot be read must not
// redirect. It takes the hash's Memory while it runs.
func Verify[S ~string | ~[]byte](encoded S, password []byte) (bool, error) {
	h, err := Parse(encoded)
	if err != nil {
		return false, err
	}
	return h.verify(password), nil
}

func (h *Hashed) verify(password []byte) bool {
	key := argon2.IDKey(password, h.Salt, h.Time, h.Memory, h.Threads, uint32(len(h.Key)))
	return subtle.ConstantTimeCompare(key, h.Key) == 1
}

func cut(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return s, false
	}
	return s[len(prefix):], true
}

// number reads a decimal number without leading zeros (at most 10 digits)
// followed by sep.
func number(s, sep string) (uint64, string, bool) {
	i := 0
	for i < len(s) && i < 11 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 10 || (s[0] == '0' && i > 1) {
		return 0, s, false
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, s, false
	}
	rest, ok := cut(s[i:], sep)
	return n, rest, ok
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
