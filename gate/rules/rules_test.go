package rules

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
)

// Clients by device, as their browsers say.
var clients = []struct{ name, ua, device string }{
	{"iPhone Safari", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", "ios"},
	{"iPad Safari", "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1", "ios"},
	{"Android Chrome", "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36", "android"},
	{"Android Samsung tablet", "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Safari/537.36", "android"},
	{"Windows Chrome", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", "desktop"},
	{"macOS Safari", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", "desktop"},
	{"Linux Firefox", "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", "desktop"},
	{"curl", "curl/8.5.0", ""},
}

// Addresses of the geo fixture (edge/geo/testdata, IPFire Location) and
// their countries; "" for none.
var addresses = []struct{ addr, country string }{
	{"8.8.8.8", "US"}, {"9.9.9.9", "US"}, {"2001:4860:4860::8888", "US"},
	{"194.25.2.129", "DE"}, {"2a01:4f8::1", "DE"},
	{"202.12.27.33", "JP"}, {"2001:dc3::35", "JP"},
	{"193.0.6.139", "NL"}, {"1.1.1.1", "AU"}, {"10.1.2.3", ""}, {"192.0.2.7", ""},
}

// TestRuleLinksRoute: rule links created with the edge's feed paused and
// followed at once (their rules from the authority's answer), then again
// once the feed applied them: iOS, Android and desktop clients reach their
// three targets and others the link's own; a country rule sends each
// fixture address's client, forwarded by the trusted proxy, to its
// country's target, and clients of no listed country (or none) to the
// link's own.
func TestRuleLinksRoute(t *testing.T) {
	e := newEnv(t)
	parts := e.edge.Parts()
	parts.Feed.Pause()
	t.Cleanup(parts.Feed.Resume)

	n := scale(3, 20)
	type ruled struct{ devices, countries string }
	links := make([]ruled, n)
	target := func(i int, what string) string { return fmt.Sprintf("https://example.com/%d/%s", i, what) }
	for i := range links {
		links[i].devices = e.create(t, fmt.Sprintf(`{"url": %q, "rules": [%s, %s, %s]}`, target(i, "default"),
			ruleJSON(target(i, "ios"), map[string]any{"device": []string{"ios"}}),
			ruleJSON(target(i, "android"), map[string]any{"device": []string{"android"}}),
			ruleJSON(target(i, "desktop"), map[string]any{"device": []string{"desktop"}})))
		links[i].countries = e.create(t, fmt.Sprintf(`{"url": %q, "rules": [%s, %s, %s]}`, target(i, "world"),
			ruleJSON(target(i, "us"), map[string]any{"country": []string{"US"}}),
			ruleJSON(target(i, "de"), map[string]any{"country": []string{"DE", "AT"}}),
			ruleJSON(target(i, "jp"), map[string]any{"country": []string{"jp"}})))
	}
	v := newVisitor(t, e.edge.URL, stack.LoopbackIP(3))
	follows := 0
	check := func(phase string) {
		t.Helper()
		for i, l := range links {
			for _, c := range clients {
				want := target(i, c.device)
				if c.device == "" {
					want = target(i, "default")
				}
				a := v.do(t, "GET", "/"+l.devices, "", "User-Agent", c.ua)
				follows++
				if a.status != http.StatusFound || a.header.Get("Location") != want {
					t.Fatalf("%s: %s on %s: %d %q, want 302 to %s", phase, c.name, l.devices, a.status, a.header.Get("Location"), want)
				}
				if vary := a.header.Get("Vary"); vary != "User-Agent" || a.header.Get("Cache-Control") != "private, no-store" {
					t.Fatalf("%s: %s: Vary %q Cache-Control %q", phase, c.name, vary, a.header.Get("Cache-Control"))
				}
			}
			for _, ad := range addresses {
				want := target(i, strings.ToLower(ad.country))
				if ad.country != "US" && ad.country != "DE" && ad.country != "JP" {
					want = target(i, "world")
				}
				a := v.do(t, "GET", "/"+l.countries, "", "X-Forwarded-For", ad.addr)
				follows++
				if a.status != http.StatusFound || a.header.Get("Location") != want {
					t.Fatalf("%s: a client at %s (%q) on %s: %d %q, want 302 to %s", phase, ad.addr, ad.country, l.countries, a.status, a.header.Get("Location"), want)
				}
			}
		}
	}
	check("right after the 201s, the feed paused")
	fromAuthority := parts.Handler.Counters.Resolved.Load()
	parts.Feed.Resume()
	stack.WaitApplied(t, e.edge, e.pg.Pool(), time.Minute)
	overlayBefore := parts.Handler.Counters.OverlayHits.Load()
	check("from the overlay")
	if parts.Handler.Counters.OverlayHits.Load() == overlayBefore {
		t.Fatal("the second round was not answered from the overlay")
	}
	evidence.Record(t, evidence.RulesRoute,
		"%d links with iOS, Android and desktop rules and %d with US, DE/AT and JP rules, created with the edge's feed paused: %d follows, each right (302 to its rule's target, Vary: User-Agent on device rules) from the authority's answers (%d answered by the long-tail cache or the authority) and again from the overlay; %d clients (iPhone, iPad, Android phone and tablet, Windows, macOS, Linux; curl to the link's own) and %d addresses of the IPFire fixture forwarded by a trusted proxy (US, DE, JP to their targets; NL, AU, private and documentation addresses to the link's own)",
		n, n, follows, fromAuthority, len(clients), len(addresses))
}
