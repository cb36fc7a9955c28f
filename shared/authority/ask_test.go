package authority

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func TestAskRoundTrip(t *testing.T) {
	q := Question{Frontier: true, Codes: []string{"00000A", "my-custom_code", "00000a"}}
	qb, err := MarshalQuestion(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	var gotQ Question
	if err := UnmarshalQuestion(qb, &gotQ); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, gotQ); diff != "" {
		t.Errorf("question round trip (-want +got):\n%s", diff)
	}
	a := Answer{Kind: Found, Version: 1 << 40, PromiseMillis: 1000,
		Frontiers: []Frontier{{Namespace: "default", Start: 1, End: 56800235584, Next: 200001, Ceiling: 600001}},
		Replies: []Reply{
			{Kind: Found, Version: 7, Code: "00000A", URL: "https://example.com/a?b=c", RedirectType: 302, Status: link.Active, ExpiresAt: 1893456000000},
			{Kind: NotFound},
			{Kind: Found, Version: 9, Code: "00000a", Status: link.Deleted},
		}}
	ab, err := MarshalAnswer(nil, &a)
	if err != nil {
		t.Fatal(err)
	}
	var got Answer
	if err := UnmarshalAnswer(ab, &q, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("answer round trip (-want +got):\n%s", diff)
	}
	un := Answer{Kind: Unavailable}
	ub, err := MarshalAnswer(nil, &un)
	if err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalAnswer(ub, &q, &got); err != nil || got.Kind != Unavailable {
		t.Fatalf("unavailable answer: %+v, %v", got, err)
	}
}

func TestAskRejects(t *testing.T) {
	many := make([]string, MaxCodes+1)
	for i := range many {
		many[i] = "00000A"
	}
	for _, q := range []Question{{}, {Codes: many}, {Codes: []string{"a"}}, {Codes: []string{"bad code"}}} {
		if _, err := MarshalQuestion(nil, &q); err == nil {
			t.Errorf("MarshalQuestion(%d codes, %q...) succeeded; want an error", len(q.Codes), strings.Join(q.Codes[:min(2, len(q.Codes))], ","))
		}
	}
	for _, b := range [][]byte{nil, {askFormat}, {askFormat, 0, 0}, {askFormat, 2, 0}, {1, 1, 0}, {askFormat, 0, 1, 6, '0'}, {askFormat, 1, 0, 0}} {
		var q Question
		if err := UnmarshalQuestion(b, &q); err == nil {
			t.Errorf("UnmarshalQuestion(%q) = %+v; want an error", b, q)
		}
	}
	q := Question{Codes: []string{"00000A"}}
	for _, a := range []Answer{
		{Kind: 'Z'},
		{Kind: Unavailable, PromiseMillis: 5},
		{Kind: Found, Frontiers: []Frontier{{Namespace: "default", Start: 1, End: 10, Next: 5, Ceiling: 4}}},
		{Kind: Found, Frontiers: []Frontier{{Namespace: "default", Start: 1, End: 10, Next: 5, Ceiling: 11}}},
		{Kind: Found, Frontiers: []Frontier{{Start: 1, End: 10, Next: 5, Ceiling: 6}}},
		{Kind: Found, Replies: []Reply{{Kind: NotFound, Version: 3}}},
		{Kind: Found, Replies: []Reply{{Kind: Found, Version: 0, Status: link.Active, URL: "https://x", RedirectType: 302}}},
		{Kind: Found, Replies: []Reply{{Kind: Found, Version: 1, Status: link.Active, RedirectType: 302}}},
	} {
		if _, err := MarshalAnswer(nil, &a); err == nil {
			t.Errorf("MarshalAnswer(%+v) succeeded; want an error", a)
		}
	}
	// An answer that does not answer the question it is read against.
	two, _ := MarshalAnswer(nil, &Answer{Kind: Found, Replies: []Reply{{Kind: NotFound}, {Kind: NotFound}}})
	withFrontier, _ := MarshalAnswer(nil, &Answer{Kind: Found, Replies: []Reply{{Kind: NotFound}},
		Frontiers: []Frontier{{Namespace: "d", Start: 1, End: 10, Next: 2, Ceiling: 3}}})
	for _, b := range [][]byte{two, withFrontier, append(append([]byte{}, two...), 0)} {
		var a Answer
		if err := UnmarshalAnswer(b, &q, &a); err == nil {
			t.Errorf("UnmarshalAnswer(%q) to a one-code question without frontier = %+v; want an error", b, a)
		}
	}
}

// FuzzUnmarshalAsk: nothing an edge or a control receives can crash it or
// decode into something its encoder would refuse.
func FuzzUnmarshalAsk(f *testing.F) {
	q := Question{Frontier: true, Codes: []string{"00000A", "spring-sale"}}
	qb, _ := MarshalQuestion(nil, &q)
	ab, _ := MarshalAnswer(nil, &Answer{Kind: Found, Version: 3, PromiseMillis: 1000,
		Frontiers: []Frontier{{Namespace: "default", Start: 1, End: 100, Next: 10, Ceiling: 20}},
		Replies:   []Reply{{Kind: Found, Version: 2, Code: "00000A", URL: "https://e.com/", RedirectType: 302, Status: link.Active}, {Kind: NotFound}}})
	f.Add(qb)
	f.Add(ab)
	q3 := Question{Codes: []string{"00000A", "spring-sale"}, Domains: []link.DomainID{4, 0}}
	q3b, _ := MarshalQuestion(nil, &q3)
	a3b, _ := MarshalAnswer(nil, &Answer{Kind: Found, Version: 3,
		Replies: []Reply{{Kind: Found, Version: 2, Domain: 4, Code: "00000A", URL: "https://e.com/", RedirectType: 302, Status: link.Active}, {Kind: NotFound}}})
	f.Add(q3b)
	f.Add(a3b)
	q4 := Question{Codes: []string{"00000A"}, Domains: []link.DomainID{4}, Hosts: []string{"go.example.com", "x.example"}}
	q4b, _ := MarshalQuestion(nil, &q4)
	a4b, _ := MarshalAnswer(nil, &Answer{Kind: Found, Version: 3, Replies: []Reply{{Kind: NotFound}},
		Domains: []link.Domain{{ID: 4, Host: "go.example.com", CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive, Version: 9}}})
	f.Add(q4b)
	f.Add(a4b)
	qx := Question{Codes: []string{"00000A", "00000B"}, Extras: true}
	qxb, _ := MarshalQuestion(nil, &qx)
	axb, _ := MarshalAnswer(nil, &Answer{Kind: Found, Version: 3, Replies: []Reply{
		{Kind: Found, Version: 2, Code: "00000A", URL: "https://e.com/", RedirectType: 302, Status: link.Active, Extras: "\x01\x05"},
		{Kind: NotFound}}})
	f.Add(qxb)
	f.Add(axb)
	f.Fuzz(func(t *testing.T, b []byte) {
		var gq Question
		if err := UnmarshalQuestion(b, &gq); err == nil {
			if _, err := MarshalQuestion(nil, &gq); err != nil {
				t.Fatalf("decoded question %+v does not encode: %v", gq, err)
			}
		}
		for _, q := range []*Question{&q, &q3, &q4, &qx} {
			var a Answer
			if err := UnmarshalAnswer(b, q, &a); err == nil {
				if _, err := MarshalAnswer(nil, &a); err != nil {
					t.Fatalf("decoded answer %+v does not encode: %v", a, err)
				}
			}
		}
	})
}

// Written by the release before domains (format 2): a question an edge of
// that release sends, and the answer a control of that release gives it.
const (
	questionFormat2 = "020102063030303030410b737072696e672d73616c65"
	answerFormat2   = "024603e807010764656661756c7401640a1402460261ae02000e68747470733a2f2f652e636f6d2f4e"
)

// TestAskFormat2: questions and answers about the platform's domain only
// are format 2 both ways, byte for byte what the release before domains
// wrote, so either side may be upgraded first.
func TestAskFormat2(t *testing.T) {
	oldQ, _ := hex.DecodeString(questionFormat2)
	oldA, _ := hex.DecodeString(answerFormat2)
	var q Question
	if err := UnmarshalQuestion(oldQ, &q); err != nil {
		t.Fatalf("format 2 question: %v", err)
	}
	want := Question{Frontier: true, Codes: []string{"00000A", "spring-sale"}}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("format 2 question (-want +got):\n%s", diff)
	}
	if q.Domain(0) != link.DefaultDomain || q.Domain(1) != link.DefaultDomain {
		t.Errorf("format 2 question's domains %d, %d; want the default", q.Domain(0), q.Domain(1))
	}
	for _, domains := range [][]link.DomainID{nil, {0, 0}} {
		q := Question{Frontier: true, Codes: want.Codes, Domains: domains}
		b, err := MarshalQuestion(nil, &q)
		if err != nil || !bytes.Equal(b, oldQ) {
			t.Errorf("MarshalQuestion(domains %v) = %x, %v; want format 2 %x", domains, b, err, oldQ)
		}
	}
	var a Answer
	if err := UnmarshalAnswer(oldA, &want, &a); err != nil {
		t.Fatalf("format 2 answer: %v", err)
	}
	if a.Replies[0].Kind != Found || a.Replies[0].Domain != link.DefaultDomain || a.Replies[0].Code != "00000A" {
		t.Errorf("format 2 answer's reply %+v", a.Replies[0])
	}
	if b, err := MarshalAnswer(nil, &a); err != nil || !bytes.Equal(b, oldA) {
		t.Errorf("MarshalAnswer(%+v) = %x, %v; want format 2 %x", a, b, err, oldA)
	}
}

// TestAskDomains: a question about codes on several domains carries each
// code's domain; each found link is answered on the domain asked, and an
// answer with a link of another domain than the one asked is refused.
func TestAskDomains(t *testing.T) {
	q := Question{Codes: []string{"00000A", "00000A", "spring-sale", "00000B"}, Domains: []link.DomainID{0, 5, link.MaxDomainID, 5}}
	qb, err := MarshalQuestion(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	if qb[0] != askFormat {
		t.Fatalf("question on other domains in format %d; want %d", qb[0], askFormat)
	}
	var gotQ Question
	if err := UnmarshalQuestion(qb, &gotQ); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(q, gotQ); diff != "" {
		t.Errorf("question round trip (-want +got):\n%s", diff)
	}
	a := Answer{Kind: Found, Version: 40, Replies: []Reply{
		{Kind: Found, Version: 7, Code: "00000A", URL: "https://platform.example/", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 9, Domain: 5, Code: "00000A", URL: "https://acme.example/", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 11, Domain: link.MaxDomainID, Code: "spring-sale", Status: link.Deleted},
		{Kind: NotFound},
	}}
	ab, err := MarshalAnswer(nil, &a)
	if err != nil {
		t.Fatal(err)
	}
	var got Answer
	if err := UnmarshalAnswer(ab, &q, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("answer round trip (-want +got):\n%s", diff)
	}
	// The same answer read against a question about other domains: the
	// links are not those codes'.
	for _, other := range [][]link.DomainID{{0, 6, link.MaxDomainID, 5}, nil, {0, 5, 0, 5}} {
		q2 := Question{Codes: q.Codes, Domains: other}
		if err := UnmarshalAnswer(ab, &q2, &got); err == nil {
			t.Errorf("an answer about domains %v read as one about %v: %+v", q.Domains, other, got)
		}
	}
	// A format 2 answer (no domains) with a found link cannot answer a
	// code on another domain.
	two, err := MarshalAnswer(nil, &Answer{Kind: Found, Replies: []Reply{{Kind: Found, Version: 1, Code: "00000A", Status: link.Deleted}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalAnswer(two, &Question{Codes: []string{"00000A"}, Domains: []link.DomainID{5}}, &got); err == nil {
		t.Errorf("a format 2 found reply taken for domain 5: %+v", got)
	}
}

func TestAskDomainsRejects(t *testing.T) {
	for _, q := range []Question{
		{Codes: []string{"00000A", "00000B"}, Domains: []link.DomainID{3}},
		{Codes: []string{"00000A"}, Domains: []link.DomainID{3, 4}},
		{Frontier: true, Domains: []link.DomainID{3}},
		{Codes: []string{"00000A"}, Domains: []link.DomainID{link.MaxDomainID + 1}},
	} {
		if b, err := MarshalQuestion(nil, &q); err == nil {
			t.Errorf("MarshalQuestion(%+v) = %x; want an error", q, b)
		}
	}
	tooLarge := binary.AppendUvarint([]byte{askFormat, 0, 1}, uint64(link.MaxDomainID)+1)
	tooLarge = append(tooLarge, 6, '0', '0', '0', '0', '0', 'A')
	for _, b := range [][]byte{tooLarge, {askFormat, 0, 1, 5}, {askFormat, 0, 1, 0x80}} {
		var q Question
		if err := UnmarshalQuestion(b, &q); err == nil {
			t.Errorf("UnmarshalQuestion(%x) = %+v; want an error", b, q)
		} else if q.Codes != nil || q.Domains != nil {
			t.Errorf("UnmarshalQuestion(%x) failed but left %+v", b, q)
		}
	}
	for _, a := range []Answer{
		{Kind: Found, Replies: []Reply{{Kind: NotFound, Domain: 3}}},
		{Kind: Found, Replies: []Reply{{Kind: Found, Version: 1, Domain: link.MaxDomainID + 1, Code: "00000A", Status: link.Deleted}}},
	} {
		if _, err := MarshalAnswer(nil, &a); err == nil {
			t.Errorf("MarshalAnswer(%+v) succeeded; want an error", a)
		}
	}
}
