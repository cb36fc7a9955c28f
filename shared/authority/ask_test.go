package authority

import (
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
	f.Fuzz(func(t *testing.T, b []byte) {
		var gq Question
		if err := UnmarshalQuestion(b, &gq); err == nil {
			if _, err := MarshalQuestion(nil, &gq); err != nil {
				t.Fatalf("decoded question %+v does not encode: %v", gq, err)
			}
		}
		var a Answer
		if err := UnmarshalAnswer(b, &q, &a); err == nil {
			if _, err := MarshalAnswer(nil, &a); err != nil {
				t.Fatalf("decoded answer %+v does not encode: %v", a, err)
			}
		}
	})
}
