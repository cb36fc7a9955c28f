package passhash

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

// cheap are the smallest parameters Bounds allow, so tests run fast.
var cheap = Params{Memory: MinMemory, Time: 1, Threads: 1}

func TestHashVerify(t *testing.T) {
	h, err := Hash([]byte("correct horse"), cheap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=7168,t=1,p=1$") || link.CheckPasswordHash(h) != nil {
		t.Fatalf("Hash = %q; want an argon2id PHC string", h)
	}
	for _, tc := range []struct {
		pw   string
		want bool
	}{{"correct horse", true}, {"correct hors", false}, {"correct horse ", false}, {"", false}, {"Correct horse", false}} {
		got, err := Verify(h, []byte(tc.pw))
		if err != nil || got != tc.want {
			t.Errorf("Verify(%q) = %v, %v; want %v", tc.pw, got, err, tc.want)
		}
	}
	h2, err := Hash([]byte("correct horse"), cheap, nil)
	if err != nil || h2 == h {
		t.Errorf("two hashes of one password are equal (%q): the salt is not fresh (%v)", h, err)
	}
	ph, err := Parse(h)
	if err != nil || ph.Params != cheap || len(ph.Salt) != SaltLen || len(ph.Key) != KeyLen {
		t.Fatalf("Parse(%q) = %+v, %v", h, ph, err)
	}
	if got := encode(ph.Params, ph.Salt, ph.Key); got != h {
		t.Errorf("encode(Parse(h)) = %q; want %q", got, h)
	}
}

// TestReference: argon2id as the reference implementation computes it
// (phc-winner-argon2's CLI: password "password", salt "somesalt", t=4,
// m=4096 KiB, p=4; the vector x/crypto's own tests use), through the
// parsed hash's verification, so what edges verify is the standard's.
// Its memory is below Bounds, so it is built without Parse.
func TestReference(t *testing.T) {
	key, _ := hex.DecodeString("145db9733a9f4ee43edf33c509be96b934d505a4efb33c5a")
	h := Hashed{Params: Params{Memory: 4096, Time: 4, Threads: 4}, Salt: []byte("somesalt"), Key: key}
	if !h.verify([]byte("password")) {
		t.Fatal("the reference vector does not verify")
	}
	if h.verify([]byte("passwore")) {
		t.Fatal("the reference vector verifies a wrong password")
	}
	if got := encode(h.Params, h.Salt, h.Key); got != "$argon2id$v=19$m=4096,t=4,p=4$c29tZXNhbHQ$FF25czqfTuQ+3zPFCb6WuTTVBaTvszxa" {
		t.Errorf("encode = %q", got)
	}
}

func TestHashRefusesParams(t *testing.T) {
	for _, p := range []Params{{}, {Memory: MaxMemory + 1, Time: 1, Threads: 1}, {Memory: MinMemory, Time: 0, Threads: 1},
		{Memory: MinMemory, Time: MaxTime + 1, Threads: 1}, {Memory: MinMemory, Time: 1, Threads: 0}, {Memory: MinMemory, Time: 1, Threads: MaxThreads + 1}} {
		if h, err := Hash([]byte("password"), p, nil); err == nil {
			t.Errorf("Hash with %+v = %q; want an error", p, h)
		}
	}
	if _, err := Hash([]byte("password"), cheap, bytes.NewReader([]byte("short"))); err == nil {
		t.Error("Hash with a random source that runs dry succeeded")
	}
}

func TestParseRefuses(t *testing.T) {
	good := "$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43)
	if _, err := Parse(good); err != nil {
		t.Fatalf("Parse(%q): %v", good, err)
	}
	for _, bad := range []string{
		"",
		"$argon2i$v=19$m=7168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),   // argon2i
		"$argon2id$v=16$m=7168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),  // old version
		"$argon2id$v=19$m=70000,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43), // too much memory
		"$argon2id$v=19$m=9999999999999,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=1024,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43), // too little
		"$argon2id$v=19$m=7168,t=11,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=7168,t=1,p=5$c29tZXNhbHQ$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=07168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),      // leading zero
		"$argon2id$v=19$t=1,m=7168,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 43),       // order
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZQ$" + strings.Repeat("A", 43),            // salt of 5 bytes
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHQ=$" + strings.Repeat("A", 43),      // padding
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 10),       // short key
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 300),      // too long
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHQ",                                  // no key
		"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHQ$" + strings.Repeat("A", 42) + "B", // non-canonical trailing bits
	} {
		if _, err := Parse(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v; want ErrMalformed", bad, err)
		}
		if ok, err := Verify(bad, []byte("password")); ok || err == nil {
			t.Errorf("Verify(%q) = %v, %v; want an error", bad, ok, err)
		}
	}
}

func TestCheckPassword(t *testing.T) {
	for _, ok := range []string{"secret", "pässwört", "six ch", strings.Repeat("x", MaxPasswordLen), "日本語のパス"} {
		if err := CheckPassword(ok); err != nil {
			t.Errorf("CheckPassword(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "five5", "日本語パス", strings.Repeat("x", MaxPasswordLen+1), "secret\n", "sec\x00ret", "secret\xff", "secr\u0085et"} {
		err := CheckPassword(bad)
		if !errors.Is(err, link.ErrInvalidInput) {
			t.Errorf("CheckPassword(%q) = %v; want ErrInvalidInput", bad, err)
			continue
		}
		if len(bad) >= 6 && strings.Contains(err.Error(), bad) {
			t.Errorf("CheckPassword's error %q holds the password", err)
		}
	}
}

// FuzzParse: Parse never panics, refuses what is not canonical, and what
// it takes encodes back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"$argon2id$v=19$m=7168,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$" + strings.Repeat("A", 43),
		"$argon2id$v=19$m=65536,t=2,p=4$c29tZXNhbHQ$FF25czqfTuQ+3zPFCb6WuTTVBaTvszxa", "$argon2id$v=19$m=", "$$$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Parse(s)
		if err != nil {
			return
		}
		if got := encode(h.Params, h.Salt, h.Key); got != s {
			t.Fatalf("Parse(%q) took it, but it encodes back as %q", s, got)
		}
		if link.CheckPasswordHash(s) != nil {
			t.Fatalf("Parse(%q) took a hash link.CheckPasswordHash refuses", s)
		}
	})
}

// BenchmarkVerifyDefault is what an edge pays for one attempt.
func BenchmarkVerifyDefault(b *testing.B) {
	h, err := Hash([]byte("correct horse"), Default, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := Verify(h, []byte("wrong horse")); ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
