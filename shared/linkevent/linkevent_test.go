package linkevent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func TestRoundTrip(t *testing.T) {
	events := []Event{
		{Version: 1, Kind: KindLink, Code: "00000A", URL: "https://example.com/a", RedirectType: 302, Status: link.Active},
		{Version: 2, Kind: KindLink, Code: "00000a", Status: link.Deleted},
		{Version: 3, Kind: KindLink, Code: "summer-sale", URL: "https://example.com/", RedirectType: 307, Status: link.Active, ExpiresAt: 1893456000000},
		{Version: 4, Kind: KindSegment, Namespace: "default", SegStart: 1, SegEnd: 1001, SegState: SegmentOpened},
		{Version: 5, Prev: 4, Kind: KindLink, Domain: 12, Code: "00000A", URL: "https://example.com/b", RedirectType: 302, Status: link.Active},
		// Local set-ups: IP literals, IPv6 without brackets.
		{Version: 7, Kind: KindDomain, Conf: &link.Domain{Host: "::1", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 7}},
		{Version: 8, Kind: KindDomain, Conf: &link.Domain{ID: 1, Host: "127.0.0.1", TenantID: 1, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 8}},
		{Version: 6, Prev: 5, Kind: KindDomain, Conf: &link.Domain{ID: 12, Host: "go.acme.com", TenantID: 4, RootRedirect: "https://acme.com/",
			Robots: "User-agent: *\nDisallow: /x\n", CodeMode: link.CodesFF1, KeyIDs: []string{"k2", "k1"}, Status: link.DomainActive, Version: 6}},
	}
	for _, e := range events {
		b, err := Marshal(&e)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", e, err)
		}
		var got Event
		if err := Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	for _, in := range []string{
		``, `{`, `[]`, `{"v":0,"k":"link","c":"00000A","s":"active","u":"x","t":302}`,
		`{"v":1,"k":"nope"}`,
		`{"v":1,"k":"link","c":"a/b","s":"active","u":"x","t":302}`,
		`{"v":1,"k":"link","c":"00000A","s":"gone"}`,
		`{"v":1,"k":"link","c":"00000A","s":"active","t":302}`,
		`{"v":1,"k":"link","c":"00000A","s":"active","u":"https://x","t":200}`,
		`{"v":1,"k":"segment","ns":"default","ss":10,"se":10,"st":"opened"}`,
		`{"v":-1,"k":"link"}`,
		`{"v":1,"k":"link","d":16777216,"c":"00000A","s":"active","u":"https://x","t":302}`,
		`{"v":1,"k":"domain"}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"Go.acme.com","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com.","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"[::1]","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"0:0::1","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"127.0.0.1:80","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"ff1","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"rot13","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"gone"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"active","version":2}}`,
		`{"v":1,"k":"domain","d":4,"dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":16777216,"host":"go.acme.com","code_mode":"sequential","status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"ff1","key_ids":["k1","k1"],"status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"ff1","key_ids":["-k"],"status":"active"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"active","root_redirect":"ftp://x/"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"active","not_found_redirect":"https://x/\r\nSet-Cookie: a"}}`,
		`{"v":1,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"sequential","status":"active","tenant_id":-1}}`,
	} {
		var e Event
		if err := Unmarshal([]byte(in), &e); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, nil; want an error", in, e)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"v":1,"k":"link","c":"00000A","s":"active","u":"https://x","t":302}`))
	f.Add([]byte(`{"v":4,"k":"segment","ns":"default","ss":1,"se":1001,"st":"sealed"}`))
	f.Add([]byte(`{"v":5,"k":"domain","dc":{"id":3,"host":"go.acme.com","code_mode":"ff1","key_ids":["k1"],"status":"active"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Event
		if err := Unmarshal(b, &e); err != nil {
			return
		}
		// Anything accepted must survive a round trip unchanged.
		out, err := Marshal(&e)
		if err != nil {
			t.Fatalf("accepted %s but cannot marshal it: %v", b, err)
		}
		var again Event
		if err := Unmarshal(out, &again); err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if diff := cmp.Diff(e, again); diff != "" {
			t.Fatalf("round trip of %s (-first +again):\n%s", b, diff)
		}
	})
}

// TestDomainConfVersion: a domain event's configuration is as of the event,
// whether or not its writer said so.
func TestDomainConfVersion(t *testing.T) {
	e := Event{Version: 9, Kind: KindDomain, Conf: &link.Domain{ID: 2, Host: "acme.link", CodeMode: link.CodesSequential, Status: link.DomainActive}}
	b, err := Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	if err := Unmarshal(b, &got); err != nil || got.Conf.Version != 9 {
		t.Fatalf("Unmarshal(%s) = %+v, %v; want the configuration at version 9", b, got.Conf, err)
	}
	var batch Batch
	if err := batch.Add(&e); err != nil {
		t.Fatal(err)
	}
	evs, err := Decode(batch.Bytes(), nil)
	if err != nil || len(evs) != 1 || evs[0].Conf.Version != 9 {
		t.Fatalf("Decode = %+v, %v; want the configuration at version 9", evs, err)
	}
}

// TestErrorsCarryNoLink: what an invalid event says ends up in logs, which
// carry no code and no URL, a redirect's included; a domain's host may be
// named (an operator's setting).
func TestErrorsCarryNoLink(t *testing.T) {
	const secret = "https://secret.example/path-of-a-tenant"
	for _, e := range []Event{
		{Version: 1, Kind: KindLink, Code: "secret/code", URL: secret, RedirectType: 302, Status: link.Active},
		{Version: 1, Kind: KindLink, Code: "secretcode", URL: secret, RedirectType: 999, Status: link.Active},
		{Version: 1, Kind: KindDomain, Conf: &link.Domain{ID: 2, Host: "acme.link", CodeMode: link.CodesSequential, Status: link.DomainActive,
			RootRedirect: secret + " x"}},
		{Version: 1, Kind: KindDomain, Conf: &link.Domain{ID: 2, Host: "acme.link", CodeMode: link.CodesSequential, Status: link.DomainActive,
			NotFoundRedirect: "javascript:" + secret}},
	} {
		_, err := Marshal(&e)
		if err == nil {
			t.Fatalf("Marshal(%+v) succeeded; want an error", e)
		}
		if msg := err.Error(); strings.Contains(msg, "secret") {
			t.Errorf("error %q names the link or its target", msg)
		}
	}
}
