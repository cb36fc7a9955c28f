package snapshottest

import (
	"bytes"
	"testing"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestBuildWritesDomains: Build writes format 3 with the platform's domain
// and one per domain its links use, BuildDomains keeps the table it is
// given, and each domain's bloom holds its own codes.
func TestBuildWritesDomains(t *testing.T) {
	links := []snapshot.Link{
		{Code: "00000A", URL: "https://zero.example/", RedirectType: 302, Status: link.Active},
		{Domain: 4, Code: "00000A", URL: "https://four.example/", RedirectType: 302, Status: link.Active},
		{Domain: 4, Code: "promo", URL: "https://four.example/promo", RedirectType: 302, Status: link.Active},
	}
	ff1 := link.Domain{ID: 7, Host: "go.acme.example", TenantID: 2, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive}
	for _, tc := range []struct {
		name string
		data func() ([]byte, error)
		want []link.Domain
	}{
		{"Build", func() ([]byte, error) { return Build(links, snapshot.Header{ChangeVersion: 3}, nil) },
			[]link.Domain{Platform(), Domain(4)}},
		{"BuildDomains", func() ([]byte, error) {
			return BuildDomains(links, []link.Domain{ff1}, snapshot.Header{ChangeVersion: 3}, nil)
		}, []link.Domain{Platform(), Domain(4), ff1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.data()
			if err != nil {
				t.Fatal(err)
			}
			s, err := snapshot.Open(data)
			if err != nil {
				t.Fatal(err)
			}
			if s.Format() != 3 || s.Header.BloomCount != uint64(len(links)) {
				t.Errorf("format %d, header %+v", s.Format(), s.Header)
			}
			got := s.Domains()
			if len(got) != len(tc.want) {
				t.Fatalf("Domains() = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if g, w := got[i], tc.want[i]; g.ID != w.ID || g.Host != w.Host || g.CodeMode != w.CodeMode || g.Status != w.Status {
					t.Errorf("domain %d = %+v, want %+v", i, g, w)
				}
			}
			for _, l := range links {
				e, ok := s.Lookup(l.Domain, []byte(l.Code))
				if !ok || string(e.AppendURL(nil)) != l.URL {
					t.Errorf("Lookup(%d, %q) = %q, %v", l.Domain, l.Code, e.AppendURL(nil), ok)
				}
				f := new(bloom.BloomFilter)
				if _, err := f.ReadFrom(bytes.NewReader(s.Bloom(l.Domain))); err != nil || !f.TestString(l.Code) {
					t.Errorf("domain %d's bloom lacks %q (%v)", l.Domain, l.Code, err)
				}
			}
			if _, ok := s.Lookup(0, []byte("promo")); ok {
				t.Error("domain 4's promo found on domain 0")
			}
		})
	}
}
