package authority

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func hostDomain(id link.DomainID, host string) link.Domain {
	return link.Domain{ID: id, Host: host, TenantID: 7, NotFoundRedirect: "https://example.com/404",
		CodeMode: link.CodesFF1, KeyIDs: []string{"k2", "k1"}, Status: link.DomainActive, Version: 41}
}

// TestAskHosts: hosts and codes in one question round-trip in format 4,
// and the domains found come back whole, each for a host asked.
func TestAskHosts(t *testing.T) {
	q := Question{Codes: []string{"00000A", "spring-sale"}, Hosts: []string{"go.example.com", "nobody.example"}}
	qb, err := MarshalQuestion(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	if qb[0] != askFormatHosts {
		t.Fatalf("a question with hosts is format %d, want %d", qb[0], askFormatHosts)
	}
	var gq Question
	if err := UnmarshalQuestion(qb, &gq); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, gq); diff != "" {
		t.Errorf("question round trip (-want +got):\n%s", diff)
	}
	a := Answer{Kind: Found, Version: 12, Replies: []Reply{{Kind: NotFound}, {Kind: NotFound}},
		Domains: []link.Domain{hostDomain(5, "go.example.com")}}
	ab, err := MarshalAnswer(nil, &a)
	if err != nil {
		t.Fatal(err)
	}
	var ga Answer
	if err := UnmarshalAnswer(ab, &q, &ga); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, ga); diff != "" {
		t.Errorf("answer round trip (-want +got):\n%s", diff)
	}
	if d, ok := ga.DomainOf("go.example.com"); !ok || d.ID != 5 {
		t.Errorf("DomainOf(go.example.com) = %+v, %v", d, ok)
	}
	if _, ok := ga.DomainOf("nobody.example"); ok {
		t.Error("DomainOf(nobody.example) found a domain")
	}

	// Hosts alone are a question too.
	hq := Question{Hosts: []string{"go.example.com"}}
	hb, err := MarshalQuestion(nil, &hq)
	if err != nil {
		t.Fatal(err)
	}
	var ghq Question
	if err := UnmarshalQuestion(hb, &ghq); err != nil || len(ghq.Hosts) != 1 || len(ghq.Codes) != 0 {
		t.Fatalf("hosts-only question decodes to %+v, %v", ghq, err)
	}
}

// TestAskNoHostsKeepsFormat: without hosts, questions and answers keep the
// formats older controls and edges read.
func TestAskNoHostsKeepsFormat(t *testing.T) {
	for _, tc := range []struct {
		q    Question
		want byte
	}{
		{Question{Codes: []string{"00000A"}}, askFormatNoDomains},
		{Question{Codes: []string{"00000A"}, Domains: []link.DomainID{3}}, askFormat},
	} {
		b, err := MarshalQuestion(nil, &tc.q)
		if err != nil || b[0] != tc.want {
			t.Errorf("MarshalQuestion(%+v) = format %d, %v; want %d", tc.q, b[0], err, tc.want)
		}
	}
	b, err := MarshalAnswer(nil, &Answer{Kind: Found, Replies: []Reply{{Kind: NotFound}}})
	if err != nil || b[0] != askFormatNoDomains {
		t.Errorf("an answer without domains is format %d, %v", b[0], err)
	}
}

func TestAskHostsRejects(t *testing.T) {
	many := make([]string, MaxHosts+1)
	for i := range many {
		many[i] = strings.Repeat("a", i+1) + ".example"
	}
	for name, q := range map[string]Question{
		"upper case":   {Hosts: []string{"Go.Example.com"}},
		"port":         {Hosts: []string{"go.example.com:80"}},
		"trailing dot": {Hosts: []string{"go.example.com."}},
		"empty":        {Hosts: []string{""}},
		"unicode":      {Hosts: []string{"bücher.example"}},
		"twice":        {Hosts: []string{"a.example", "a.example"}},
		"too many":     {Hosts: many},
	} {
		if b, err := MarshalQuestion(nil, &q); err == nil {
			t.Errorf("%s: MarshalQuestion(%q) = %x, want an error", name, q.Hosts, b)
		}
	}

	q := Question{Hosts: []string{"go.example.com"}}
	bad := map[string]link.Domain{
		"removed":       func() link.Domain { d := hostDomain(5, "go.example.com"); d.Status = link.DomainRemoved; return d }(),
		"no key":        func() link.Domain { d := hostDomain(5, "go.example.com"); d.KeyIDs = nil; return d }(),
		"bad mode":      func() link.Domain { d := hostDomain(5, "go.example.com"); d.CodeMode = "rot13"; return d }(),
		"not canonical": hostDomain(5, "GO.example.com"),
	}
	for name, d := range bad {
		if _, err := MarshalAnswer(nil, &Answer{Kind: Found, Domains: []link.Domain{d}}); err == nil {
			t.Errorf("%s: MarshalAnswer accepted %+v", name, d)
		}
	}
	// A domain for a host the question did not ask is refused by the
	// reader: an answer never teaches an edge a host it did not ask for.
	ab, err := MarshalAnswer(nil, &Answer{Kind: Found, Domains: []link.Domain{hostDomain(6, "other.example")}})
	if err != nil {
		t.Fatal(err)
	}
	var a Answer
	if err := UnmarshalAnswer(ab, &q, &a); err == nil {
		t.Errorf("UnmarshalAnswer took a domain for a host not asked: %+v", a)
	}
	// Nor may an unavailable answer carry domains.
	if _, err := MarshalAnswer(nil, &Answer{Kind: Unavailable, Domains: []link.Domain{hostDomain(5, "go.example.com")}}); err == nil {
		t.Error("MarshalAnswer accepted an unavailable answer with domains")
	}
	// An answer with a domain is refused by a reader that asked no hosts.
	ab, err = MarshalAnswer(nil, &Answer{Kind: Found, Domains: []link.Domain{hostDomain(5, "go.example.com")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalAnswer(ab, &Question{Frontier: true}, &a); err == nil {
		t.Error("an answer with domains to a question without hosts decoded")
	}
}
