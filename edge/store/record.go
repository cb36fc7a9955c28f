package store

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// A record is one overlay entry in an arena chunk, written once and never
// changed (an update appends a new record and repoints the index):
//
//	byte     meta: status (bits 0–1: 1 active, 2 disabled, 3 deleted),
//	         redirect (bits 2–4: 0 none, 1 301, 2 302, 3 307, 4 308,
//	         7 another value, as a varint after the version; 6 more
//	         flags, in a byte after the version), has an expiry (bit 5),
//	         custom code (bit 6), not the platform's domain (bit 7)
//	uvarint  domain, when bit 7 is set
//	6 base62 characters: uvarint 1 + their value | other code: byte length, the code
//	uvarint  version
//	byte     more flags, when bits 2–4 are 6: the redirect (bits 0–2, as in
//	         meta, never 6), has extras (bit 3); other bits zero
//	varint   redirect type, when the redirect is 7
//	varint   expiry, Unix milliseconds, when bit 5 is set
//	uvarint  origin: 1 + its index in the shard's dictionary, 0 for none
//	uvarint  length, then the rest of the target (all of it without origin)
//	uvarint  length, then the extras (shared/link's wire form), when the
//	         more flags say so
//
// A link with extras (rules, a password, a click limit: rare) pays the
// flags byte and its extras; every other record is as it was before
// extras, byte for byte.
//
// A code of 6 base62 characters (every generated code, sequential or FF1:
// the spelling is stored, not the ID) is its value, so its record holds 3
// to 6 bytes of key; any other code's record holds the code, which a lookup
// compares, since the index keeps only a hash. The key, domain and code,
// comes first: a probe that meets another key's tag reads no further. The
// platform's domain, which holds most links of most edges, costs no byte.
const (
	metaStatus      = 0x03
	metaRedirect    = 0x1c
	metaRedirectRaw = 7
	metaMore        = 6 // the redirect field's value for "more flags follow"
	metaExpiry      = 0x20
	metaCustom      = 0x40
	metaDomain      = 0x80

	moreRedirect = 0x07
	moreExtras   = 0x08
)

// redirectOf is the redirect code of the record at b whose version ends at
// i, and where what follows the flags starts.
func redirectOf(b []byte, i int) (code byte, next int) {
	if rc := b[0] & metaRedirect >> 2; rc != metaMore {
		return rc, i
	}
	return b[i] & moreRedirect, i + 1
}

// extrasFlagged reports whether the record at b, whose version ends at i,
// carries extras.
func extrasFlagged(b []byte, i int) bool {
	return b[0]&metaRedirect>>2 == metaMore && b[i]&moreExtras != 0
}

var redirectCodes = [...]link.RedirectType{0, 301, 302, 307, 308}

func redirectCode(t link.RedirectType) byte {
	for i, c := range redirectCodes {
		if c == t {
			return byte(i)
		}
	}
	return metaRedirectRaw
}

var statuses = [...]link.Status{1: link.Active, 2: link.Disabled, 3: link.Deleted}

func statusCode(s link.Status) (byte, bool) {
	switch s {
	case link.Active:
		return 1, true
	case link.Disabled:
		return 2, true
	case link.Deleted:
		return 3, true
	}
	return 0, false
}

// key is a link's key as the overlay indexes it: its domain, and a code
// of 6 base62 characters by its value (whatever the domain's code mode:
// it is the spelling that is stored, not the ID), any other by its bytes.
type key struct {
	domain link.DomainID
	id     uint64 // 6 base62 characters: their value, from 1; 0 for another code
	custom []byte
}

func keyOf(d link.DomainID, code []byte) key {
	if len(code) != base62.Length {
		return key{domain: d, custom: code}
	}
	var id uint64
	for _, c := range code {
		v := digits[c]
		if v == 0 {
			return key{domain: d, custom: code}
		}
		id = id*62 + uint64(v-1)
	}
	return key{domain: d, id: id + 1} // "000000" is a valid string, if no link's
}

// digits is 1 + a base62 character's value, 0 for other bytes: base62's
// own decoder builds an error for the custom codes a lookup meets.
var digits = func() (t [256]byte) {
	for i := range len(base62.Alphabet) {
		t[base62.Alphabet[i]] = byte(i + 1)
	}
	return t
}()

// recordLen is the bytes e's record takes, with origin index o and rest r.
func recordLen(e *Entry, k key, meta byte, o uint32, rest string) int {
	n := 1 + uvarintLen(e.Version)
	if meta&metaRedirect == metaMore<<2 {
		n++
	}
	if e.Extras != "" {
		n += uvarintLen(uint64(len(e.Extras))) + len(e.Extras)
	}
	if meta&metaDomain != 0 {
		n += uvarintLen(uint64(k.domain))
	}
	if k.custom != nil {
		n += 1 + len(k.custom)
	} else {
		n += uvarintLen(k.id)
	}
	if redirectCode(e.RedirectType) == metaRedirectRaw {
		n += varintLen(int64(e.RedirectType))
	}
	if e.ExpiresAt != 0 {
		n += varintLen(e.ExpiresAt)
	}
	return n + uvarintLen(uint64(o)) + uvarintLen(uint64(len(rest))) + len(rest)
}

// putRecord writes e's record into b, which is recordLen bytes.
func putRecord(b []byte, e *Entry, k key, meta byte, o uint32, rest string) {
	b[0] = meta
	i := 1
	if meta&metaDomain != 0 {
		i += binary.PutUvarint(b[i:], uint64(k.domain))
	}
	if k.custom != nil {
		b[i] = byte(len(k.custom))
		i += 1 + copy(b[i+1:], k.custom)
	} else {
		i += binary.PutUvarint(b[i:], k.id)
	}
	i += binary.PutUvarint(b[i:], e.Version)
	rc := redirectCode(e.RedirectType)
	if meta&metaRedirect == metaMore<<2 {
		b[i] = rc
		if e.Extras != "" {
			b[i] |= moreExtras
		}
		i++
	}
	if rc == metaRedirectRaw {
		i += binary.PutVarint(b[i:], int64(e.RedirectType))
	}
	if e.ExpiresAt != 0 {
		i += binary.PutVarint(b[i:], e.ExpiresAt)
	}
	i += binary.PutUvarint(b[i:], uint64(o))
	i += binary.PutUvarint(b[i:], uint64(len(rest)))
	i += copy(b[i:], rest)
	if e.Extras != "" {
		i += binary.PutUvarint(b[i:], uint64(len(e.Extras)))
		copy(b[i:], e.Extras)
	}
}

// recordKey reads the key of the record at b (b runs to its chunk's end)
// and the offset of what follows it.
func recordKey(b []byte) (k key, next int) {
	i := 1
	if b[0]&metaDomain != 0 {
		d, n := binary.Uvarint(b[1:])
		k.domain, i = link.DomainID(d), 1+n
	}
	if b[0]&metaCustom != 0 {
		n := int(b[i])
		k.custom = b[i+1 : i+1+n : i+1+n]
		return k, i + 1 + n
	}
	id, n := binary.Uvarint(b[i:])
	k.id = id
	return k, i + n
}

// recordVersion is the version of the record at b.
func recordVersion(b []byte) uint64 {
	_, i := recordKey(b)
	v, _ := binary.Uvarint(b[i:])
	return v
}

// recordSize is the bytes the record at b takes.
func recordSize(b []byte) int {
	_, i := recordKey(b)
	_, n := binary.Uvarint(b[i:])
	i += n
	extras := extrasFlagged(b, i)
	i = skipFields(b, i)
	_, n = binary.Uvarint(b[i:])
	i += n
	l, n := binary.Uvarint(b[i:])
	i += n + int(l)
	if extras {
		l, n := binary.Uvarint(b[i:])
		i += n + int(l)
	}
	return i
}

// skipFields is the offset of the origin in the record at b whose version
// ends at i.
func skipFields(b []byte, i int) int {
	rc, i := redirectOf(b, i)
	if rc == metaRedirectRaw {
		_, n := binary.Varint(b[i:])
		i += n
	}
	if b[0]&metaExpiry != 0 {
		_, n := binary.Varint(b[i:])
		i += n
	}
	return i
}

// Record is an overlay entry read in place. Origin and Rest must not be
// modified; they stay valid while the Record is reachable (it keeps the
// arena chunk they point into alive, and chunks are never reused), so copy
// them before dropping it, as AppendURL does.
type Record struct {
	Origin, Rest []byte // the target is Origin followed by Rest
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	Version      uint64
	// Extras are the link's routing rules, password hash and click limit
	// in shared/link's wire form (link.ViewExtras reads them in place);
	// nil for a plain link. Valid as Rest is.
	Extras []byte

	chunk *chunk // keeps Rest's bytes valid
}

// AppendURL appends the record's target to dst.
func (r *Record) AppendURL(dst []byte) []byte {
	dst = append(append(dst, r.Origin...), r.Rest...)
	runtime.KeepAlive(r.chunk)
	return dst
}

// URL is the record's target, copied.
func (r *Record) URL() string { return string(r.AppendURL(nil)) }

// Live reports whether the record redirects at nowMillis.
func (r *Record) Live(nowMillis int64) bool {
	return r.Status == link.Active && (r.ExpiresAt == 0 || nowMillis < r.ExpiresAt)
}

// readRecord decodes the record at b, whose key ends at next, into r, with
// origins as the shard's dictionary.
func readRecord(r *Record, b []byte, next int, origins []string, c *chunk) {
	meta := b[0]
	*r = Record{Status: statuses[meta&metaStatus], chunk: c}
	v, n := binary.Uvarint(b[next:])
	r.Version, next = v, next+n
	extras := extrasFlagged(b, next)
	rc, next := redirectOf(b, next)
	if rc == metaRedirectRaw {
		t, n := binary.Varint(b[next:])
		r.RedirectType, next = link.RedirectType(t), next+n
	} else {
		r.RedirectType = redirectCodes[rc]
	}
	if meta&metaExpiry != 0 {
		x, n := binary.Varint(b[next:])
		r.ExpiresAt, next = x, next+n
	}
	o, n := binary.Uvarint(b[next:])
	i := next + n
	if o != 0 {
		s := origins[o-1]
		r.Origin = unsafe.Slice(unsafe.StringData(s), len(s))
	}
	l, n := binary.Uvarint(b[i:])
	i += n
	r.Rest = b[i : i+int(l) : i+int(l)]
	if extras {
		i += int(l)
		l, n := binary.Uvarint(b[i:])
		i += n
		r.Extras = b[i : i+int(l) : i+int(l)]
	}
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	u := uint64(x) << 1
	if x < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
