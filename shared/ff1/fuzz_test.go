package ff1

import (
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
)

// FuzzCodesDecode: every string either decodes to an ID whose code is that
// string again, or is refused, and only malformed strings and the code of ID
// 0 are refused.
func FuzzCodesDecode(f *testing.F) {
	for _, s := range []string{"000000", "zzzzzz", "00000A", "00000a", "go.acm", "abc", "", "abcdefg", "ab\xffdef"} {
		f.Add([]byte(s))
	}
	c := newCodes(f, testKey, "go.acme.com")
	zero := sentinelCode(f, c)
	f.Fuzz(func(t *testing.T, code []byte) {
		id, ok := c.Decode(code)
		_, digitsErr := base62.Digits(code)
		if !ok {
			if digitsErr == nil && string(code) != string(zero[:]) {
				t.Fatalf("Decode(%q) refused a well-formed code", code)
			}
			return
		}
		if digitsErr != nil {
			t.Fatalf("Decode(%q) = %d, true for a malformed code", code, id)
		}
		again, err := c.Encode(id)
		if err != nil || string(again[:]) != string(code) {
			t.Fatalf("Encode(Decode(%q) = %d) = %q, %v", code, id, again[:], err)
		}
	})
}

// FuzzCodesEncode: every ID in range encodes to a code that decodes back to
// it; every ID out of range is refused.
func FuzzCodesEncode(f *testing.F) {
	for _, id := range []uint64{0, 1, 238327, 238328, base62.MaxID, base62.Space, 1 << 63} {
		f.Add(id)
	}
	c := newCodes(f, testKey, "go.acme.com")
	f.Fuzz(func(t *testing.T, id uint64) {
		code, err := c.Encode(id)
		if id < base62.MinID || id > base62.MaxID {
			if err == nil {
				t.Fatalf("Encode(%d) = %s, nil; want an error", id, code[:])
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%d): %v", id, err)
		}
		if back, ok := c.Decode(code[:]); !ok || back != id {
			t.Fatalf("Decode(Encode(%d) = %s) = %d, %v", id, code[:], back, ok)
		}
	})
}
