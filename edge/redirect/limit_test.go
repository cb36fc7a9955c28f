package redirect

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/shared/link"
)

// limited is the wire form of extras with limit max and count counted.
func limited(t testing.TB, max, counted int64) []byte {
	t.Helper()
	b, err := link.AppendExtras(nil, &link.Extras{MaxClicks: max, ClicksCounted: counted})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClickLimitsAllowance: an edge redirects a limited link N − C times
// from the extras it first sees, 410 after; a newer count with the same
// limit lowers what is left, never raises it; a new limit starts over; a
// reached count is 410 at once; links, domains and plain links apart.
func TestClickLimitsAllowance(t *testing.T) {
	var c ClickLimits
	code := []byte("limited1")
	take := func(x []byte, n int) int {
		ok := 0
		for range n {
			if c.Allow(link.DefaultDomain, code, x) {
				ok++
			}
		}
		return ok
	}
	if got := take(limited(t, 10, 4), 20); got != 6 {
		t.Fatalf("limit 10, 4 counted: %d redirects; want 6", got)
	}
	if c.Spent.Load() != 14 || c.Reached.Load() != 0 {
		t.Fatalf("spent %d, reached %d; want 14, 0", c.Spent.Load(), c.Reached.Load())
	}
	// Same limit: a larger count cannot give back what was spent, nor can
	// an older, smaller one.
	if got := take(limited(t, 10, 5), 5) + take(limited(t, 10, 0), 5); got != 0 {
		t.Fatalf("same limit after the allowance was spent: %d redirects", got)
	}
	// A raised limit starts over from its own count.
	if got := take(limited(t, 20, 12), 20); got != 8 {
		t.Fatalf("raised to 20 with 12 counted: %d redirects; want 8", got)
	}
	// A fresher count lowers what is left: of limit 30 with 12 counted,
	// 3 of 18 spent, then 28 counted leaves 2, the lower of 15 and 2.
	if got := take(limited(t, 30, 12), 3) + take(limited(t, 30, 28), 10); got != 5 {
		t.Fatalf("limit 30: 3 of 18 spent, then 28 counted: %d redirects; want 3 + 2", got)
	}
	// Reached: 410 without touching the account.
	before := c.Spent.Load()
	if got := take(limited(t, 30, 30), 3); got != 0 || c.Reached.Load() != 3 || c.Spent.Load() != before {
		t.Fatalf("reached: %d redirects, reached %d, spent %d→%d", got, c.Reached.Load(), before, c.Spent.Load())
	}
	// Other links and domains have accounts of their own; plain links
	// none.
	if !c.Allow(link.DefaultDomain, []byte("limited2"), limited(t, 1, 0)) || !c.Allow(7, code, limited(t, 1, 0)) {
		t.Fatal("another link or domain spent this link's allowance")
	}
	for range 5 {
		if !c.Allow(link.DefaultDomain, code, nil) {
			t.Fatal("a plain link was refused")
		}
	}
	if !Reaches(limited(t, 3, 3)) || Reaches(limited(t, 3, 2)) || Reaches(nil) {
		t.Fatal("Reaches")
	}
	if n := c.Remembered(); n != 3 {
		t.Fatalf("remembered %d links; want 3", n)
	}
}

// TestClickLimitsConcurrent: many goroutines redirecting one link take
// exactly its allowance between them.
func TestClickLimitsConcurrent(t *testing.T) {
	var c ClickLimits
	x := limited(t, 5000, 1000)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			code := []byte("hot-link")
			for range 400 {
				if c.Allow(link.DomainID(g%2), code, x) {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// Two domains, each its own 4,000; 16 × 400 = 6,400 asked.
	if ok.Load() != 6400 {
		t.Fatalf("%d redirects; want all 6,400 (two domains of 4,000 each)", ok.Load())
	}
	var d ClickLimits
	for range 16 {
		wg.Go(func() {
			for range 1000 {
				if d.Allow(link.DefaultDomain, []byte("hot-link"), x) {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := ok.Load() - 6400; got != 4000 || d.Spent.Load() != 16000-4000 {
		t.Fatalf("one link, 16 goroutines: %d redirects, %d spent; want 4,000 and 12,000", got, d.Spent.Load())
	}
}

// TestClickLimitsBound is the allowance's proof run as a model: edges
// serve a limited link in random order while counts are read at random
// times after the clicks they count (as the roller, the relay, snapshots
// and the authority read them), and edges' reports reach other edges late,
// out of order or not at all. Whatever the order, no edge refuses a click
// before N have been served, and at most N + (E−1)·(N−C0) are served
// before every edge refuses. With every report delivered at once, the
// edges stop at N exactly.
func TestClickLimitsBound(t *testing.T) {
	type report struct {
		from              string
		max, base, served int64
	}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := int64(1 + rng.IntN(60))
		c0 := int64(rng.IntN(int(n))) // counted when the limit was set
		edges := 1 + rng.IntN(4)
		prompt := seed%3 == 0 // every report delivered at once
		limits := make([]ClickLimits, edges)
		seen := make([][]byte, edges) // the extras each edge holds
		for e := range seen {
			seen[e] = limited(t, n, c0)
		}
		served := c0        // clicks served in all; the first c0 before the limit
		var counted []int64 // served, as each click was counted (a count is some prefix)
		var sent []report   // every report, for late and repeated delivery
		refusedAt := int64(-1)
		gossip := func(e int) {
			limits[e].Collect(func(_ link.DomainID, _ []byte, max, base, s int64) {
				sent = append(sent, report{fmt.Sprint(e), max, base, s})
				if prompt {
					for f := range limits {
						if f != e {
							limits[f].Peer(fmt.Sprint(e), link.DefaultDomain, []byte("modelled"), max, base, s)
						}
					}
				}
			})
		}
		for step := 0; step < 20*int(n)+100; step++ {
			e := rng.IntN(edges)
			switch rng.IntN(6) {
			case 0:
				// A count read now: at least c0, at most what was served.
				c := c0
				if len(counted) > 0 {
					c = max(c0, counted[rng.IntN(len(counted))])
				}
				seen[e] = limited(t, n, c)
			case 1:
				gossip(e)
			case 2:
				// Some earlier report of another edge, maybe an old
				// one, reaches e (an edge skips its own; prompt
				// delivery sends none late).
				if prompt || len(sent) == 0 {
					break
				}
				if r := sent[rng.IntN(len(sent))]; r.from != fmt.Sprint(e) {
					limits[e].Peer(r.from, link.DefaultDomain, []byte("modelled"), r.max, r.base, r.served)
				}
			default:
				if limits[e].Allow(link.DefaultDomain, []byte("modelled"), seen[e]) {
					served++
					counted = append(counted, served)
					if prompt {
						gossip(e)
					}
				} else if refusedAt < 0 {
					refusedAt = served
				}
			}
		}
		if refusedAt >= 0 && refusedAt < n {
			t.Fatalf("seed %d: an edge refused after %d of %d served", seed, refusedAt, n)
		}
		if bound := n + int64(edges-1)*(n-c0); served > bound {
			t.Fatalf("seed %d: %d served with limit %d, %d counted at the start, %d edges; bound %d", seed, served, n, c0, edges, bound)
		}
		if prompt && served != n {
			t.Fatalf("seed %d: %d served with every report delivered at once; want exactly the limit %d", seed, served, n)
		}
	}
}

// TestClickLimitsReports: Collect reports what an edge served since the
// last Collect, once; Peer reports of the same limit add up, a process's
// newer report replaces its older, reports of another limit do not count.
func TestClickLimitsReports(t *testing.T) {
	var a, b ClickLimits
	x := limited(t, 10, 2)
	code := []byte("reported")
	for range 3 {
		a.Allow(9, code, x)
	}
	var got []string
	collect := func(c *ClickLimits) {
		got = got[:0]
		c.Collect(func(d link.DomainID, code []byte, max, base, served int64) {
			got = append(got, fmt.Sprintf("%d/%s max %d base %d served %d", d, code, max, base, served))
		})
	}
	if collect(&a); len(got) != 1 || got[0] != "9/reported max 10 base 2 served 3" {
		t.Fatalf("first collect: %q", got)
	}
	if collect(&a); len(got) != 0 {
		t.Fatalf("nothing served since, yet %q", got)
	}
	// b has served 4 from base 4: with a's 3 from base 2, 2+3+4 = 9 of 10.
	y := limited(t, 10, 4)
	for range 4 {
		if !b.Allow(9, code, y) {
			t.Fatal("b refused within its allowance")
		}
	}
	b.Peer("a", 9, code, 10, 2, 3)
	b.Peer("old", 9, code, 20, 0, 100) // another limit: not counted
	if !b.Allow(9, code, y) {
		t.Fatal("b refused the 10th click")
	}
	if b.Allow(9, code, y) || b.Shared.Load() != 1 {
		t.Fatalf("b redirected an 11th click (shared refusals %d)", b.Shared.Load())
	}
	// A newer report of a replaces the older: still at the limit.
	b.Peer("a", 9, code, 10, 2, 2)
	if !b.Allow(9, code, y) {
		t.Fatal("a's lower report should leave one click")
	}
	// Hostile or broken reports are ignored.
	b.Peer("x", 9, code, 0, 0, 5)
	b.Peer("x", 9, code, 10, -1, 5)
	b.Peer("x", 9, []byte(strings.Repeat("c", link.MaxCodeLen+1)), 10, 0, 5)
	if n := b.Remembered(); n != 1 {
		t.Fatalf("remembered %d links; want 1", n)
	}
}

// TestClickLimitsForget: past its size the account forgets the links
// least recently asked about, in generations.
func TestClickLimitsForget(t *testing.T) {
	c := ClickLimits{max: 64 * 2 * 4} // 4 a shard's generation
	x := limited(t, 3, 0)
	for i := range 10_000 {
		c.Allow(link.DefaultDomain, fmt.Appendf(nil, "code-%d", i), x)
	}
	if n := c.Remembered(); n > 64*2*4 {
		t.Fatalf("remembers %d links; want at most %d", n, 64*2*4)
	}
	// A link asked about all along stays remembered.
	var d ClickLimits
	d.max = 64 * 2 * 4
	keep := []byte("kept-link")
	for i := range 10_000 {
		d.Allow(link.DefaultDomain, keep, limited(t, 1_000_000, 0))
		d.Allow(link.DefaultDomain, fmt.Appendf(nil, "code-%d", i), x)
	}
	for range 10 {
		d.Allow(link.DefaultDomain, keep, limited(t, 1_000_000, 0))
	}
	if d.Spent.Load() != 0 {
		t.Fatal("refused a link with allowance left")
	}
}

// TestClickLimitsAllocations: a plain link's check, and a limited link's
// after the first, allocate nothing.
func TestClickLimitsAllocations(t *testing.T) {
	var c ClickLimits
	x := limited(t, 1<<40, 3)
	code := []byte("alloc-free")
	c.Allow(link.DefaultDomain, code, x)
	if n := testing.AllocsPerRun(1000, func() {
		c.Allow(link.DefaultDomain, code, nil)
		c.Allow(link.DefaultDomain, code, x)
	}); n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
}

func BenchmarkClickLimitsAllow(b *testing.B) {
	var c ClickLimits
	x := limited(b, 1<<50, 3)
	code := []byte("bench-link")
	for _, bc := range []struct {
		name   string
		extras []byte
	}{{"plain", nil}, {"limited", x}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.Allow(link.DefaultDomain, code, bc.extras)
				}
			})
		})
	}
}

// TestHandlerEnforcesLimits: the handler takes a limited link's redirects
// from the edge's allowance (N − C, then 410 on this edge), answers 410 at
// once a link whose counted clicks reached its limit (with or without an
// account, before its password form and on its form's post), spends
// nothing on a password form, stops a link the edges' reports show at its
// limit, and leaves plain links alone; without an account only the
// reached count stops a link.
func TestHandlerEnforcesLimits(t *testing.T) {
	e := newPwEnv(t, unlock.Config{})
	for i, l := range []*store.Entry{
		{Code: "lim001", URL: "https://example.com/l1", Extras: extrasOf(t, link.Extras{MaxClicks: 5, ClicksCounted: 2})},
		{Code: "lim002", URL: "https://example.com/l2", Extras: extrasOf(t, link.Extras{MaxClicks: 100})},
		{Code: "limfull", URL: "https://example.com/full", Extras: extrasOf(t, link.Extras{MaxClicks: 5, ClicksCounted: 5})},
		{Code: "pwfull", URL: pwTarget, Extras: extrasOf(t, link.Extras{PasswordHash: e.hash, MaxClicks: 5, ClicksCounted: 7})},
		{Code: "pwlim1", URL: pwTarget, Extras: extrasOf(t, link.Extras{PasswordHash: e.hash, MaxClicks: 3})},
		{Code: "rulelim", URL: "https://example.com/r", Extras: extrasOf(t, link.Extras{MaxClicks: 1,
			Rules: []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: rulePwAlt}}})},
	} {
		l.RedirectType, l.Version, l.Status = 302, uint64(100+i), link.Active
		if !e.store.Apply(l) {
			t.Fatalf("overlay refused %s", l.Code)
		}
	}
	statuses := func(code string, n int) (redirects, gone int) {
		t.Helper()
		for range n {
			ctx := e.call("GET", "/"+code, "192.0.2.1", "")
			switch s := ctx.Response.StatusCode(); s {
			case 302:
				redirects++
			case 410:
				gone++
				checkNoTarget(t, code, ctx)
			default:
				t.Fatalf("GET /%s: %d", code, s)
			}
		}
		return redirects, gone
	}
	// Without an account: only the reached count stops a link.
	if r, g := statuses("lim001", 10); r != 10 || g != 0 {
		t.Errorf("lim001 without an account: %d redirects, %d gone; want 10, 0", r, g)
	}
	if r, g := statuses("limfull", 3); r != 0 || g != 3 {
		t.Errorf("limfull without an account: %d redirects, %d gone; want 0, 3", r, g)
	}
	var lims ClickLimits
	e.h.Limits = &lims
	if r, g := statuses("lim001", 10); r != 3 || g != 7 {
		t.Errorf("lim001 (5, 2 counted): %d redirects, %d gone; want 3, 7", r, g)
	}
	if r, g := statuses("limfull", 2); r != 0 || g != 2 {
		t.Errorf("limfull: %d redirects, %d gone; want 0, 2", r, g)
	}
	if r, g := statuses("rulelim", 3); r != 1 || g != 2 {
		t.Errorf("rulelim (limit 1): %d redirects, %d gone; want 1, 2", r, g)
	}
	if r, _ := statuses("plain1", 20); r != 20 {
		t.Errorf("plain1: %d redirects of 20", r)
	}
	// Reports: two other edges served 60 and 39 of lim002 from 0; this one
	// may serve one more.
	lims.Peer("edge-b/1", link.DefaultDomain, []byte("lim002"), 100, 0, 60)
	lims.Peer("edge-c/1", link.DefaultDomain, []byte("lim002"), 100, 0, 39)
	if r, g := statuses("lim002", 5); r != 1 || g != 4 {
		t.Errorf("lim002 with 99 served elsewhere: %d redirects, %d gone; want 1, 4", r, g)
	}
	// A reached password link is 410 before its form, and on its post.
	f := formOf(t, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	for _, ctx := range []*fasthttp.RequestCtx{e.call("GET", "/pwfull", "192.0.2.1", ""), e.post("pwfull", "192.0.2.1", f, "correct+horse")} {
		checkNoTarget(t, "pwfull", ctx)
		if ctx.Response.StatusCode() != 410 || bytes.Contains(ctx.Response.Body(), []byte("<form")) {
			t.Errorf("%s pwfull: %d, want 410 without a form", ctx.Method(), ctx.Response.StatusCode())
		}
	}
	// A password form spends nothing of the allowance.
	before := lims.Remembered()
	for range 5 {
		formOf(t, e.call("GET", "/pwlim1", "192.0.2.1", ""), 200, "pwlim1")
	}
	if lims.Remembered() != before {
		t.Errorf("password forms of pwlim1 took allowance: %d links remembered, %d before", lims.Remembered(), before)
	}
	if lims.Reached.Load() == 0 || lims.Spent.Load() == 0 || lims.Shared.Load() == 0 {
		t.Errorf("counters: reached %d, spent %d, shared %d; want each > 0", lims.Reached.Load(), lims.Spent.Load(), lims.Shared.Load())
	}
}

// TestLimitedHitDoesNotAllocate: a limited link's redirect through the
// handler allocates nothing once its account entry exists.
func TestLimitedHitDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ov := store.NewOverlay()
	x, err := link.AppendExtras(nil, &link.Extras{MaxClicks: link.MaxClicksLimit})
	if err != nil {
		t.Fatal(err)
	}
	ov.Apply(&store.Entry{Code: "lim001", URL: "https://example.com/l", Extras: string(x), RedirectType: 302, Version: 1, Status: link.Active})
	h := &Handler{Store: ov, Limits: new(ClickLimits)}
	var req fasthttp.Request
	req.SetRequestURI("/lim001")
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1}, nil)
	h.Serve(ctx)
	if ctx.Response.StatusCode() != 302 {
		t.Fatalf("status %d", ctx.Response.StatusCode())
	}
	if a := testing.AllocsPerRun(200, func() { ctx.Response.Reset(); h.Serve(ctx) }); a != 0 {
		t.Fatalf("%v allocations per limited hit", a)
	}
}
