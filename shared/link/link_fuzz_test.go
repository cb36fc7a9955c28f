package link

import (
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
)

// FuzzCodeSyntax: ValidCodeSyntax (what the edge looks up, what control
// accepts) and base62 (what the allocator issues) agree.
//
//   - ValidCodeSyntax accepts exactly the MinCodeLen..MaxCodeLen strings of
//     0-9A-Za-z-_ (checked against a byte-by-byte oracle), for strings and
//     byte slices alike.
//   - Every code base62 decodes is syntactically valid, encodes back to
//     itself byte for byte (case kept: 00000A is not 00000a) and lies in
//     [MinID, MaxID]; every 6-character valid code without '-' or '_'
//     decodes (only 000000, the sentinel, is refused).
//   - The code of any ID derived from the input is valid and decodes back.
func FuzzCodeSyntax(f *testing.F) {
	for _, s := range []string{"000001", "00000A", "00000a", "zzzzzz", "000000", "abc12-", "spring_sale",
		"abc", "abcd", "\x00\x00\x00\x00\x00\x00", "ab/cd", "ab.cd", "%2F%2Fevil", "ÿÿÿÿÿÿ", "zzzzzzz"} {
		f.Add(s, uint64(0))
	}
	f.Add("", base62.MaxID)
	f.Add("", base62.Space)
	f.Fuzz(func(t *testing.T, code string, id uint64) {
		want := len(code) >= MinCodeLen && len(code) <= MaxCodeLen
		generatedShape := len(code) == base62.Length
		for i := 0; i < len(code); i++ {
			c := code[i]
			alnum := '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
			if !alnum && c != '-' && c != '_' {
				want = false
			}
			if !alnum {
				generatedShape = false
			}
		}
		if got := ValidCodeSyntax(code); got != want {
			t.Fatalf("ValidCodeSyntax(%q) = %v; want %v", code, got, want)
		}
		if got := ValidCodeSyntax([]byte(code)); got != want {
			t.Fatalf("ValidCodeSyntax([]byte(%q)) = %v; want %v", code, got, want)
		}
		v, err := base62.Decode(code)
		if err == nil {
			if !want || !base62.Valid(code) || v < base62.MinID || v > base62.MaxID {
				t.Fatalf("base62 decodes %q to %d, but ValidCodeSyntax = %v, Valid = %v", code, v, want, base62.Valid(code))
			}
			if back, err := base62.Encode(v); err != nil || back != code {
				t.Fatalf("Decode(%q) = %d, which encodes to %q, %v", code, v, back, err)
			}
		} else if generatedShape && code != "000000" {
			t.Fatalf("6-character base62 code %q does not decode: %v", code, err)
		}
		if base62.Valid(code) != (err == nil) {
			t.Fatalf("base62.Valid(%q) = %v but Decode error %v", code, base62.Valid(code), err)
		}
		id = base62.MinID + id%base62.MaxID
		c, err := base62.Encode(id)
		if err != nil || !ValidCodeSyntax(c) {
			t.Fatalf("Encode(%d) = %q, %v; not a valid code", id, c, err)
		}
		if back, err := base62.Decode(c); err != nil || back != id {
			t.Fatalf("Decode(Encode(%d) = %q) = %d, %v", id, c, back, err)
		}
	})
}
