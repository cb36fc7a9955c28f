package authority

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func TestRoundTrip(t *testing.T) {
	for _, r := range []Reply{
		{Kind: Found, Version: 7, Code: "00000A", URL: "https://example.com/a?b=c", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 1 << 40, Code: "my-custom_code", URL: "https://x", RedirectType: 308, Status: link.Active, ExpiresAt: 1893456000000},
		{Kind: Found, Version: 9, Code: "00000a", URL: "https://x", RedirectType: 302, Status: link.Disabled},
		{Kind: Found, Version: 9, Code: "gone01", Status: link.Deleted},
		{Kind: NotFound, Version: 12345},
		{Kind: NotFound},
		{Kind: Unavailable},
	} {
		b, err := Marshal(nil, &r)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", r, err)
		}
		var got Reply
		if err := Unmarshal(b, &got); err != nil {
			t.Fatalf("Unmarshal(Marshal(%+v)): %v", r, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestRejects(t *testing.T) {
	bad := []Reply{
		{Kind: 'Z'},
		{Kind: Found, Version: 0, Code: "00000A", URL: "https://x", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 1, Code: "a", URL: "https://x", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 1, Code: "00000A", RedirectType: 302, Status: link.Active},
		{Kind: Found, Version: 1, Code: "00000A", URL: "https://x", RedirectType: 200, Status: link.Active},
		{Kind: Found, Version: 1, Code: "00000A", URL: "https://x", RedirectType: 302, Status: "weird"},
		{Kind: NotFound, Version: 1, Code: "00000A"},
		// The single-code protocol is the platform domain's only.
		{Kind: Found, Version: 1, Domain: 3, Code: "00000A", URL: "https://x", RedirectType: 302, Status: link.Active},
		{Kind: NotFound, Version: 1, Domain: 3},
	}
	for _, r := range bad {
		if _, err := Marshal(nil, &r); err == nil {
			t.Errorf("Marshal(%+v) succeeded; want an error", r)
		}
	}
	for _, b := range [][]byte{nil, {}, {format}, {2, 'N', 1}, {format, 'N'}, {format, 'N', 1, 0}, {format, 'F', 1, 'a'}} {
		var r Reply
		if err := Unmarshal(b, &r); err == nil {
			t.Errorf("Unmarshal(%q) = %+v; want an error", b, r)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, r := range []Reply{
		{Kind: Found, Version: 7, Code: "00000A", URL: "https://example.com/", RedirectType: 302, Status: link.Active, ExpiresAt: 5},
		{Kind: NotFound, Version: 3},
		{Kind: Unavailable},
	} {
		b, _ := Marshal(nil, &r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Reply
		if err := Unmarshal(b, &r); err != nil {
			return
		}
		// Whatever decodes must encode again to something that decodes to
		// the same reply.
		b2, err := Marshal(nil, &r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		var r2 Reply
		if err := Unmarshal(b2, &r2); err != nil || r2 != r {
			t.Fatalf("re-decode: %+v, %v; want %+v", r2, err, r)
		}
	})
}
