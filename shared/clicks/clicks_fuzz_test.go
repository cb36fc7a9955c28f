package clicks

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

// FuzzEncode: a batch the edge encodes decodes on control to the same
// clicks, with only the documented cuts (edge name, boot id and referrer
// truncated to their limits); a click with a code that cannot name a link,
// a domain past link.MaxDomainID, a status outside 100-599, an unknown
// device, browser or OS, or a country other than two upper-case letters
// or zero makes the whole batch an error, never a half-read one. (The
// encoder keeps the device's low four bits: ParseUserAgent never yields
// more.) The domain comes from n's high bits, so the corpus kept from
// before domains still runs; the country is country's two bytes.
func FuzzEncode(f *testing.F) {
	f.Add("e1", "boot", uint64(3), uint64(1), "00000A", int64(42), uint16(302), byte(DeviceMobile), true, "t.co", 2,
		uint16('D')<<8|'E', byte(BrowserChrome), byte(OSAndroid), uint64(1234567), byte(0))
	f.Add("", "", uint64(0), uint64(0), "custom-code_1", int64(-5), uint16(301), byte(DeviceTV), false, "", 1,
		uint16(0), byte(0), byte(0), uint64(0), byte(255))
	f.Add("edge\x00name", "b", uint64(1<<63), uint64(0), "../../x", int64(0), uint16(302), byte(0), false, "evil.com\r\n", 1,
		uint16('x')<<8|'x', byte(numBrowsers), byte(numOSes), uint64(1<<64-1), byte(7))
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(0), uint16(99), byte(0), false, "", 1,
		uint16('U')<<8|'S', byte(BrowserSafari), byte(OSIOS), uint64(1), byte(1))
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(7), uint16(302), byte(0), false, "", 5<<7|2,
		uint16('Z')<<8, byte(BrowserInApp), byte(OSIPadOS), uint64(9), byte(2))
	f.Add("e", "b", uint64(1), uint64(1), "00000A", int64(7), uint16(302), byte(0), false, "", -1,
		uint16('A')<<8|'Z', byte(numBrowsers-1), byte(numOSes-1), uint64(9), byte(2))
	f.Fuzz(func(t *testing.T, edge, boot string, offered, dropped uint64, code string, at int64, status uint16,
		device byte, bot bool, referrer string, n int, country uint16, browser, os byte, visitor uint64, rule byte) {
		d := link.DomainID(uint32(n) >> 7) // up to 2^25-1: half of them out of range
		n = 1 + (n&0x7fffffff)%4
		cc := [2]byte{byte(country >> 8), byte(country)}
		src := Source{Edge: edge, Boot: boot, Offered: offered, Dropped: dropped}
		b := AppendHeader(nil, src, n)
		for range n {
			b = AppendClick(b, ClickView{Domain: d, Code: []byte(code), At: at, Status: status, Device: Device(device), Bot: bot,
				Referrer: []byte(referrer), Country: cc, Browser: Browser(browser), OS: OS(os), Visitor: visitor, Rule: rule})
		}
		got, err := Decode(b)
		var v View
		if verr := DecodeView(b, &v); (verr == nil) != (err == nil) || len(v.Clicks) != len(got.Clicks) || v.Source != got.Source {
			t.Fatalf("DecodeView (%v, %d clicks) disagrees with Decode (%v, %d clicks)", verr, len(v.Clicks), err, len(got.Clicks))
		}
		valid := link.ValidCodeSyntax(code) && d <= link.MaxDomainID && status >= 100 && status <= 599 && Device(device&deviceMask) < numDevices &&
			ValidCountry(cc) && Browser(browser) < numBrowsers && OS(os) < numOSes
		if !valid {
			if err == nil {
				t.Fatalf("batch with domain %d code %q status %d device %d country %q browser %d os %d decoded: %+v", d, code, status, device, cc, browser, os, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid batch (domain %d code %q status %d device %d country %q browser %d os %d) does not decode: %v", d, code, status, device, cc, browser, os, err)
		}
		want := Batch{Source: Source{Edge: cut(edge, MaxEdgeLen), Boot: cut(boot, MaxBootLen), Offered: offered, Dropped: dropped}}
		for range n {
			want.Clicks = append(want.Clicks, Click{Domain: d, Code: code, At: at, Status: status, Device: Device(device & deviceMask), Bot: bot,
				Referrer: cut(referrer, MaxReferrerLen), Country: cc, Browser: Browser(browser), OS: OS(os), Visitor: visitor, Rule: rule})
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
