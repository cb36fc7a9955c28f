package authority

import (
	"testing"

	"github.com/edgelink/edgelink/shared/link"
)

// FuzzMarshal: the encoder and the decoder agree on everything the encoder
// accepts, field for field, whatever bytes the code and URL hold (the URL
// is the message's tail, so a code that ends where the URL begins must
// not shift bytes between them); and the encoder refuses what the decoder
// would refuse, so control never sends an edge a reply it drops.
func FuzzMarshal(f *testing.F) {
	f.Add(byte(Found), uint64(7), "00000A", "https://example.com/", uint64(302), byte('a'), int64(5))
	f.Add(byte(Found), uint64(1), "spring-sale", "", uint64(0), byte('x'), int64(0))
	f.Add(byte(Found), uint64(1), "00000A", "00000Ahttps://evil.com", uint64(307), byte('a'), int64(0))
	f.Add(byte(Found), uint64(1), "0000", "\r\nLocation: https://evil.com", uint64(302), byte('d'), int64(-1))
	f.Add(byte(NotFound), uint64(3), "", "", uint64(0), byte(0), int64(0))
	f.Add(byte(Unavailable), uint64(0), "", "", uint64(0), byte(0), int64(0))
	statuses := map[byte]link.Status{'a': link.Active, 'd': link.Disabled, 'x': link.Deleted, 'z': "zombie"}
	f.Fuzz(func(t *testing.T, kind byte, version uint64, code, url string, rt uint64, status byte, exp int64) {
		r := Reply{Kind: Kind(kind), Version: version, Code: code, URL: url, RedirectType: link.RedirectType(rt),
			Status: statuses[status], ExpiresAt: exp}
		b, err := Marshal(nil, &r)
		if err != nil {
			return
		}
		if r.Kind == Found && (!link.ValidCodeSyntax(r.Code) || r.Version == 0 || !r.Status.Valid()) {
			t.Fatalf("Marshal accepted %+v", r)
		}
		var got Reply
		if err := Unmarshal(b, &got); err != nil || got != r {
			t.Fatalf("Marshal(%+v) = %q, which decodes to %+v, %v", r, b, got, err)
		}
	})
}
