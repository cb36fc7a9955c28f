package linkevent

import (
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
		if err := Unmarshal(out, &again); err != nil || again != e {
			t.Fatalf("round trip of %s: %+v, %v", b, again, err)
		}
	})
}
