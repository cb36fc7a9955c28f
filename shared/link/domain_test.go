package link

import (
	"errors"
	"strings"
	"testing"
)

func TestIDLayout(t *testing.T) {
	const space = 62 * 62 * 62 * 62 * 62 * 62
	for _, d := range []DomainID{0, 1, 2, 1000, MaxDomainID} {
		start, end := IDRange(d)
		if start != uint64(d)*space+1 || end != uint64(d+1)*space {
			t.Fatalf("IDRange(%d) = [%d, %d)", d, start, end)
		}
		for _, id := range []uint64{start, start + 12345, end - 1} {
			got, local := SplitID(id)
			if got != d || local == 0 || local >= space || IDBase(d)+local != id {
				t.Fatalf("SplitID(%d) = %d, %d", id, got, local)
			}
		}
		if _, local := SplitID(IDBase(d)); local != 0 {
			t.Fatalf("domain %d: its base is not its sentinel", d)
		}
	}
	if _, end := IDRange(MaxDomainID); end > 1<<63-1 {
		t.Fatalf("the last domain's range ends at %d, past a bigint", end)
	}
	if NamespaceOf(DefaultDomain) != "default" || NamespaceOf(7) != "d7" {
		t.Fatalf("namespaces: %q %q", NamespaceOf(0), NamespaceOf(7))
	}
}

func TestCanonicalHost(t *testing.T) {
	for in, want := range map[string]string{
		"go.acme.com":           "go.acme.com",
		"GO.Acme.COM":           "go.acme.com",
		"go.acme.com.":          "go.acme.com",
		"go.acme.com:8443":      "go.acme.com",
		"GO.acme.com.:80":       "go.acme.com",
		"bücher.example":        "xn--bcher-kva.example",
		"BÜCHER.example":        "xn--bcher-kva.example",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"127.0.0.1:8081":        "127.0.0.1",
		"[::1]:8081":            "::1",
		"[2001:DB8::1]":         "2001:db8::1",
		"localhost":             "localhost",
	} {
		got, err := CanonicalHost(in)
		if err != nil || got != want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", ".", ":80", "go.acme.com:", "go.acme.com:http", "a..b", "-x-.com" + strings.Repeat("", 0),
		"exa mple.com", "evil.com/path", "evil.com\x00", "user@evil.com", "[::1", "[127.0.0.1]",
		strings.Repeat("a", 64) + ".com", strings.Repeat("a.", 127) + "com",
	} {
		if got, err := CanonicalHost(in); !errors.Is(err, ErrHost) {
			t.Errorf("CanonicalHost(%q) = %q, %v; want ErrHost", in, got, err)
		}
	}
}

func TestAppendHostKeyAgreesWithCanonicalHost(t *testing.T) {
	for _, in := range []string{"go.acme.com", "GO.ACME.com:8080", "go.acme.com.", "127.0.0.1:8081", "xn--bcher-kva.example", "a-b.c"} {
		fast, ok := AppendHostKey(nil, []byte(in))
		slow, err := CanonicalHost(in)
		if !ok || err != nil || string(fast) != slow {
			t.Errorf("%q: fast %q %v, slow %q %v", in, fast, ok, slow, err)
		}
	}
	// What the fast path refuses goes to CanonicalHost (or is no host).
	for _, in := range []string{"", "bücher.example", "[::1]:80", "evil.com/x", "a b", "go.acme.com:"} {
		if got, ok := AppendHostKey(nil, []byte(in)); ok {
			if slow, err := CanonicalHost(in); err != nil || slow != string(got) {
				t.Errorf("%q: fast path took it as %q, slow says %q %v", in, got, slow, err)
			}
		}
	}
}

func TestAppendHostKeyDoesNotAllocate(t *testing.T) {
	host := []byte("Go.Acme.COM:8443")
	var buf [256]byte
	allocs := testing.AllocsPerRun(1000, func() {
		if k, ok := AppendHostKey(buf[:0], host); !ok || len(k) != 11 {
			t.Fatal("not canonicalized")
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per host", allocs)
	}
}

func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"go.acme.com", "bücher.example:80", "[::1]:1", "A.B.", "127.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := CanonicalHost(in)
		if err != nil {
			return
		}
		// Canonical is a fixed point, and the fast path never disagrees.
		if again, err := CanonicalHost(h); err != nil || again != h {
			t.Fatalf("%q -> %q -> %q, %v", in, h, again, err)
		}
		if fast, ok := AppendHostKey(nil, []byte(in)); ok && string(fast) != h {
			t.Fatalf("%q: fast %q, canonical %q", in, fast, h)
		}
	})
}
