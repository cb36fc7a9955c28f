package clicks

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func TestBatchRoundTrip(t *testing.T) {
	src := Source{Edge: "fra-1", Boot: "0123456789abcdef", Offered: 10, Dropped: 2}
	want := []Click{
		{Code: "00000A", At: 1, Status: 302, Device: DeviceMobile, Referrer: "t.co"},
		{Domain: 7, Code: "00000A", At: 1, Status: 302, Device: DeviceMobile, Referrer: "t.co", Country: [2]byte{'D', 'E'},
			Browser: BrowserSafari, OS: OSIOS, Visitor: 0x0123456789abcdef, Rule: 3},
		{Domain: 300, Code: "custom-code_1", At: 1893456000000, Status: 301, Device: DeviceDesktop, Bot: true, Browser: BrowserOther, OS: OSOther},
		{Domain: link.MaxDomainID, Code: "zzzzzz", At: -5, Status: 308, Device: DeviceTV, Referrer: "news.ycombinator.com",
			Country: [2]byte{'Z', 'Z'}, Browser: numBrowsers - 1, OS: numOSes - 1, Visitor: 1<<64 - 1, Rule: 255},
	}
	b := AppendHeader(nil, src, len(want))
	for _, c := range want {
		b = AppendClick(b, c.View())
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Batch{Source: src, Clicks: want}, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	one := func(c ClickView) []byte { return AppendClick(AppendHeader(nil, src, 1), c) }
	ok := ClickView{Code: []byte("00000A"), At: 1, Status: 302, Device: DeviceMobile, Country: [2]byte{'F', 'R'}, Browser: BrowserChrome, OS: OSAndroid}
	if _, err := Decode(one(ok)); err != nil {
		t.Fatalf("valid click: %v", err)
	}
	bad := map[string][]byte{
		"nil": nil, "header only": {formatClicks}, "cut": b[:len(b)-1], "trailing": append(append([]byte{}, b...), 0), "format 9": {9, 0},
	}
	for name, mod := range map[string]func(*ClickView){
		"domain past max":    func(c *ClickView) { c.Domain = link.MaxDomainID + 1 },
		"lower-case country": func(c *ClickView) { c.Country = [2]byte{'f', 'r'} },
		"half a country":     func(c *ClickView) { c.Country = [2]byte{'F', 0} },
		"digit country":      func(c *ClickView) { c.Country = [2]byte{'1', 'R'} },
		"browser past enum":  func(c *ClickView) { c.Browser = numBrowsers },
		"os past enum":       func(c *ClickView) { c.OS = numOSes },
		"device past enum":   func(c *ClickView) { c.Device = numDevices },
		"status 600":         func(c *ClickView) { c.Status = 600 },
		"empty code":         func(c *ClickView) { c.Code = nil },
	} {
		c := ok
		mod(&c)
		bad[name] = one(c)
	}
	for name, m := range bad {
		var v View
		if _, err := Decode(m); err == nil {
			t.Errorf("%s: Decode(%q) succeeded", name, m)
		} else if DecodeView(m, &v) == nil || len(v.Clicks) != 0 {
			t.Errorf("%s: DecodeView succeeded or kept clicks", name)
		}
	}
}

// appendV4 is a click batch as edges encoded it from issue 20 to 22
// (format 4): a domain per click, nothing of format 5's fields.
func appendV4(src Source, cs []Click) []byte {
	str := func(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }
	b := str(str([]byte{formatClicksV4}, src.Edge), src.Boot)
	b = binary.AppendUvarint(binary.AppendUvarint(b, src.Offered), src.Dropped)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(binary.AppendVarint(b, c.At), uint64(c.Status))
		flags := byte(c.Device)
		if c.Bot {
			flags |= botFlag
		}
		b = binary.AppendUvarint(str(append(b, flags), c.Referrer), uint64(c.Domain))
		b = str(b, c.Code)
	}
	return b
}

// TestDecodesFormat4: batches edges published before issue 22 decode whole
// (still in the stream after an upgrade, or from edges not yet upgraded):
// no country, browser, OS or visitor (all unknown), rule 0.
func TestDecodesFormat4(t *testing.T) {
	src := Source{Edge: "fra-1", Boot: "b", Offered: 3, Dropped: 1}
	want := []Click{
		{Domain: 9, Code: "00000A", At: 1893456000000, Status: 302, Device: DeviceMobile, Referrer: "t.co"},
		{Code: "custom-code_1", At: 2, Status: 301, Device: DeviceDesktop, Bot: true},
	}
	b := appendV4(src, want)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Batch{Source: src, Clicks: want}, got); d != "" {
		t.Fatalf("format 4 (-want +got):\n%s", d)
	}
	for _, c := range got.Clicks {
		if c.Browser.String() != "unknown" || c.OS.String() != "unknown" || c.Country != [2]byte{} || c.Visitor != 0 {
			t.Fatalf("format-4 click %+v carries format 5's fields", c)
		}
	}
	// A format-4 batch's clicks are shorter than format 5's: a count that
	// fits only the shorter ones is still refused past the message's end.
	if _, err := Decode(b[:len(b)-1]); err == nil {
		t.Fatal("a cut format-4 batch decoded")
	}
}

// appendV2 is a click batch as edges encoded it before domains (format 2):
// the same fields, no domain.
func appendV2(src Source, cs []Click) []byte {
	str := func(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }
	b := str(str([]byte{formatClicksV2}, src.Edge), src.Boot)
	b = binary.AppendUvarint(binary.AppendUvarint(b, src.Offered), src.Dropped)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(binary.AppendVarint(b, c.At), uint64(c.Status))
		flags := byte(c.Device)
		if c.Bot {
			flags |= botFlag
		}
		b = str(str(append(b, flags), c.Referrer), c.Code)
	}
	return b
}

// TestDecodesFormat2: batches edges published before domains are still in
// the stream after an upgrade (and come from edges not yet upgraded); they
// decode whole, every click on the platform's domain.
func TestDecodesFormat2(t *testing.T) {
	src := Source{Edge: "fra-1", Boot: "b", Offered: 3, Dropped: 1}
	want := []Click{
		{Code: "00000A", At: 1893456000000, Status: 302, Device: DeviceMobile, Referrer: "t.co"},
		{Code: "custom-code_1", At: 2, Status: 301, Device: DeviceDesktop, Bot: true},
	}
	got, err := Decode(appendV2(src, want))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Batch{Source: src, Clicks: want}, got); d != "" {
		t.Fatalf("format 2 (-want +got):\n%s", d)
	}
	for _, c := range got.Clicks {
		if c.Domain != link.DefaultDomain {
			t.Fatalf("format-2 click %+v not on the default domain", c)
		}
	}
}

// TestDecodeViewAliasesAndReuses: DecodeView reads what Decode reads, with
// the clicks' bytes aliasing the message, and decodes the next message into
// the same storage without allocating for the clicks; a bad message leaves
// the view empty.
func TestDecodeViewAliasesAndReuses(t *testing.T) {
	src := Source{Edge: "fra-1", Boot: "0123456789abcdef", Offered: 10, Dropped: 2}
	b := AppendHeader(nil, src, 100)
	for i := range 100 {
		b = AppendClick(b, ClickView{Domain: link.DomainID(i % 3), Code: []byte("00000A"), At: int64(i), Status: 302, Device: DeviceMobile,
			Bot: i%2 == 0, Referrer: []byte("t.co"), Country: [2]byte{'U', 'S'}, Browser: BrowserChrome, OS: OSAndroid, Visitor: uint64(i) * 0x9e3779b97f4a7c15, Rule: uint8(i % 2)})
	}
	want, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var v View
	if err := DecodeView(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Source != src || len(v.Clicks) != 100 || v.Latency != nil {
		t.Fatalf("view %+v", v.Source)
	}
	for i, c := range v.Clicks {
		w := want.Clicks[i]
		if c.Domain != w.Domain || string(c.Code) != w.Code || string(c.Referrer) != w.Referrer || c.At != w.At || c.Status != w.Status || c.Device != w.Device || c.Bot != w.Bot ||
			c.Country != w.Country || c.Browser != w.Browser || c.OS != w.OS || c.Visitor != w.Visitor || c.Rule != w.Rule || w.Visitor != uint64(i)*0x9e3779b97f4a7c15 {
			t.Fatalf("click %d: view %+v, Decode %+v", i, c, w)
		}
	}
	// The view's bytes are the message's own.
	if &v.Clicks[99].Code[0] != &b[len(b)-6-13] {
		t.Fatal("the last click's code does not alias the message")
	}
	// Edge and boot names are copied: two allocations a message, none per click.
	if n := testing.AllocsPerRun(20, func() { _ = DecodeView(b, &v) }); n > 2 {
		t.Fatalf("DecodeView allocates %.0f times a message; want at most 2 (edge and boot)", n)
	}
	if err := DecodeView(b[:len(b)-1], &v); err == nil || len(v.Clicks) != 0 || v.Source != (Source{}) {
		t.Fatalf("truncated message: %v, view %+v with %d clicks; want an error and an empty view", err, v.Source, len(v.Clicks))
	}
}

// TestDecodesFormat1: batches the first edge release published are still in
// the stream after an upgrade and must still count.
func TestDecodesFormat1(t *testing.T) {
	b := []byte{formatClicksV1, 1, 84, 6, '0', '0', '0', '0', '0', 'A'}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Click{{Code: "00000A", At: 42}}; !cmp.Equal(got.Clicks, want) {
		t.Fatalf("got %+v, want %+v", got.Clicks, want)
	}
}

func TestLatencyRoundTrip(t *testing.T) {
	var h Histogram
	h[Bucket(150)] = 7
	h[Bucket(uint64(3*time.Millisecond))] = 2
	src := Source{Edge: "e", Boot: "b", Offered: 1}
	got, err := Decode(AppendLatency(nil, src, 1234, &h))
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != src || got.At != 1234 || got.Latency == nil || *got.Latency != h || got.Clicks != nil {
		t.Fatalf("got %+v", got)
	}
}

func TestBuckets(t *testing.T) {
	prev := -1
	for _, v := range []uint64{0, 1, 15, 16, 31, 32, 33, 63, 64, 100, 1000, 1 << 20, 1<<40 + 12345, 1<<64 - 1} {
		i := Bucket(v)
		lo, hi := BucketBounds(i)
		if v < lo || v > hi || i < prev || i >= Buckets {
			t.Errorf("Bucket(%d) = %d with bounds [%d, %d]", v, i, lo, hi)
		}
		if v >= 32 && float64(hi-lo) > float64(lo)/16 {
			t.Errorf("bucket %d of %d is [%d, %d]: wider than 1/16", i, v, lo, hi)
		}
		prev = i
	}
	// Buckets tile the range: each starts right after the previous ends.
	for i := 1; i < Buckets; i++ {
		_, prevHi := BucketBounds(i - 1)
		lo, _ := BucketBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d; bucket %d ends at %d", i, lo, i-1, prevHi)
		}
	}
}

func TestQuantile(t *testing.T) {
	var h Histogram
	for v := uint64(1); v <= 1000; v++ {
		h[Bucket(v*1000)]++ // 1µs … 1ms, uniform
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.95, 950 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.Quantile(tt.q)
		if got < tt.want || float64(got) > float64(tt.want)*1.07 {
			t.Errorf("Quantile(%v) = %v; want %v within +6.25%%", tt.q, got, tt.want)
		}
	}
	var empty Histogram
	if got := empty.Quantile(0.99); got != 0 {
		t.Errorf("empty Quantile = %v", got)
	}
}

func FuzzDecode(f *testing.F) {
	src := Source{Edge: "e1", Boot: "b", Offered: 3, Dropped: 1}
	b := AppendHeader(nil, src, 1)
	f.Add(AppendClick(b, ClickView{Domain: 9, Code: []byte("00000A"), At: 42, Status: 302, Device: DeviceMobile, Bot: true, Referrer: []byte("t.co"),
		Country: [2]byte{'N', 'L'}, Browser: BrowserFirefox, OS: OSLinux, Visitor: 77, Rule: 1}))
	var h Histogram
	h[3], h[900] = 1, 2
	f.Add(AppendLatency(nil, src, 7, &h))
	f.Add([]byte{formatClicksV1, 1, 84, 6, '0', '0', '0', '0', '0', 'A'})
	f.Add(appendV2(src, []Click{{Code: "00000A", At: 42, Status: 302, Device: DeviceMobile, Referrer: "t.co"}}))
	f.Add(appendV4(src, []Click{{Domain: 3, Code: "00000A", At: 42, Status: 302, Device: DeviceMobile, Referrer: "t.co"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		var out []byte
		switch {
		case m.Latency != nil:
			out = AppendLatency(nil, m.Source, m.At, m.Latency)
		default:
			out = AppendHeader(nil, m.Source, len(m.Clicks))
			for _, c := range m.Clicks {
				st := c.Status
				if st == 0 {
					st = 302 // format 1 carried none
				}
				v := c.View()
				v.Status = st
				out = AppendClick(out, v)
			}
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", out, err)
		}
		if b[0] == formatClicksV1 {
			for i := range again.Clicks {
				again.Clicks[i].Status = 0
			}
		}
		if !cmp.Equal(again, m) {
			t.Fatalf("re-decoding %q gave %+v; want %+v", out, again, m)
		}
	})
}
