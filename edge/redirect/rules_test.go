package redirect

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// User-Agents of the clients rules tell apart.
const (
	uaIPhone    = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	uaIPad      = "Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.6 Mobile/15E148 Safari/604.1"
	uaInstagram = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 330.0.0.40.92 (iPhone15,2; iOS 17_4; en_US)"
	uaAndroid   = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36"
	uaAndroidTb = "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaWindows   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaMac       = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15"
	uaLinux     = "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0"
	uaChromeOS  = "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	uaSmartTV   = "Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36"
	uaWinPhone  = "Mozilla/5.0 (Windows Phone 10.0; Android 6.0.1; Microsoft; Lumia 950) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/52.0.2743.116 Mobile Safari/537.36 Edge/15.15063"
	uaCurl      = "curl/8.5.0"
)

func extrasOf(t testing.TB, x link.Extras) string {
	t.Helper()
	b, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The rule links of these tests.
var (
	devices = []link.Rule{
		{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=x"},
		{Devices: []link.Device{link.DeviceDesktop}, URL: "https://example.com/desktop"},
	}
	countries = []link.Rule{
		{Countries: []string{"AT", "DE"}, URL: "https://example.de/"},
		{Countries: []string{"US"}, URL: "https://example.com/us"},
	}
	languages = []link.Rule{
		{Languages: []string{"fr"}, URL: "https://example.fr/"},
		{Languages: []string{"de", "en"}, URL: "https://example.com/de-en"},
	}
	queries = []link.Rule{
		{Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://example.com/mail"},
		{Query: []link.QueryMatch{{Param: "promo"}}, URL: "https://example.com/promo"},
		{Query: []link.QueryMatch{{Param: "q", Equals: true, Value: "a b"}}, URL: "https://example.com/space"},
	}
	// AND within a rule, first match wins across rules.
	combined = []link.Rule{
		{Devices: []link.Device{link.DeviceAndroid}, Countries: []string{"US"}, URL: "https://example.com/us-android"},
		{Devices: []link.Device{link.DeviceAndroid}, URL: "https://example.com/android"},
		{Countries: []string{"US"}, Languages: []string{"es"}, URL: "https://example.com/us-es"},
	}
)

// countryMap is a CountryLookup from a map, counting lookups.
type countryMap struct {
	m map[netip.Addr]string
	n atomic.Int64
}

func (c *countryMap) Lookup(a netip.Addr) ([2]byte, bool) {
	c.n.Add(1)
	cc, ok := c.m[a]
	if !ok {
		return [2]byte{}, false
	}
	return [2]byte{cc[0], cc[1]}, true
}

// rulesHandler serves the rule links from the overlay (devices, countries,
// languages, queries, combined, a plain link) with a country map.
func rulesHandler(t testing.TB) (*Handler, *countryMap) {
	t.Helper()
	s := store.NewOverlay()
	for i, l := range []struct {
		code  string
		rules []link.Rule
	}{{"device", devices}, {"country", countries}, {"language", languages}, {"query", queries}, {"combined", combined}, {"plain0", nil}} {
		e := &store.Entry{Code: l.code, URL: "https://example.com/default", RedirectType: 302, Status: link.Active, Version: uint64(i + 1)}
		if l.rules != nil {
			e.Extras = extrasOf(t, link.Extras{Rules: l.rules})
		}
		if !s.Apply(e) {
			t.Fatalf("overlay refused %s", l.code)
		}
	}
	cm := &countryMap{m: map[netip.Addr]string{
		netip.MustParseAddr("192.0.2.10"):  "DE",
		netip.MustParseAddr("192.0.2.11"):  "AT",
		netip.MustParseAddr("192.0.2.12"):  "US",
		netip.MustParseAddr("192.0.2.13"):  "FR",
		netip.MustParseAddr("2001:db8::1"): "US",
	}}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Handler{Store: s, Countries: cm, Now: func() time.Time { return now }}, cm
}

// serveFrom serves GET uri from peer with headers and returns the status,
// Location and Vary.
func serveFrom(h *Handler, peer, uri string, headers ...string) (int, string, string) {
	ctx := fromPeer(peer, uri, headers...)
	h.Serve(ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location")), string(ctx.Response.Header.Peek("Vary"))
}

// TestRulesRouteByDevice: iOS, Android and desktop clients go to their
// three targets, by the classifier the clicks use; clients that are none
// of them (TVs, Windows Phone, scripts, no User-Agent) to the link's own.
func TestRulesRouteByDevice(t *testing.T) {
	h, cm := rulesHandler(t)
	rec := &lastClick{}
	h.Clicks = rec
	ios, android, desktop, own := devices[0].URL, devices[1].URL, devices[2].URL, "https://example.com/default"
	for _, tt := range []struct {
		name, ua, want string
		rule           uint8
	}{
		{"iPhone", uaIPhone, ios, 1}, {"iPad", uaIPad, ios, 1}, {"Instagram on iOS", uaInstagram, ios, 1},
		{"Android phone", uaAndroid, android, 2}, {"Android tablet", uaAndroidTb, android, 2},
		{"Windows", uaWindows, desktop, 3}, {"Mac", uaMac, desktop, 3}, {"Linux", uaLinux, desktop, 3}, {"ChromeOS", uaChromeOS, desktop, 3},
		{"smart TV", uaSmartTV, own, 0}, {"Windows Phone", uaWinPhone, own, 0}, {"curl", uaCurl, own, 0}, {"no User-Agent", "", own, 0},
		{"garbage", "\xff\xfe\x00zz;;()", own, 0},
	} {
		var headers []string
		if tt.ua != "" {
			headers = []string{"User-Agent", tt.ua}
		}
		status, loc, vary := serveFrom(h, "192.0.2.10", "/device", headers...)
		if status != 302 || loc != tt.want || vary != "User-Agent" {
			t.Errorf("%s: %d %q Vary %q; want 302 to %s, Vary User-Agent", tt.name, status, loc, vary, tt.want)
		}
		if rec.rule != tt.rule || rec.status != 302 {
			t.Errorf("%s: click rule %d status %d, want rule %d", tt.name, rec.rule, rec.status, tt.rule)
		}
	}
	if cm.n.Load() != 0 {
		t.Errorf("device rules looked %d countries up; none needs one", cm.n.Load())
	}
	if h.Counters.RuleHits.Load() != 9 || h.Counters.RuleDefaults.Load() != 5 {
		t.Errorf("rule hits %d defaults %d, want 9 and 5", h.Counters.RuleHits.Load(), h.Counters.RuleDefaults.Load())
	}
}

// TestRulesRouteByCountry: the country of the client (the peer, or what a
// trusted proxy forwarded) through the injected lookup, only for links
// whose rules name countries; unknown countries and an edge without
// country data get the link's own target.
func TestRulesRouteByCountry(t *testing.T) {
	h, cm := rulesHandler(t)
	for _, tt := range []struct{ peer, want string }{
		{"192.0.2.10", "https://example.de/"}, {"192.0.2.11", "https://example.de/"}, {"192.0.2.12", "https://example.com/us"},
		{"2001:db8::1", "https://example.com/us"}, {"192.0.2.13", "https://example.com/default"}, {"10.9.9.9", "https://example.com/default"},
	} {
		status, loc, vary := serveFrom(h, tt.peer, "/country")
		if status != 302 || loc != tt.want || vary != "" {
			t.Errorf("from %s: %d %q Vary %q; want 302 to %s and no Vary (no header decides)", tt.peer, status, loc, vary, tt.want)
		}
	}
	if cm.n.Load() != 6 {
		t.Errorf("%d lookups for 6 requests", cm.n.Load())
	}
	// Behind a trusted proxy the forwarded client decides; from anyone
	// else X-Forwarded-For is ignored.
	trustedProxies(t, h, "10.0.0.0/8")
	if _, loc, _ := serveFrom(h, "10.0.0.1", "/country", "X-Forwarded-For", "192.0.2.12"); loc != "https://example.com/us" {
		t.Errorf("forwarded US client: %q", loc)
	}
	if _, loc, _ := serveFrom(h, "192.0.2.10", "/country", "X-Forwarded-For", "192.0.2.12"); loc != "https://example.de/" {
		t.Errorf("a client's own X-Forwarded-For was believed: %q", loc)
	}
	// Plain links and other rules never look a country up.
	before := cm.n.Load()
	serveFrom(h, "192.0.2.12", "/plain0")
	serveFrom(h, "192.0.2.12", "/language", "Accept-Language", "fr")
	if cm.n.Load() != before {
		t.Errorf("a plain link or a language rule looked a country up")
	}
	h.Countries = nil
	if _, loc, _ := serveFrom(h, "192.0.2.12", "/country"); loc != "https://example.com/default" {
		t.Errorf("without country data: %q, want the link's own target", loc)
	}
}

// TestRulesFollowTheGeoData: countries from edge/geo's IPFire fixture, as
// an edge with --geoip looks them up.
func TestRulesFollowTheGeoData(t *testing.T) {
	table, err := geo.LoadTor("../geo/testdata")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := rulesHandler(t)
	h.Countries = table
	for _, tt := range []struct{ peer, want string }{
		{"8.8.8.8", "https://example.com/us"}, {"9.9.9.9", "https://example.com/us"}, {"2001:4860:4860::8888", "https://example.com/us"},
		{"194.25.2.129", "https://example.de/"}, {"2a01:4f8::1", "https://example.de/"},
		{"193.0.6.139", "https://example.com/default"},  // NL
		{"202.12.27.33", "https://example.com/default"}, // JP
		{"192.168.1.1", "https://example.com/default"},  // no country
	} {
		if status, loc, _ := serveFrom(h, tt.peer, "/country"); status != 302 || loc != tt.want {
			t.Errorf("from %s: %d %q, want %s", tt.peer, status, loc, tt.want)
		}
	}
}

// TestRulesRouteByLanguage: the Accept-Language's primary language by
// weight (q-values), malformed ranges skipped, none for a header without
// a usable range.
func TestRulesRouteByLanguage(t *testing.T) {
	h, _ := rulesHandler(t)
	fr, deEN, own := "https://example.fr/", "https://example.com/de-en", "https://example.com/default"
	for _, tt := range []struct{ header, want string }{
		{"fr", fr}, {"fr-CA", fr}, {"FR-ca", fr}, {"de-CH, en;q=0.8", deEN}, {"en-US,en;q=0.9", deEN},
		{"es, fr;q=0.9", own}, // es is preferred and no rule names it
		{"en;q=0.5, fr;q=0.9", fr}, {"*;q=1, fr;q=0.1", fr}, {"fr;q=0, de;q=0.1", deEN},
		{"fr;q=abc, de", deEN}, {"fr;q=1.5, de;q=0.2", deEN}, {"fr;level=1, de;q=0.1", deEN},
		{"deu, fre", own}, {"x-klingon", own}, {";;;,,,", own}, {"", own}, {"\xff\xfe", own},
		{strings.Repeat("zz;q=0.1,", 500) + "fr;q=0.2", fr},
	} {
		headers := []string{"Accept-Language", tt.header}
		if tt.header == "" {
			headers = nil
		}
		status, loc, vary := serveFrom(h, "192.0.2.10", "/language", headers...)
		if status != 302 || loc != tt.want || vary != "Accept-Language" {
			t.Errorf("Accept-Language %.40q: %d %q Vary %q; want 302 to %s, Vary Accept-Language", tt.header, status, loc, vary, tt.want)
		}
	}
}

// TestRulesRouteByQuery: a parameter present (any value, an empty one),
// or one of its occurrences equal, percent-decoded ('+' a space), names
// and values compared byte for byte.
func TestRulesRouteByQuery(t *testing.T) {
	h, _ := rulesHandler(t)
	mail, promo, space, own := "https://example.com/mail", "https://example.com/promo", "https://example.com/space", "https://example.com/default"
	for _, tt := range []struct{ query, want string }{
		{"?ref=mail", mail}, {"?a=1&ref=mail", mail}, {"?ref=web&ref=mail", mail}, {"?r%65f=m%61il", mail},
		{"?ref=Mail", own}, {"?REF=mail", own}, {"?ref=mail2", own}, {"?ref", own},
		{"?promo", promo}, {"?promo=", promo}, {"?promo=anything", promo}, {"?ref=web&promo=1", promo},
		{"?q=a+b", space}, {"?q=a%20b", space}, {"?q=a%2Bb", own},
		{"", own}, {"?", own}, {"?%zz=1&ref=mail", mail}, {"?ref=%0d%0a", own},
	} {
		status, loc, vary := serveFrom(h, "192.0.2.10", "/query"+tt.query)
		if status != 302 || loc != tt.want || vary != "" {
			t.Errorf("query %q: %d %q Vary %q; want 302 to %s, no Vary (the URL decides)", tt.query, status, loc, vary, tt.want)
		}
	}
}

// TestRulesAndWithinFirstMatchAcross: a rule's conditions all hold or it
// does not match; the first that matches wins.
func TestRulesAndWithinFirstMatchAcross(t *testing.T) {
	h, _ := rulesHandler(t)
	for _, tt := range []struct{ peer, ua, lang, want string }{
		{"192.0.2.12", uaAndroid, "", "https://example.com/us-android"},
		{"192.0.2.10", uaAndroid, "", "https://example.com/android"},
		{"192.0.2.12", uaIPhone, "es", "https://example.com/us-es"},
		{"192.0.2.12", uaAndroid, "es", "https://example.com/us-android"}, // the first that holds
		{"192.0.2.10", uaIPhone, "es", "https://example.com/default"},
	} {
		_, loc, vary := serveFrom(h, tt.peer, "/combined", "User-Agent", tt.ua, "Accept-Language", tt.lang)
		if loc != tt.want || vary != "User-Agent, Accept-Language" {
			t.Errorf("%s %.20s %s: %q Vary %q; want %s", tt.peer, tt.ua, tt.lang, loc, vary, tt.want)
		}
	}
}

// TestRuleLinksEverywhere: rules hold wherever the link is found: the
// snapshot, the overlay, the long-tail cache or the authority; a rule
// link that is disabled or expired is 410 before any rule.
func TestRuleLinksEverywhere(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	x := []byte(extrasOf(t, link.Extras{Rules: devices}))
	a := snapshotLayers(t, store.NewOverlay(), []snapshot.Link{
		{Code: "snap01", URL: "https://example.com/default", RedirectType: 307, Status: link.Active, Extras: x},
		{Code: "snapof", URL: "https://example.com/default", RedirectType: 302, Status: link.Disabled},
		{Code: "snapex", URL: "https://example.com/default", RedirectType: 302, Status: link.Active, ExpiresAt: now.UnixMilli(), Extras: x},
	}, snapshot.Header{ChangeVersion: 10, StreamSeq: 10})
	a.Apply(&store.Entry{Code: "over01", URL: "https://example.com/default", RedirectType: 301, Status: link.Active, Version: 11, Extras: string(x)})
	h := &Handler{Store: a, Now: func() time.Time { return now },
		Miss: fixedResolver{e: &store.Entry{Code: "auth01", URL: "https://example.com/default", RedirectType: 308, Status: link.Active, Version: 12, Extras: string(x)},
			outcome: resolve.Found}}
	for _, tt := range []struct {
		code   string
		status int
	}{{"snap01", 307}, {"over01", 301}, {"auth01", 308}} {
		for _, ua := range []struct{ ua, want string }{{uaIPhone, devices[0].URL}, {uaAndroid, devices[1].URL}, {uaMac, devices[2].URL}, {uaCurl, "https://example.com/default"}} {
			if status, loc, _ := serveFrom(h, "192.0.2.1", "/"+tt.code, "User-Agent", ua.ua); status != tt.status || loc != ua.want {
				t.Errorf("%s for %.30s: %d %q; want %d to %s", tt.code, ua.ua, status, loc, tt.status, ua.want)
			}
		}
	}
	for _, code := range []string{"snapof", "snapex"} {
		if status, loc, _ := serveFrom(h, "192.0.2.1", "/"+code, "User-Agent", uaIPhone); status != 410 || loc != "" {
			t.Errorf("%s: %d %q; want 410", code, status, loc)
		}
	}
}

// TestPlainAndRuleHitsDoNotAllocate: a plain link, a link with three
// rules (device, device, country), query rules and every kind of rule at
// once, each with a click recorded into the real ring: no allocation.
func TestPlainAndRuleHitsDoNotAllocate(t *testing.T) {
	h, _ := rulesHandler(t)
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 20})
	three := &store.Entry{Code: "three3", URL: "https://example.com/default", RedirectType: 302, Status: link.Active, Version: 100,
		Extras: extrasOf(t, link.Extras{Rules: []link.Rule{devices[0], devices[1], countries[0]}})}
	h.Store.(*store.Overlay).Apply(three)
	for _, tt := range []struct {
		uri     string
		headers []string
	}{
		{"/plain0", []string{"User-Agent", uaIPhone}},
		{"/three3", []string{"User-Agent", uaIPhone}},
		{"/three3", []string{"User-Agent", uaWindows}}, // no rule: all three tried, country looked up
		{"/query?a=1&ref=mail", nil},
		{"/query?q=a+b", nil},
		{"/combined", []string{"User-Agent", uaAndroid, "Accept-Language", "es-MX,es;q=0.9"}},
		{"/language", []string{"Accept-Language", "de-CH, en;q=0.8"}},
	} {
		ctx := fromPeer("192.0.2.12", tt.uri, tt.headers...)
		if n := hitAllocs(h, ctx); n != 0 {
			t.Errorf("GET %s: %v allocations per hit", tt.uri, n)
		}
		if ctx.Response.StatusCode() != 302 {
			t.Errorf("GET %s: %d", tt.uri, ctx.Response.StatusCode())
		}
	}
}

// BenchmarkRuleHit is a link with three rules (iOS, Android, a country)
// asked by a desktop client: every rule tried, the UA classified and the
// country looked up, the link's own target served, the click recorded;
// BenchmarkPlainHit the same handler's plain link. Their ratio is the
// rules' cost in the handler alone (bench/edge has it at 1M links).
func BenchmarkRuleHit(b *testing.B) {
	benchRules(b, "/three3")
}

func BenchmarkPlainHit(b *testing.B) {
	benchRules(b, "/plain0")
}

func benchRules(b *testing.B, uri string) {
	h, _ := rulesHandler(b)
	h.Now = nil
	h.Clicks = clickpub.New(nil, clickpub.Config{Buffer: 1 << 10})
	table, err := geo.LoadTor("../geo/testdata")
	if err != nil {
		b.Fatal(err)
	}
	h.Countries = table
	h.Store.(*store.Overlay).Apply(&store.Entry{Code: "three3", URL: "https://example.com/default", RedirectType: 302, Status: link.Active, Version: 100,
		Extras: extrasOf(b, link.Extras{Rules: []link.Rule{devices[0], devices[1], countries[0]}})})
	ctx := fromPeer("8.8.8.8", uri, "User-Agent", uaWindows, "Accept-Language", "en-US,en;q=0.9")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.Serve(ctx)
	}
	if ctx.Response.StatusCode() != fasthttp.StatusFound {
		b.Fatalf("status %d", ctx.Response.StatusCode())
	}
}

// TestDeviceCacheAgreesWithTheClassifier: the cache answers what
// RuleDevice answers, for User-Agents seen once or many times, colliding
// in slots, longer than the classifier reads, and from many goroutines at
// once (run under -race).
func TestDeviceCacheAgreesWithTheClassifier(t *testing.T) {
	var c deviceCache
	uas := []string{uaIPhone, uaIPad, uaInstagram, uaAndroid, uaAndroidTb, uaWindows, uaMac, uaLinux, uaChromeOS, uaSmartTV, uaWinPhone, uaCurl, "",
		strings.Repeat("x", 300) + " iPhone", uaWindows + strings.Repeat(" x", 200) + " Android"}
	for i := range 3 * deviceSlots { // more than the slots: entries replace each other
		uas = append(uas, fmt.Sprintf("Mozilla/5.0 (%s; n%d)", []string{"iPhone", "Linux; Android 14; Mobile", "Windows NT 10.0", "SMART-TV"}[i%4], i))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 3 {
				for i := range uas {
					ua := uas[(i+g*7+round)%len(uas)]
					if got, want := c.of([]byte(ua)), RuleDevice([]byte(ua)); got != want {
						t.Errorf("%.60q: cache %v, classifier %v", ua, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
