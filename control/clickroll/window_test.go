package clickroll

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// message encodes n clicks from edge over codes, spread over two days and
// over domains (a code on several of them).
func message(edge string, n int, r *rand.Rand, codes, domains int) []byte {
	b := clicks.AppendHeader(nil, clicks.Source{Edge: edge, Boot: "boot", Offered: uint64(n)}, n)
	day := time.Date(2030, 1, 2, 23, 59, 59, 0, time.UTC).UnixMilli()
	refs := []string{"", "t.co", "www.google.com", "m.facebook.com"}
	statuses := []uint16{302, 302, 301, 307, 399}
	for range n {
		code := fmt.Sprintf("%06d", r.IntN(codes)) // as generated codes: 6 bytes
		if codes < 100 {
			code = fmt.Sprintf("custom-code-%d", r.IntN(codes)) // longer
		}
		b = clicks.AppendClick(b, clicks.ClickView{Domain: link.DomainID(r.IntN(domains)), Code: []byte(code), At: day + int64(r.IntN(2000)),
			Status: statuses[r.IntN(len(statuses))], Device: clicks.Device(r.IntN(5)), Bot: r.IntN(4) == 0, Referrer: []byte(refs[r.IntN(len(refs))])})
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
			for _, k := range []key{{d, c.Code, day, "", ""}, {d, c.Code, day, "referrer", c.Referrer}, {d, c.Code, day, "device", c.Device.String()},
				{d, c.Code, day, "status", fmt.Sprint(c.Status)}, {d, c.Code, day, "edge", b.Edge}} {
				n := want[k]
				n[0]++
				if c.Bot {
					n[1]++
				}
				want[k] = n
			}
		}
	}
	roll := w.rollup()
	got := map[key][2]int64{}
	for _, l := range roll.Links {
		k := key{l.Domain, l.Code, l.Day.Format(time.DateOnly), "", ""}
		if _, dup := got[k]; dup {
			t.Fatalf("link row %v twice", k)
		}
		got[k] = [2]int64{l.Clicks, l.BotClicks}
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
	for range 20 { // every code, day and value seen
		if err := w.add(m, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(50, func() { _ = w.add(m, "") }); n > 4 {
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

// TestTenantsRemembersBoundedly: a remembered tenant is found again, a
// code the authority did not have is not remembered, and the memory holds
// at most its limit, keeping the codes used recently.
func TestTenantsRemembersBoundedly(t *testing.T) {
	ts := newTenants(8)
	k := func(code string) linkKey { return linkKey{code: code} }
	ts.put(k("unknown"), 0)
	if ts.get(k("unknown")) != 0 || len(ts.cur)+len(ts.old) != 0 {
		t.Fatal("a code without a tenant was remembered")
	}
	for i := range 100 {
		ts.put(k(fmt.Sprint("code-", i)), int64(i+1))
		ts.get(k("code-0")) // kept in use
		if n := len(ts.cur) + len(ts.old); n > 8 {
			t.Fatalf("after %d codes the memory holds %d; want at most 8", i+1, n)
		}
	}
	if ts.get(k("code-0")) != 1 || ts.get(k("code-99")) != 100 {
		t.Fatalf("code-0 → %d, code-99 → %d; want 1 and 100", ts.get(k("code-0")), ts.get(k("code-99")))
	}
	if ts.get(k("code-50")) != 0 {
		t.Fatal("code-50, unused since, is still remembered past the limit")
	}
	// Codes are unique per domain: the same code elsewhere is another link.
	if ts.get(linkKey{domain: 1, code: "code-0"}) != 0 {
		t.Fatal("code-0 of domain 1 has the tenant of code-0 of the default domain")
	}
}
