package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

func extrasOf(t testing.TB, x link.Extras) []byte {
	t.Helper()
	b, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// extrasLinks are sampleLinks and multiDomainLinks with extras on some:
// generated and custom codes, several domains, a link with a newer
// version and an expiry besides.
func extrasLinks(t testing.TB) []Link {
	links := append(sampleLinks(), multiDomainLinks()[1:]...)
	rules := []link.Rule{
		{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Countries: []string{"AT", "CH", "DE"}, Languages: []string{"de"}, URL: "https://shop.example.de/"},
		{Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "qr code"}}, URL: "https://shop.example.com/qr"},
	}
	links[0].Extras = extrasOf(t, link.Extras{Rules: rules})
	links[2].Extras = extrasOf(t, link.Extras{PasswordHash: testHash, MaxClicks: 10}) // with an expiry
	links[5].Extras = extrasOf(t, link.Extras{MaxClicks: 1})                          // custom code
	links[8].Extras = extrasOf(t, link.Extras{PasswordHash: testHash})                // newer version
	links[10].Extras = extrasOf(t, link.Extras{Rules: rules[:1], MaxClicks: 5})       // domain 2
	links[14].Extras = extrasOf(t, link.Extras{Rules: rules[1:]})                     // domain 3, custom
	return links
}

// TestExtras: a file with extras is format 4 and gives every link its own
// extras back (the others none), on every domain, by Lookup, At and Each.
func TestExtras(t *testing.T) {
	links := extrasLinks(t)
	data := build(t, links, Header{ChangeVersion: 77}, nil, []byte("bloom"))
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.Format() != 4 || s.Domains() == nil {
		t.Fatalf("format %d, domains %v; want 4 with a domain table", s.Format(), s.Domains())
	}
	for _, l := range links {
		e, ok := s.Lookup(l.Domain, []byte(l.Code))
		if !ok {
			t.Fatalf("Lookup(%d, %q) missing", l.Domain, l.Code)
		}
		if !bytes.Equal(e.Extras, l.Extras) || (l.Extras == nil) != (e.Extras == nil) {
			t.Errorf("Lookup(%d, %q).Extras = %x; want %x", l.Domain, l.Code, e.Extras, l.Extras)
		}
		if got := string(e.AppendURL(nil)); got != l.URL && l.Status == link.Active {
			t.Errorf("Lookup(%d, %q) target %q; want %q", l.Domain, l.Code, got, l.URL)
		}
		if e.ExpiresAt != l.ExpiresAt || e.Version != max(l.Version, 77) {
			t.Errorf("Lookup(%d, %q) expiry %d version %d; want %d, %d", l.Domain, l.Code, e.ExpiresAt, e.Version, l.ExpiresAt, max(l.Version, 77))
		}
		i, _ := s.Find(l.Domain, []byte(l.Code))
		if at := s.At(i); !bytes.Equal(at.Extras, l.Extras) {
			t.Errorf("At(Find(%q)).Extras = %x", l.Code, at.Extras)
		}
	}
	n := 0
	s.Each(func(d link.DomainID, code []byte, e Entry) bool {
		i := slices.IndexFunc(links, func(l Link) bool { return l.Domain == d && l.Code == string(code) })
		if i < 0 || !bytes.Equal(e.Extras, links[i].Extras) {
			t.Errorf("Each: %d/%q extras %x", d, code, e.Extras)
		}
		n++
		return true
	})
	if n != len(links) {
		t.Errorf("Each yielded %d of %d", n, len(links))
	}
	checkUsable(t, s)
}

// TestNoExtrasIsFormat3: links without extras are written as format 3,
// byte for byte what the writer wrote before extras, so edges of that
// release read every file until a link has extras.
func TestNoExtrasIsFormat3(t *testing.T) {
	for _, tc := range []struct {
		data []byte
		want string
	}{
		{build(t, sampleLinks(), sampleHeader, sampleSealed, []byte("bloom-bytes")), "71c557540baaecb83d9dba558e8470ad3b1202082efc45405f3d7a2398d45c11"},
		{build(t, multiDomainLinks(), Header{ChangeVersion: 5}, nil, []byte("bloom")), "b3954ae9b37764156b89cb518afef8f80cf4e65d186e9c97cbe87e5d26df04d5"},
	} {
		sum := sha256.Sum256(tc.data)
		if got := hex.EncodeToString(sum[:]); got != tc.want {
			t.Errorf("a file without extras changed: sha256 %s, want %s", got, tc.want)
		}
		if le.Uint32(tc.data[8:]) != 3 {
			t.Errorf("format %d without extras; want 3", le.Uint32(tc.data[8:]))
		}
	}
}

func TestWriterRejectsExtras(t *testing.T) {
	for name, x := range map[string][]byte{
		"lone flags":  {0},
		"unknown bit": {0x40},
		"bad target":  append([]byte{0x04, 1, 1, 2, 30}, "https://secret.example/ \r\nX: 1"...),
	} {
		var w Writer
		err := w.Add(Link{Code: "00000A", URL: "https://x.example/", RedirectType: 302, Status: link.Active, Extras: x})
		if err == nil {
			t.Errorf("%s: Add took extras %x", name, x)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error %q names a target", name, err)
		}
		if w.Len() != 0 {
			t.Errorf("%s: a refused link was kept", name)
		}
	}
}

// TestExtrasFlagWithoutRow: in a file not yet verified, a row flagged for
// extras whose extras row is missing is not found (so the authority
// settles it), never served without them; Verify refuses the file.
func TestExtrasFlagWithoutRow(t *testing.T) {
	links := extrasLinks(t)
	data := build(t, links, Header{ChangeVersion: 77}, nil, []byte("bloom"))
	row := data[headerLen+(sectionExtras-1)*tableRowLen:]
	off, n := le.Uint64(row[8:]), le.Uint64(row[16:])
	for i := off; i < off+n; i += sideRowLen {
		le.PutUint64(data[i:], 1<<40) // a row number no table has
	}
	data = resign(data, sectionCountV4)
	s, err := OpenDeferred(data)
	if err != nil {
		t.Fatalf("OpenDeferred: %v (the extras section is Verify's)", err)
	}
	for _, l := range links {
		e, ok := s.Lookup(l.Domain, []byte(l.Code))
		if l.Extras != nil && ok {
			t.Errorf("Lookup(%d, %q) found a link whose extras are missing: %+v", l.Domain, l.Code, e)
		}
		if l.Extras == nil && !ok {
			t.Errorf("Lookup(%d, %q) of a plain link missed", l.Domain, l.Code)
		}
	}
	if err := s.Verify(context.Background()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify = %v; want ErrCorrupt", err)
	}
	// Extras rows pointing past their bytes, or at bytes that are not
	// extras, are refused by Verify too.
	for name, value := range map[string]uint64{"past the end": 1<<50 | 3, "empty": 0, "not extras": 1} {
		data := build(t, links, Header{ChangeVersion: 77}, nil, []byte("bloom"))
		le.PutUint64(data[off+8:], value)
		if _, err := Open(resign(data, sectionCountV4)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Open = %v; want ErrCorrupt", name, err)
		}
	}
}

// TestSideValueNear: the search that starts at a row's share of the table
// finds exactly what the binary search finds, for tables spread evenly,
// bunched at either end, sparse and full, and rows absent or beyond.
func TestSideValueNear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		name  string
		slots int
		pick  func() int
		n     int
	}{
		{"every row", 1000, nil, 1000},
		{"one in a hundred", 100_000, func() int { return r.IntN(100_000) }, 1000},
		{"bunched low", 100_000, func() int { return r.IntN(500) }, 300},
		{"bunched high", 100_000, func() int { return 99_500 + r.IntN(500) }, 300},
		{"one row", 10, func() int { return 7 }, 1},
		{"empty", 10, nil, 0},
	} {
		var rows []int
		if tc.pick == nil {
			for i := range tc.n {
				rows = append(rows, i)
			}
		} else {
			seen := map[int]bool{}
			for len(rows) < tc.n {
				if i := tc.pick(); !seen[i] {
					seen[i] = true
					rows = append(rows, i)
				}
			}
			slices.Sort(rows)
		}
		var table []byte
		for _, i := range rows {
			table = le.AppendUint64(table, uint64(i))
			table = le.AppendUint64(table, uint64(i)*7+1)
		}
		for i := -1; i <= tc.slots+5; i++ {
			wv, wok := sideValue(table, i)
			if i < 0 {
				wv, wok = 0, false
			}
			if v, ok := sideValueNear(table, i, tc.slots); v != wv || ok != wok {
				t.Fatalf("%s: sideValueNear(%d) = %d, %v; the binary search says %d, %v", tc.name, i, v, ok, wv, wok)
			}
		}
	}
}
