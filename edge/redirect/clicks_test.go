package redirect

import (
	"net"
	"net/netip"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/clientip"
	"github.com/edgelink/edgelink/shared/link"
)

// lastClick is a ClickRecorder keeping the last click's client, status and
// rule.
type lastClick struct {
	client netip.Addr
	status int
	rule   uint8
	n      int
}

func (l *lastClick) Record(_ link.DomainID, _, _, _ []byte, client netip.Addr, status int, rule uint8, _ int64) {
	l.client, l.status, l.rule, l.n = client, status, rule, l.n+1
}

// fromPeer is a request for uri arriving from peer, with headers.
func fromPeer(peer string, uri string, headers ...string) *fasthttp.RequestCtx {
	ctx := request("GET", uri, headers...)
	var req fasthttp.Request
	ctx.Request.CopyTo(&req)
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 4711}, nil)
	return ctx
}

// trustedProxies is the edge's wiring of ClientIP behind proxies
// (edgeserver): the peer, or what trusted proxies forwarded.
func trustedProxies(t *testing.T, h *Handler, cidrs ...string) {
	t.Helper()
	proxies, err := clientip.New(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	h.ClientIP = func(ctx *fasthttp.RequestCtx) netip.Addr {
		return proxies.Client(ctx.RemoteIP(), ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor))
	}
}

// TestClickCarriesTheClient: a redirect's click gets the client's address
// as ClientIP resolves it (the socket's peer; behind a trusted proxy, the
// address it forwarded; from anyone else, X-Forwarded-For is ignored); a
// 404 or 410 records no click.
func TestClickCarriesTheClient(t *testing.T) {
	h, _ := newHandler()
	rec := &lastClick{}
	h.Clicks = rec
	h.Serve(fromPeer("198.51.100.9", "/00000A", "X-Forwarded-For", "203.0.113.1"))
	if rec.client != netip.MustParseAddr("198.51.100.9") || rec.status != 302 {
		t.Fatalf("no proxies: client %v status %d; want the peer, 302", rec.client, rec.status)
	}
	trustedProxies(t, h, "10.0.0.0/8")
	for _, tt := range []struct{ peer, xff, want string }{
		{"10.0.0.1", "203.0.113.1", "203.0.113.1"},
		{"10.0.0.1", "2001:db8::5, 10.9.9.9", "2001:db8::5"},
		{"::ffff:10.0.0.1", "203.0.113.2", "203.0.113.2"},
		{"198.51.100.9", "203.0.113.1", "198.51.100.9"}, // not a proxy: its header is anyone's
	} {
		h.Serve(fromPeer(tt.peer, "/00000A", "X-Forwarded-For", tt.xff))
		if rec.client != netip.MustParseAddr(tt.want) {
			t.Errorf("peer %s forwarding %q: click from %v; want %s", tt.peer, tt.xff, rec.client, tt.want)
		}
	}
	n := rec.n
	h.Serve(fromPeer("10.0.0.1", "/zzzzzz", "X-Forwarded-For", "203.0.113.1"))
	h.Serve(fromPeer("10.0.0.1", "/off001", "X-Forwarded-For", "203.0.113.1"))
	if rec.n != n {
		t.Fatalf("a 404 and a 410 recorded %d clicks", rec.n-n)
	}
}

// TestHitBehindProxiesDoesNotAllocate: resolving the client from
// X-Forwarded-For on every hit, for its click, keeps the hit path free of
// allocations.
func TestHitBehindProxiesDoesNotAllocate(t *testing.T) {
	h, _ := newHandler()
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 20})
	trustedProxies(t, h, "10.0.0.0/8", "2001:db8:ffff::/48")
	for _, xff := range []string{"203.0.113.1", "2001:db8::5, 10.9.9.9"} {
		if n := hitAllocs(h, fromPeer("10.0.0.1", "/00000A", "X-Forwarded-For", xff)); n != 0 {
			t.Fatalf("hit forwarded for %q allocated %v times per request", xff, n)
		}
	}
}

// BenchmarkHitWithClicksBehindProxy is BenchmarkHitWithClicks with the
// client read from X-Forwarded-For through a trusted proxy.
func BenchmarkHitWithClicksBehindProxy(b *testing.B) {
	h, _ := newHandler()
	h.Now = nil
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 10})
	proxies, _ := clientip.New([]string{"10.0.0.0/8"})
	h.ClientIP = func(ctx *fasthttp.RequestCtx) netip.Addr {
		return proxies.Client(ctx.RemoteIP(), ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor))
	}
	ctx := fromPeer("10.0.0.1", "/00000A", "X-Forwarded-For", "203.0.113.1, 10.0.0.2")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.Serve(ctx)
	}
}
