package clicks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

// FuzzEncode: a batch the edge encodes decodes on control to the same
// clicks, with only the documented cuts (edge name, boot id and referrer
// truncated to their limits); a click with a code that cannot name a link,
// a domain past link.MaxDomainID, a status outside 100-599 or an unknown
// device makes the whole batch an error, never a half-read one. (The
// encoder keeps the device's low four bits: Classify never yields more.)
// The domain comes from n's high bits, so the corpus kept from before
// domains still runs.
func FuzzEncode(f *testing.F) {
	f.Add("e1", "boot", uint64(3), uint64(1), "00000A", int64(42), uint16(302), byte(DeviceMobile), true, "t.co", 2)
	f.Add("", "", uint64(0), uint64(0), "custom-code_1", int64(-5), uint16(301), byte(DeviceTV), false, "", 1)
	f.Add("edge\x00name", "b", uint64(1<<63), uint64(0), "../../x", int64(0), uint16(302), byte(0), false, "evil.com\r\n", 1)
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(0), uint16(99), byte(0), false, "", 1)
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(7), uint16(302), byte(0), false, "", 5<<7|2)
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(7), uint16(302), byte(0), false, "", -1)
	f.Fuzz(func(t *testing.T, edge, boot string, offered, dropped uint64, code string, at int64, status uint16,
		device byte, bot bool, referrer string, n int) {
		d := link.DomainID(uint32(n) >> 7) // up to 2^25-1: half of them out of range
		n = 1 + (n&0x7fffffff)%4
		src := Source{Edge: edge, Boot: boot, Offered: offered, Dropped: dropped}
		b := AppendHeader(nil, src, n)
		for range n {
			b = AppendClick(b, d, []byte(code), at, status, Device(device), bot, []byte(referrer))
		}
		got, err := Decode(b)
		var v View
		if verr := DecodeView(b, &v); (verr == nil) != (err == nil) || len(v.Clicks) != len(got.Clicks) || v.Source != got.Source {
			t.Fatalf("DecodeView (%v, %d clicks) disagrees with Decode (%v, %d clicks)", verr, len(v.Clicks), err, len(got.Clicks))
		}
		valid := link.ValidCodeSyntax(code) && d <= link.MaxDomainID && status >= 100 && status <= 599 && Device(device&deviceMask) < numDevices
		if !valid {
			if err == nil {
				t.Fatalf("batch with domain %d code %q status %d device %d decoded: %+v", d, code, status, device, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid batch (domain %d code %q status %d device %d) does not decode: %v", d, code, status, device, err)
		}
		want := Batch{Source: Source{Edge: cut(edge, MaxEdgeLen), Boot: cut(boot, MaxBootLen), Offered: offered, Dropped: dropped}}
		for range n {
			want.Clicks = append(want.Clicks, Click{Domain: d, Code: code, At: at, Status: status, Device: Device(device & deviceMask), Bot: bot, Referrer: cut(referrer, MaxReferrerLen)})
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("decoded batch differs (-want +got):\n%s", d)
		}
	})
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
