package authority

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

func testExtras(t *testing.T) string {
	t.Helper()
	b, err := link.AppendExtras(nil, &link.Extras{Rules: []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"}},
		PasswordHash: testHash, MaxClicks: 9})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAskExtras: a question that reads extras says so in its flags (the
// rest byte for byte as before); its answer carries each found link's
// extras, on any domain, with hosts too; a question that does not read
// them refuses an answer that has them, so an edge never serves such a
// link without them.
func TestAskExtras(t *testing.T) {
	x := testExtras(t)
	plain := Question{Frontier: true, Codes: []string{"00000A", "spring-sale"}}
	with := plain
	with.Extras = true
	pb, _ := MarshalQuestion(nil, &plain)
	wb, err := MarshalQuestion(nil, &with)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(pb) != questionFormat2 || wb[1] != pb[1]|flagExtras || !bytes.Equal(wb[2:], pb[2:]) || wb[0] != pb[0] {
		t.Errorf("a question reading extras is %x; want %x with flag bit 1", wb, pb)
	}
	var gotQ Question
	if err := UnmarshalQuestion(wb, &gotQ); err != nil || !cmp.Equal(gotQ, with) {
		t.Fatalf("UnmarshalQuestion = %+v, %v", gotQ, err)
	}
	for _, q := range []Question{
		{Codes: []string{"00000A", "spring-sale", "00000B"}, Extras: true},
		{Codes: []string{"00000A", "spring-sale", "00000B"}, Domains: []link.DomainID{3, 3, 0}, Extras: true},
		{Codes: []string{"00000A", "spring-sale", "00000B"}, Domains: []link.DomainID{3, 3, 0}, Hosts: []string{"go.example.com"}, Extras: true},
	} {
		a := Answer{Kind: Found, Version: 40, Replies: []Reply{
			{Kind: Found, Version: 7, Domain: q.Domain(0), Code: "00000A", URL: "https://a.example/", RedirectType: 302, Status: link.Active, Extras: x},
			{Kind: Found, Version: 8, Domain: q.Domain(1), Code: "spring-sale", URL: "https://b.example/", RedirectType: 301, Status: link.Active},
			{Kind: NotFound},
		}}
		if len(q.Hosts) > 0 {
			a.Domains = []link.Domain{{ID: 3, Host: "go.example.com", CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive, Version: 9}}
		}
		b, err := MarshalAnswer(nil, &a)
		if err != nil {
			t.Fatal(err)
		}
		var got Answer
		if err := UnmarshalAnswer(b, &q, &got); err != nil {
			t.Fatalf("UnmarshalAnswer: %v", err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("answer round trip (-want +got):\n%s", diff)
		}
		// The same answer to a question that does not read extras.
		q.Extras = false
		if err := UnmarshalAnswer(b, &q, &got); err == nil {
			t.Errorf("an edge that does not read extras took an answer with them: %+v", got)
		}
		// Without extras, the answer is what it was before them.
		a.Replies[0].Extras = ""
		nb, _ := MarshalAnswer(nil, &a)
		if err := UnmarshalAnswer(nb, &q, &got); err != nil {
			t.Errorf("a plain answer to a question without extras: %v", err)
		}
		// Every cut of the answer with extras is refused.
		q.Extras = true
		for n := range len(b) {
			if err := UnmarshalAnswer(b[:n], &q, &got); err == nil {
				t.Fatalf("an answer cut to %d of %d bytes was taken", n, len(b))
			}
		}
	}
	// Malformed extras in a reply are refused both ways.
	bad := Answer{Kind: Found, Version: 1, Replies: []Reply{{Kind: Found, Version: 1, Code: "00000A", URL: "https://a.example/", RedirectType: 302,
		Status: link.Active, Extras: "\x00"}}}
	if _, err := MarshalAnswer(nil, &bad); err == nil {
		t.Error("MarshalAnswer took malformed extras")
	}
	if _, err := MarshalAnswer(nil, &Answer{Kind: Found, Version: 1, Replies: []Reply{{Kind: NotFound, Extras: x}}}); err == nil {
		t.Error("MarshalAnswer took extras on a NotFound reply")
	}
}

// TestSingleCodeRefusesExtras: the single-code protocol predates extras
// and cannot carry them, so a link with extras is never sent on it.
func TestSingleCodeRefusesExtras(t *testing.T) {
	r := Reply{Kind: Found, Version: 3, Code: "00000A", URL: "https://a.example/", RedirectType: 302, Status: link.Active, Extras: testExtras(t)}
	if b, err := Marshal(nil, &r); err == nil {
		t.Errorf("Marshal of a reply with extras = %x", b)
	}
}
