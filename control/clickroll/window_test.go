package clickroll

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// message encodes n clicks from edge over codes, spread over two days
// (and three hours) and over domains (a code on several of them), with
// every field of format 5 varied.
func message(edge string, n int, r *rand.Rand, codes, domains int) []byte {
	b := clicks.AppendHeader(nil, clicks.Source{Edge: edge, Boot: "boot", Offered: uint64(n)}, n)
	day := time.Date(2030, 1, 2, 23, 59, 59, 0, time.UTC).UnixMilli()
	refs := []string{"", "t.co", "www.google.com", "m.facebook.com"}
	statuses := []uint16{302, 302, 301, 307, 399}
	countries := [][2]byte{{}, {'U', 'S'}, {'D', 'E'}, {'J', 'P'}, {'Z', 'A'}}
	for range n {
		code := fmt.Sprintf("%06d", r.IntN(codes)) // as generated codes: 6 bytes
		if codes < 100 {
			code = fmt.Sprintf("custom-code-%d", r.IntN(codes)) // longer
		}
		at := day + int64(r.IntN(2000))
		if r.IntN(10) == 0 {
			at -= 3600_000 // an hour before
		}
		b = clicks.AppendClick(b, clicks.ClickView{Domain: link.DomainID(r.IntN(domains)), Code: []byte(code), At: at,
			Status: statuses[r.IntN(len(statuses))], Device: clicks.Device(r.IntN(5)), Bot: r.IntN(4) == 0, Referrer: []byte(refs[r.IntN(len(refs))]),
			Country: countries[r.IntN(len(countries))], Browser: clicks.Browser(r.IntN(len(clicks.BrowserNames()))), OS: clicks.OS(r.IntN(len(clicks.OSNames()))),
			Visitor: uint64(r.IntN(50)), Rule: uint8(r.IntN(3) / 2)})
	}
	return b
}

// TestWindowSumsEveryClick: a window's rollup is exactly what decoding the
// messages and counting each click gives, per link (domain and code) and
// day and per link, day and value, over messages of every click format
// (the older ones on the default domain), short and long codes, two days.
func TestWindowSumsEveryClick(t *testing.T) {
	for _, codes := range []int{40, 1000} {
		t.Run(fmt.Sprint(codes, " codes"), func(t *testing.T) { testWindowSums(t, codes) })
	}
}

func testWindowSums(t *testing.T, codes int) {
	r := rand.New(rand.NewPCG(1, 2))
	msgs := [][]byte{message("e1", 500, r, codes, 3), message("e2", 300, r, codes, 3), message("e1", 1, r, codes, 3),
		{1, 1, 84, 6, '0', '0', '0', '0', '0', '1'}, // format 1: no source, status 0
		// Format 2: no domain.
		{2, 2, 'e', '3', 1, 'b', 2, 0, 2, 84, 0xae, 2, 0, 0, 6, '0', '0', '0', '0', '0', '1', 86, 0xad, 2, 0x81, 4, 't', '.', 'c', 'o', 6, '0', '0', '0', '0', '0', '2'}}
	w := newWindow(7, newValues())
	type key struct {
		domain              link.DomainID
		code, day, dim, val string
	}
	want := map[key][2]int64{}
	visitors := map[key]map[uint64]bool{} // per link and day: the human visitors
	for i, m := range msgs {
		edge := "from-subject"
		if err := w.add(m, edge); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		b, err := clicks.Decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if b.Edge == "" {
			b.Edge = edge
		}
		for _, c := range b.Clicks {
			day := c.Day().Format(time.DateOnly)
			d := c.Domain
			country := string(c.Country[:])
			if c.Country == ([2]byte{}) {
				country = ""
			}
			keys := []key{{d, c.Code, day, "", ""}, {d, c.Code, day, "referrer", c.Referrer}, {d, c.Code, day, "device", c.Device.String()},
				{d, c.Code, day, "status", fmt.Sprint(c.Status)}, {d, c.Code, day, "edge", b.Edge},
				{d, c.Code, day, "browser", c.Browser.String()}, {d, c.Code, day, "os", c.OS.String()}, {d, c.Code, day, "country", country},
				{d, c.Code, day, "hour", time.UnixMilli(c.At).UTC().Truncate(time.Hour).Format(time.RFC3339)}}
			if c.Rule == 0 {
				keys = append(keys, key{d, c.Code, day, "own", ""})
			}
			if !c.Bot && c.Visitor != 0 {
				lk := key{d, c.Code, day, "", ""}
				if visitors[lk] == nil {
					visitors[lk] = map[uint64]bool{}
				}
				visitors[lk][c.Visitor] = true
			}
			for _, k := range keys {
				n := want[k]
				n[0]++
				if c.Bot {
					n[1]++
				}
				want[k] = n
			}
		}
	}
	roll := w.rollup(math.MinInt32)
	got := map[key][2]int64{}
	for _, l := range roll.Links {
		k := key{l.Domain, l.Code, l.Day.Format(time.DateOnly), "", ""}
		if _, dup := got[k]; dup {
			t.Fatalf("link row %v twice", k)
		}
		got[k] = [2]int64{l.Clicks, l.BotClicks}
		if l.OwnClicks != 0 {
			got[key{l.Domain, l.Code, l.Day.Format(time.DateOnly), "own", ""}] = [2]int64{l.OwnClicks, l.OwnBots}
		}
		// The sketch of the link's day holds exactly its human visitors:
		// a sketch made of them has the same registers.
		var want hll.Sketch
		for v := range visitors[k] {
			want.Add(v)
		}
		if (l.Visitors == nil) != (len(visitors[k]) == 0) || l.Visitors != nil && !l.Visitors.Equal(&want) {
			t.Fatalf("link row %v: visitors sketch %v, want one of %d visitors", k, l.Visitors, len(visitors[k]))
		}
	}
	for _, h := range roll.Hours {
		k := key{h.Domain, h.Code, h.Hour.Format(time.DateOnly), "hour", h.Hour.Format(time.RFC3339)}
		if _, dup := got[k]; dup {
			t.Fatalf("hour row %v twice", k)
		}
		got[k] = [2]int64{h.Clicks, h.BotClicks}
	}
	for _, b := range roll.Breakdown {
		k := key{b.Domain, b.Code, b.Day.Format(time.DateOnly), b.Dimension, b.Value}
		if _, dup := got[k]; dup {
			t.Fatalf("breakdown row %v twice", k)
		}
		got[k] = [2]int64{b.Clicks, b.BotClicks}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("rollup differs from the clicks (-want +got):\n%s", d)
	}
	if w.clicks != 804 || roll.Prev != 7 {
		t.Fatalf("window counted %d clicks after %d; want 804 after 7", w.clicks, roll.Prev)
	}
	// The sums above are keyed by domain: make sure the messages did put
	// one code on several domains.
	domains := map[string]map[link.DomainID]bool{}
	shared := 0
	for _, l := range roll.Links {
		if domains[l.Code] == nil {
			domains[l.Code] = map[link.DomainID]bool{}
		}
		if domains[l.Code][l.Domain] = true; len(domains[l.Code]) == 2 {
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("no code was clicked on two domains: the test proves nothing")
	}
}

// TestWindowAddsWithoutAllocating: once a window has seen a message's
// links and values, adding another costs no allocation per click (only the
// message's edge and boot names).
func TestWindowAddsWithoutAllocating(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := message("e1", 1024, r, 100, 3)
	w := newWindow(0, newValues())
	for range 60 { // every code, day, hour and value seen; the visitors' list grown
		if err := w.add(m, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(20, func() { _ = w.add(m, "") }); n > 4 {
		t.Fatalf("adding a message of 1,024 clicks allocated %.0f times; want at most 4", n)
	}
}

// BenchmarkWindowAdd is the roller's own work per click (decode and sum),
// over a campaign's links (20,000, uniform, on one domain), a window per
// 256 messages.
func BenchmarkWindowAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	msgs := make([][]byte, 64)
	for i := range msgs {
		msgs[i] = message("e1", 1024, r, 20_000, 1)
	}
	w := newWindow(0, newValues())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%256 == 0 {
			w.reset(0)
		}
		if err := w.add(msgs[i%len(msgs)], ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1024, "ns/click")
}

// TestLinkCacheRemembersBoundedly: a remembered link is found again while
// fresh, with its UTM, a link the authority did not have is not
// remembered, and the memory holds at most its limit, keeping the links
// used recently.
func TestLinkCacheRemembersBoundedly(t *testing.T) {
	lc := newLinkCache(8)
	now := time.Unix(1_000_000, 0)
	k := func(code string) linkKey { return linkKey{code: code} }
	lc.put(k("unknown"), 0, UTM{}, now)
	if tenant, _ := lc.get(k("unknown"), now); tenant != 0 || len(lc.cur)+len(lc.old) != 0 {
		t.Fatal("a code without a tenant was remembered")
	}
	campaign := UTM{Source: "news", Campaign: "spring"}
	for i := range 100 {
		lc.put(k(fmt.Sprint("code-", i)), int64(i+1), campaign, now)
		lc.get(k("code-0"), now) // kept in use
		if n := len(lc.cur) + len(lc.old); n > 8 {
			t.Fatalf("after %d codes the memory holds %d; want at most 8", i+1, n)
		}
	}
	if tenant, utm := lc.get(k("code-0"), now); tenant != 1 || utm != campaign {
		t.Fatalf("code-0 → %d %+v; want 1 and the campaign", tenant, utm)
	}
	if tenant, _ := lc.get(k("code-99"), now); tenant != 100 {
		t.Fatalf("code-99 → %d; want 100", tenant)
	}
	if tenant, _ := lc.get(k("code-50"), now); tenant != 0 {
		t.Fatal("code-50, unused since, is still remembered past the limit")
	}
	// Codes are unique per domain: the same code elsewhere is another link.
	if tenant, _ := lc.get(linkKey{domain: 1, code: "code-0"}, now); tenant != 0 {
		t.Fatal("code-0 of domain 1 has the tenant of code-0 of the default domain")
	}
	// Past its refresh an entry is asked for again: its target may have
	// changed its UTM.
	if tenant, _ := lc.get(k("code-0"), now.Add(time.Second)); tenant != 0 {
		t.Fatal("an entry looked up before the fresh mark was used")
	}
	lc.put(k("code-0"), 1, UTM{}, now.Add(time.Second))
	if tenant, utm := lc.get(k("code-0"), now.Add(time.Second)); tenant != 1 || !utm.Empty() {
		t.Fatalf("after a new lookup code-0 → %d %+v; want 1 and no UTM", tenant, utm)
	}
}

// TestUTMOf: the UTM parameters come from the target's query, decoded,
// bounded and cleaned; targets without them have none.
func TestUTMOf(t *testing.T) {
	long := strings.Repeat("é", 80) // 160 bytes
	for _, tt := range []struct {
		target string
		want   UTM
	}{
		{"https://example.com/", UTM{}},
		{"https://example.com/?a=1&b=2", UTM{}},
		{"https://example.com/p?utm_source=news&utm_medium=email&utm_campaign=spring%20sale", UTM{"news", "email", "spring sale"}},
		{"https://example.com/?utm_campaign=x&utm_campaign=y#utm_source=frag", UTM{Campaign: "x"}},
		{"https://example.com/?utm_source=%0D%0Aevil%00+&utm_medium=%zz", UTM{Source: "evil"}},
		{"https://example.com/?utm_source=" + long, UTM{Source: strings.Repeat("é", 50)}},
		{"https://example.com/?utm_source=+++", UTM{}},
	} {
		if got := UTMOf(tt.target); got != tt.want {
			t.Errorf("UTMOf(%q) = %+v; want %+v", tt.target, got, tt.want)
		}
	}
}
