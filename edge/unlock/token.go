package unlock

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"

	"github.com/edgelink/edgelink/shared/link"
)

// Tokens: what an unlock cookie and a form's CSRF token hold, base64url
// without padding (TokenLen characters) of
//
//	byte      kind: kindUnlock or kindForm
//	4 bytes   the signing key's id (Keys)
//	8 bytes   expiry, Unix seconds, big-endian
//	32 bytes  HMAC-SHA256 under that key of the kind, the expiry, the
//	          domain, the code and what the token is bound to: the
//	          link's password hash for an unlock cookie (so a new
//	          password refuses every cookie of the old one), the form
//	          cookie's nonce for a form token
//
// Nothing in a token is secret, and nothing names the link's target.
const (
	kindUnlock byte = 1
	kindForm   byte = 2

	rawTokenLen = 1 + 4 + 8 + 32
	// TokenLen is a token's length in characters.
	TokenLen = (rawTokenLen*8 + 5) / 6
)

var b64 = base64.RawURLEncoding

// AppendUnlock appends an unlock cookie's value for code on domain d,
// whose password hash is hash, valid until expires (Unix seconds).
func (k *Keys) AppendUnlock(dst []byte, d link.DomainID, code, hash []byte, expires int64) []byte {
	return k.appendToken(dst, kindUnlock, d, code, hash, expires)
}

// CheckUnlock reports whether value is an unlock cookie this edge's keys
// signed for code on domain d with password hash hash, unexpired at now
// (Unix seconds). It does not allocate.
func (k *Keys) CheckUnlock(value []byte, d link.DomainID, code, hash []byte, now int64) bool {
	return k.checkToken(value, kindUnlock, d, code, hash, now)
}

// AppendFormToken appends a password form's CSRF token for code on domain
// d, bound to the nonce the form's cookie holds, valid until expires.
func (k *Keys) AppendFormToken(dst []byte, d link.DomainID, code, nonce []byte, expires int64) []byte {
	return k.appendToken(dst, kindForm, d, code, nonce, expires)
}

// CheckFormToken reports whether token is a form token for code on domain
// d bound to nonce, unexpired at now. It does not allocate.
func (k *Keys) CheckFormToken(token []byte, d link.DomainID, code, nonce []byte, now int64) bool {
	return k.checkToken(token, kindForm, d, code, nonce, now)
}

func (k *Keys) appendToken(dst []byte, kind byte, d link.DomainID, code, bound []byte, expires int64) []byte {
	kk := k.signing()
	var raw [rawTokenLen]byte
	raw[0] = kind
	binary.BigEndian.PutUint32(raw[1:5], kk.id)
	binary.BigEndian.PutUint64(raw[5:13], uint64(expires))
	m := kk.get()
	copy(raw[13:], kk.mac(m, kind, raw[5:13], d, code, bound))
	kk.put(m)
	return b64.AppendEncode(dst, raw[:])
}

func (k *Keys) checkToken(value []byte, kind byte, d link.DomainID, code, bound []byte, now int64) bool {
	if len(value) != TokenLen {
		return false
	}
	var raw [rawTokenLen]byte
	if n, err := b64.Decode(raw[:], value); err != nil || n != rawTokenLen || raw[0] != kind {
		return false
	}
	if int64(binary.BigEndian.Uint64(raw[5:13])) <= now {
		return false
	}
	kk := k.byID(binary.BigEndian.Uint32(raw[1:5]))
	if kk == nil {
		return false
	}
	m := kk.get()
	ok := hmac.Equal(kk.mac(m, kind, raw[5:13], d, code, bound), raw[13:])
	kk.put(m)
	return ok
}

// mac is the token MAC of its fields, in m (valid until m is put back).
// Each variable field is length-prefixed, so no two inputs read alike.
func (kk *key) mac(m *macState, kind byte, expiry []byte, d link.DomainID, code, bound []byte) []byte {
	if len(code) > 255 || len(bound) > 0xffff {
		// Never a code or a bound value of a real link: no token for it.
		code, bound = nil, nil
		kind = 0
	}
	b := append(m.msg[:0], "edgelink token"...)
	b = append(b, kind)
	b = append(b, expiry...)
	b = binary.BigEndian.AppendUint32(b, uint32(d))
	b = append(b, byte(len(code)))
	b = append(b, code...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(bound)))
	m.h.Write(b)
	m.h.Write(bound) // may be longer than msg's room
	return m.h.Sum(m.sum[:0])
}
