package ff1

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/shared/base62"
)

// testKey is a fixed AES-256 key so that every run checks the same codes.
var testKey = mustHexKey("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")

func mustHexKey(s string) []byte {
	b := make([]byte, len(s)/2)
	for i := range b {
		_, _ = fmt.Sscanf(s[2*i:2*i+2], "%02x", &b[i])
	}
	return b
}

func newCodes(t testing.TB, key []byte, domain string) *Codes {
	t.Helper()
	c, err := NewCodes(key, domain)
	if err != nil {
		t.Fatalf("NewCodes(%q): %v", domain, err)
	}
	return c
}

// TestCodesMatchGeneralFF1 checks the fast path against Cipher, which the
// NIST samples check: same key, the domain as tweak, radix 62, length 6.
func TestCodesMatchGeneralFF1(t *testing.T) {
	for _, domain := range []string{"x", "go.acme.com", "acme.link", "a-domain-name-long-enough-for-q-to-span-three-blocks.example.org"} {
		for _, key := range [][]byte{testKey[:16], testKey[:24], testKey} {
			codes := newCodes(t, key, domain)
			general, err := New(key, []byte(domain), 62)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(len(domain)), uint64(len(key))))
			for range 200 {
				id := base62.MinID + rng.Uint64N(base62.MaxID)
				var x [base62.Length]uint16
				for i, v := base62.Length-1, id; i >= 0; i-- {
					x[i] = uint16(v % 62)
					v /= 62
				}
				y, err := general.Encrypt(x[:])
				if err != nil {
					t.Fatal(err)
				}
				var want [base62.Length]byte
				for i, d := range y {
					want[i] = base62.Alphabet[d]
				}
				got, err := codes.Encode(id)
				if err != nil {
					t.Fatalf("Encode(%d): %v", id, err)
				}
				if got != want {
					t.Fatalf("domain %q, %d-byte key: Encode(%d) = %s; general FF1 gives %s", domain, len(key), id, got[:], want[:])
				}
			}
		}
	}
}

func TestCodesRoundTrip(t *testing.T) {
	c := newCodes(t, testKey, "go.acme.com")
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []uint64{base62.MinID, 2, 62, 238327, 238328, 238329, base62.MaxID - 1, base62.MaxID}
	for range 20000 {
		ids = append(ids, base62.MinID+rng.Uint64N(base62.MaxID))
	}
	for _, id := range ids {
		code, err := c.Encode(id)
		if err != nil {
			t.Fatalf("Encode(%d): %v", id, err)
		}
		if !base62.Valid(code[:]) && string(code[:]) != "000000" {
			t.Fatalf("Encode(%d) = %q, not a base62 code", id, code[:])
		}
		back, ok := c.Decode(code[:])
		if !ok || back != id {
			t.Fatalf("Decode(Encode(%d) = %s) = %d, %v", id, code[:], back, ok)
		}
	}
	for range 20000 {
		var code [base62.Length]byte
		for i := range code {
			code[i] = base62.Alphabet[rng.IntN(62)]
		}
		id, ok := c.Decode(code[:])
		if !ok {
			if c0 := sentinelCode(t, c); c0 != code {
				t.Fatalf("Decode(%s) = not ok; only %s may be", code[:], c0[:])
			}
			continue
		}
		again, err := c.Encode(id)
		if err != nil || again != code {
			t.Fatalf("Encode(Decode(%s) = %d) = %s, %v", code[:], id, again[:], err)
		}
	}
}

// sentinelCode is the one code that decrypts to ID 0.
func sentinelCode(t testing.TB, c *Codes) [base62.Length]byte {
	t.Helper()
	general, err := New(testKey, []byte(c.Domain()), 62)
	if err != nil {
		t.Fatal(err)
	}
	y, err := general.Encrypt(make([]uint16, base62.Length))
	if err != nil {
		t.Fatal(err)
	}
	var code [base62.Length]byte
	for i, d := range y {
		code[i] = base62.Alphabet[d]
	}
	return code
}

func TestCodesSentinel(t *testing.T) {
	c := newCodes(t, testKey, "go.acme.com")
	code := sentinelCode(t, c)
	if id, ok := c.Decode(code[:]); ok {
		t.Fatalf("Decode(%s), the code of ID 0, = %d, true; want not ok", code[:], id)
	}
	if _, err := c.ID(string(code[:])); !errors.Is(err, ErrSentinel) {
		t.Fatalf("ID(%s) error = %v; want ErrSentinel", code[:], err)
	}
	// "000000" is the sentinel of sequential codes, but here just a code.
	id, ok := c.Decode([]byte("000000"))
	if !ok {
		t.Fatal(`Decode("000000") not ok`)
	}
	if again, _ := c.Encode(id); string(again[:]) != "000000" {
		t.Fatalf(`Encode(Decode("000000") = %d) = %s`, id, again[:])
	}
}

func TestCodesRejects(t *testing.T) {
	c := newCodes(t, testKey, "go.acme.com")
	for _, id := range []uint64{0, base62.Space, base62.Space + 1, math.MaxUint64} {
		if code, err := c.Encode(id); !errors.Is(err, ErrOutOfRange) || code != ([base62.Length]byte{}) {
			t.Errorf("Encode(%d) = %q, %v; want zero code, ErrOutOfRange", id, code[:], err)
		}
	}
	for _, tc := range []struct {
		code string
		want error
	}{
		{"", base62.ErrLength},
		{"abcde", base62.ErrLength},
		{"abcdefg", base62.ErrLength},
		{"abc-ef", base62.ErrAlphabet},
		{"abc ef", base62.ErrAlphabet},
		{"abcdé", base62.ErrAlphabet}, // six bytes
		{"\x00bcdef", base62.ErrAlphabet},
		{"abcde\xff", base62.ErrAlphabet},
	} {
		if id, ok := c.Decode([]byte(tc.code)); ok {
			t.Errorf("Decode(%q) = %d, true; want not ok", tc.code, id)
		}
		if id, err := c.ID(tc.code); !errors.Is(err, tc.want) || id != 0 {
			t.Errorf("ID(%q) = %d, %v; want 0, %v", tc.code, id, err, tc.want)
		}
	}
}

func TestNewCodesRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    []byte
		domain string
		want   error
	}{
		{"short key", testKey[:8], "go.acme.com", ErrKeySize},
		{"long key", append(slices.Clone(testKey), 0), "go.acme.com", ErrKeySize},
		{"no domain", testKey, "", ErrDomain},
		{"upper case", testKey, "Go.Acme.com", ErrDomain},
		{"port", testKey, "go.acme.com:443", ErrDomain},
		{"trailing dot", testKey, "go.acme.com.", ErrDomain},
		{"leading dot", testKey, ".acme.com", ErrDomain},
		{"unicode", testKey, "bücher.example", ErrDomain},
		{"space", testKey, "go acme.com", ErrDomain},
		{"too long", testKey, strings.Repeat("a", 254), ErrDomain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := NewCodes(tc.key, tc.domain); !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("NewCodes(%d-byte key, %q) = %v, %v; want nil, %v", len(tc.key), tc.domain, c, err, tc.want)
			}
		})
	}
	for _, domain := range []string{"a", "xn--bcher-kva.example", "go.acme.com", strings.Repeat("a", 253)} {
		if _, err := NewCodes(testKey, domain); err != nil {
			t.Errorf("NewCodes(%q): %v", domain, err)
		}
	}
}

// TestCodesDependOnKeyAndDomain: the same ID on two domains, or under two
// keys, gives unrelated codes, and one domain's key decodes nothing of
// another's to the right ID.
func TestCodesDependOnKeyAndDomain(t *testing.T) {
	other := slices.Clone(testKey)
	other[0] ^= 1
	perms := []*Codes{
		newCodes(t, testKey, "go.acme.com"),
		newCodes(t, testKey, "acme.link"),
		newCodes(t, other, "go.acme.com"),
	}
	same := make([]int, len(perms))
	for id := uint64(1); id <= 1000; id++ {
		base, _ := perms[0].Encode(id)
		for j, p := range perms[1:] {
			code, _ := p.Encode(id)
			if code == base {
				same[j+1]++
			}
		}
	}
	// Two independent permutations agree on a point with chance 62^-6.
	for j := 1; j < len(perms); j++ {
		if same[j] > 0 {
			t.Errorf("%v agrees with %v on %d of 1000 IDs", perms[j], perms[0], same[j])
		}
	}
}

// TestCodesNotEnumerable is the enumeration check: 10,000
// consecutive IDs (as a segment hands them out) encoded on one domain.
//
// Bounds. For a random permutation, two codes differ in each position with
// probability 61/62, so adjacent codes differ in 6·61/62 ≈ 5.90 characters on
// average; the issue asks for ≥ 4. Sequential codes differ in ≈ 1.02.
// Spearman's ρ between ID order and code order has, for N independent ranks
// with no ties (codes are distinct), mean 0 and standard deviation
// 1/√(N−1) ≈ 0.0100 at N = 10,000; |ρ| < 0.05 is five standard deviations
// (a chance of about 6·10^-7 of failing for a good permutation), while
// sequential codes give ρ = 1. The key is fixed, so the test is
// deterministic; it also runs the same statistics on base62's sequential
// codes and requires them to fail, so it can tell the two apart.
func TestCodesNotEnumerable(t *testing.T) {
	const n = 10_000
	const start = 7 * 238328 // some segment's first ID, not 1
	ff1Codes := newCodes(t, testKey, "go.acme.com")
	encoders := map[string]func(uint64) string{
		"ff1": func(id uint64) string {
			code, err := ff1Codes.Encode(id)
			if err != nil {
				t.Fatal(err)
			}
			return string(code[:])
		},
		"sequential": func(id uint64) string {
			code, err := base62.Encode(id)
			if err != nil {
				t.Fatal(err)
			}
			return code
		},
	}
	for name, encode := range encoders {
		codes := make([]string, n)
		for i := range codes {
			codes[i] = encode(start + uint64(i))
		}
		hamming, rho := enumerationStats(t, codes)
		good := hamming >= 4 && math.Abs(rho) < 0.05
		t.Logf("%s: adjacent codes differ in %.3f of 6 characters on average; Spearman ρ = %+.4f", name, hamming, rho)
		if name == "ff1" && !good {
			t.Errorf("ff1 codes are enumerable: mean adjacent difference %.3f (want ≥ 4), ρ = %.4f (want |ρ| < 0.05)", hamming, rho)
		}
		if name == "sequential" && good {
			t.Errorf("the statistics pass sequential codes (difference %.3f, ρ = %.4f): they measure nothing", hamming, rho)
		}
	}
}

// enumerationStats returns the mean number of differing characters between
// codes[i] and codes[i+1], and Spearman's rank correlation between index
// order and code order. Codes must be distinct.
func enumerationStats(t testing.TB, codes []string) (hamming, rho float64) {
	t.Helper()
	diff := 0
	for i := 1; i < len(codes); i++ {
		for j := range codes[i] {
			if codes[i][j] != codes[i-1][j] {
				diff++
			}
		}
	}
	order := make([]int, len(codes))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(codes[a], codes[b]) })
	var sumD2 float64
	for rank, idx := range order {
		if rank > 0 && codes[order[rank-1]] == codes[idx] {
			t.Fatalf("code %s appears twice", codes[idx])
		}
		d := float64(rank - idx)
		sumD2 += d * d
	}
	n := float64(len(codes))
	return float64(diff) / (n - 1), 1 - 6*sumD2/(n*(n*n-1))
}

func TestCodesDecodeDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers on purpose")
	}
	c := newCodes(t, testKey, "go.acme.com")
	code, _ := c.Encode(123456789)
	miss := []byte("zz-zzz")
	var sink uint64
	allocs := testing.AllocsPerRun(1000, func() {
		id, _ := c.Decode(code[:])
		bad, _ := c.Decode(miss)
		sink += id + bad
	})
	if allocs != 0 {
		t.Fatalf("Decode allocated %v times per call", allocs)
	}
	if enc := testing.AllocsPerRun(1000, func() { _, _ = c.Encode(987654321) }); enc != 0 {
		t.Fatalf("Encode allocated %v times per call", enc)
	}
	_ = sink
}

// TestCodesConcurrent shares one Codes across goroutines (run under -race).
func TestCodesConcurrent(t *testing.T) {
	c := newCodes(t, testKey, "go.acme.com")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for id := uint64(g*1000 + 1); id <= uint64(g*1000+1000); id++ {
				code, err := c.Encode(id)
				if err != nil {
					errs <- err
					return
				}
				if back, ok := c.Decode(code[:]); !ok || back != id {
					errs <- fmt.Errorf("Decode(Encode(%d) = %s) = %d, %v", id, code[:], back, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCodesPrintNoKey(t *testing.T) {
	c := newCodes(t, testKey, "go.acme.com")
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%v %+v %#v %s %x %d %q", c, c, c, c, c, c, c)
	out := buf.String()
	if !strings.Contains(out, "go.acme.com") {
		t.Errorf("printed Codes %q does not name its domain", out)
	}
	for _, secret := range []string{"603deb", "603DEB", string(testKey[:3])} {
		if strings.Contains(out, secret) {
			t.Errorf("printed Codes %q contains key bytes %q", out, secret)
		}
	}
}

func BenchmarkCodesDecode(b *testing.B) {
	c := newCodes(b, testKey, "go.acme.com")
	code, _ := c.Encode(123456789)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Decode(code[:]); !ok {
			b.Fatal("not ok")
		}
	}
}

func BenchmarkCodesEncode(b *testing.B) {
	c := newCodes(b, testKey, "go.acme.com")
	b.ReportAllocs()
	id := uint64(1)
	for b.Loop() {
		if _, err := c.Encode(id); err != nil {
			b.Fatal(err)
		}
		id++
	}
}

func BenchmarkCipherEncrypt(b *testing.B) {
	c, err := New(testKey, []byte("go.acme.com"), 62)
	if err != nil {
		b.Fatal(err)
	}
	x := []uint16{1, 2, 3, 4, 5, 6}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Encrypt(x); err != nil {
			b.Fatal(err)
		}
	}
}
