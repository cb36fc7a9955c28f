package redirect

import (
	"bytes"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

const (
	pwTarget   = "https://secret.example.com/the-target?k=v"
	rightPw    = "correct horse"
	rulePwAlt  = "https://secret.example.com/ios-target"
	formAction = "/pw0001/unlock"
)

// pwEnv is a handler serving password-protected links from the overlay,
// with a Gate of cheap hashes and a clock the test moves.
type pwEnv struct {
	h     *Handler
	gate  *unlock.Gate
	hash  string
	now   time.Time
	mu    sync.Mutex
	store *store.Overlay
	rec   *lastClick
}

func (e *pwEnv) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }

func (e *pwEnv) advance(d time.Duration) { e.mu.Lock(); e.now = e.now.Add(d); e.mu.Unlock() }

func newPwEnv(t testing.TB, cfg unlock.Config) *pwEnv {
	t.Helper()
	hash, err := passhash.Hash([]byte(rightPw), passhash.Params{Memory: passhash.MinMemory, Time: 1, Threads: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &pwEnv{hash: hash, now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), store: store.NewOverlay(), rec: &lastClick{}}
	if cfg.Now == nil {
		cfg.Now = e.clock
	}
	e.gate = unlock.New(cfg)
	pw := extrasOf(t, link.Extras{PasswordHash: hash})
	both := extrasOf(t, link.Extras{PasswordHash: hash, Rules: []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: rulePwAlt}}})
	for i, l := range []*store.Entry{
		{Code: "pw0001", URL: pwTarget, Extras: pw},
		{Code: "pw0002", URL: pwTarget + "2", Extras: pw},
		{Code: "pwrule", URL: pwTarget, Extras: both},
		{Code: "pwgone", URL: pwTarget, Extras: pw, Status: link.Disabled},
		{Code: "pwexp1", URL: pwTarget, Extras: pw, ExpiresAt: e.now.UnixMilli()},
		{Code: "plain1", URL: "https://example.com/plain"},
	} {
		l.RedirectType, l.Version = 302, uint64(i+1)
		if l.Status == "" {
			l.Status = link.Active
		}
		if !e.store.Apply(l) {
			t.Fatalf("overlay refused %s", l.Code)
		}
	}
	e.h = &Handler{Store: e.store, Unlock: e.gate, Clicks: e.rec, Now: e.clock}
	return e
}

// call serves a request: method, uri, body (a form when not empty) and
// headers, from peer.
func (e *pwEnv) call(method, uri, peer, body string, headers ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if body != "" {
		if len(req.Header.ContentType()) == 0 || string(req.Header.ContentType()) == "text/plain; charset=utf-8" {
			req.Header.SetContentType("application/x-www-form-urlencoded")
		}
		req.SetBodyString(body)
	}
	ctx := new(fasthttp.RequestCtx)
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 4711}, nil)
	e.h.Serve(ctx)
	return ctx
}

// form is what a password form gave: its token and its cookie's value.
type form struct{ token, nonce string }

var tokenField = regexp.MustCompile(`name="csrf" value="([A-Za-z0-9_-]+)"`)

// cookieOf parses the Set-Cookie for name, failing when there is none.
func cookieOf(t testing.TB, ctx *fasthttp.RequestCtx, name string) *fasthttp.Cookie {
	t.Helper()
	raw := ctx.Response.Header.PeekCookie(name)
	if raw == nil {
		t.Fatalf("no Set-Cookie %s in\n%s", name, &ctx.Response.Header)
	}
	c := new(fasthttp.Cookie)
	if err := c.ParseBytes(raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// formOf checks ctx is the password form (status) and returns its token
// and cookie.
func formOf(t testing.TB, ctx *fasthttp.RequestCtx, status int, code string) form {
	t.Helper()
	if got := ctx.Response.StatusCode(); got != status {
		t.Fatalf("status %d, want the form with %d; body %s", got, status, ctx.Response.Body())
	}
	checkPrivatePage(t, ctx)
	m := tokenField.FindSubmatch(ctx.Response.Body())
	if m == nil {
		t.Fatalf("no token in the form:\n%s", ctx.Response.Body())
	}
	c := cookieOf(t, ctx, "elk_form")
	if string(c.Path()) != "/"+code || !c.HTTPOnly() || c.SameSite() != fasthttp.CookieSameSiteStrictMode || c.MaxAge() != 3600 || c.Secure() {
		t.Fatalf("form cookie %s: want Path=/%s, HttpOnly, SameSite=Strict, Max-Age=3600, not Secure over plain HTTP", c, code)
	}
	return form{token: string(m[1]), nonce: string(c.Value())}
}

// checkPrivatePage checks a form page's headers: no cache, no framing,
// no referrer, no index, no script; and never a Location.
func checkPrivatePage(t testing.TB, ctx *fasthttp.RequestCtx) {
	t.Helper()
	h := &ctx.Response.Header
	for name, want := range map[string]string{
		"Cache-Control": "private, no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
		"X-Frame-Options": "DENY", "X-Robots-Tag": "noindex, nofollow, noarchive", "Content-Type": "text/html; charset=utf-8",
		"Content-Security-Policy": unlock.ContentSecurityPolicy, "Location": "",
	} {
		if got := string(h.Peek(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// checkNoTarget fails when the link's target (or a rule's) shows anywhere
// in the answer: body, any header, any cookie.
func checkNoTarget(t testing.TB, what string, ctx *fasthttp.RequestCtx) {
	t.Helper()
	all := append(ctx.Response.Header.Header(), ctx.Response.Body()...)
	for _, secret := range []string{"secret.example.com", "the-target", "ios-target"} {
		if bytes.Contains(all, []byte(secret)) {
			t.Errorf("%s: the answer shows %q:\n%s", what, secret, all)
		}
	}
}

func (e *pwEnv) post(code, peer string, f form, password string, headers ...string) *fasthttp.RequestCtx {
	body := "password=" + password + "&csrf=" + f.token
	return e.call("POST", "/"+code+"/unlock", peer, body, append([]string{"Cookie", "elk_form=" + f.nonce}, headers...)...)
}

// TestPasswordFlow: the form without the target, a wrong password (403,
// the form again), the right one (the cookie, 303 to the link), then the
// redirect with the cookie; HEAD like GET; the cookie of one link opens no
// other, not after a password change, not past its time, not tampered.
func TestPasswordFlow(t *testing.T) {
	e := newPwEnv(t, unlock.Config{})
	ctx := e.call("GET", "/pw0001", "192.0.2.1", "")
	checkNoTarget(t, "GET", ctx)
	f := formOf(t, ctx, 200, "pw0001")
	if !bytes.Contains(ctx.Response.Body(), []byte(`action="`+formAction+`"`)) {
		t.Fatalf("form does not post to %s:\n%s", formAction, ctx.Response.Body())
	}
	if e.rec.n != 0 || e.h.Counters.PasswordForms.Load() != 1 || e.h.Counters.Hits.Load() != 0 {
		t.Fatalf("a form view counted as a click (%d clicks, %d hits)", e.rec.n, e.h.Counters.Hits.Load())
	}
	head := e.call("HEAD", "/pw0001", "192.0.2.1", "")
	checkNoTarget(t, "HEAD", head)
	formOf(t, head, 200, "pw0001")

	wrong := e.post("pw0001", "192.0.2.1", f, "wrong+horse")
	checkNoTarget(t, "wrong password", wrong)
	f2 := formOf(t, wrong, 403, "pw0001")
	if !bytes.Contains(wrong.Response.Body(), []byte("not right")) {
		t.Fatalf("a wrong password's page does not say so:\n%s", wrong.Response.Body())
	}

	right := e.post("pw0001", "192.0.2.1", f2, "correct+horse")
	checkNoTarget(t, "right password", right)
	if right.Response.StatusCode() != 303 || string(right.Response.Header.Peek("Location")) != "/pw0001" {
		t.Fatalf("right password: %d Location %q, want 303 to /pw0001", right.Response.StatusCode(), right.Response.Header.Peek("Location"))
	}
	c := cookieOf(t, right, "elk_unlock")
	if string(c.Path()) != "/pw0001" || !c.HTTPOnly() || c.SameSite() != fasthttp.CookieSameSiteLaxMode || c.MaxAge() != 3600 || len(c.Value()) != unlock.TokenLen {
		t.Fatalf("unlock cookie %s: want Path=/pw0001, HttpOnly, SameSite=Lax, Max-Age=3600", c)
	}
	cookie := "elk_unlock=" + string(c.Value())

	open := e.call("GET", "/pw0001", "192.0.2.99", "", "Cookie", cookie) // another address: the cookie is the browser's
	if open.Response.StatusCode() != 302 || string(open.Response.Header.Peek("Location")) != pwTarget {
		t.Fatalf("with the cookie: %d %q, want 302 to the target", open.Response.StatusCode(), open.Response.Header.Peek("Location"))
	}
	if v := string(open.Response.Header.Peek("Vary")); v != "Cookie" {
		t.Errorf("Vary %q, want Cookie", v)
	}
	if e.rec.n != 1 || e.rec.status != 302 {
		t.Errorf("clicks %d status %d after the unlocked redirect, want 1 and 302", e.rec.n, e.rec.status)
	}

	refused := func(what, code, cookie string) {
		t.Helper()
		ctx := e.call("GET", "/"+code, "192.0.2.1", "", "Cookie", cookie)
		checkNoTarget(t, what, ctx)
		formOf(t, ctx, 200, code)
	}
	refused("another link's cookie", "pw0002", cookie)
	tampered := []byte(cookie)
	tampered[len(tampered)-3] ^= 1
	refused("a tampered cookie", "pw0001", string(tampered))
	refused("another domain's cookie", "pw0001", "elk_unlock="+string(e.gate.AppendCookie(nil, 5, []byte("pw0001"), []byte(e.hash), e.clock().Unix())))
	refused("a stranger's key", "pw0001", "elk_unlock="+string(unlock.New(unlock.Config{}).AppendCookie(nil, 0, []byte("pw0001"), []byte(e.hash), e.clock().Unix())))
	refused("garbage", "pw0001", "elk_unlock=%00%0d%0a;;=")
	if e.h.Counters.CookiesRefused.Load() != 5 {
		t.Errorf("cookies refused %d, want 5", e.h.Counters.CookiesRefused.Load())
	}

	// A password change (a new hash) refuses the old cookie.
	newHash, _ := passhash.Hash([]byte(rightPw), passhash.Params{Memory: passhash.MinMemory, Time: 1, Threads: 1}, nil)
	e.store.Apply(&store.Entry{Code: "pw0001", URL: pwTarget, RedirectType: 302, Status: link.Active, Version: 50,
		Extras: extrasOf(t, link.Extras{PasswordHash: newHash})})
	refused("a cookie from before a password change", "pw0001", cookie)
	e.store.Apply(&store.Entry{Code: "pw0001", URL: pwTarget, RedirectType: 302, Status: link.Active, Version: 51,
		Extras: extrasOf(t, link.Extras{PasswordHash: e.hash})})
	if ctx := e.call("GET", "/pw0001", "192.0.2.1", "", "Cookie", cookie); ctx.Response.StatusCode() != 302 {
		t.Fatalf("the password set back: %d", ctx.Response.StatusCode())
	}
	// Past its hour, the cookie is refused.
	e.advance(time.Hour)
	refused("an expired cookie", "pw0001", cookie)
	// The password removed: the link redirects without asking.
	e.store.Apply(&store.Entry{Code: "pw0001", URL: pwTarget, RedirectType: 302, Status: link.Active, Version: 52})
	if ctx := e.call("GET", "/pw0001", "192.0.2.1", ""); ctx.Response.StatusCode() != 302 {
		t.Fatalf("password removed: %d", ctx.Response.StatusCode())
	}
}

// TestPasswordAndRules: a protected link with rules asks first, then
// routes; the query string rides through the form and the 303.
func TestPasswordAndRules(t *testing.T) {
	e := newPwEnv(t, unlock.Config{})
	ctx := e.call("GET", "/pwrule?ref=mail&x=%22%3E", "192.0.2.1", "", "User-Agent", uaIPhone)
	checkNoTarget(t, "GET", ctx)
	f := formOf(t, ctx, 200, "pwrule")
	if want := `action="/pwrule/unlock?ref=mail&amp;x=%22%3E"`; !bytes.Contains(ctx.Response.Body(), []byte(want)) {
		t.Fatalf("form action: want %s in\n%s", want, ctx.Response.Body())
	}
	right := e.call("POST", "/pwrule/unlock?ref=mail&x=%22%3E", "192.0.2.1", "password=correct+horse&csrf="+f.token, "Cookie", "elk_form="+f.nonce)
	if loc := string(right.Response.Header.Peek("Location")); right.Response.StatusCode() != 303 || loc != "/pwrule?ref=mail&x=%22%3E" {
		t.Fatalf("right password: %d %q", right.Response.StatusCode(), loc)
	}
	cookie := "elk_unlock=" + string(cookieOf(t, right, "elk_unlock").Value())
	for _, tt := range []struct{ ua, want string }{{uaIPhone, rulePwAlt}, {uaWindows, pwTarget}} {
		ctx := e.call("GET", "/pwrule", "192.0.2.1", "", "Cookie", cookie, "User-Agent", tt.ua)
		if loc := string(ctx.Response.Header.Peek("Location")); ctx.Response.StatusCode() != 302 || loc != tt.want {
			t.Errorf("%.20s: %d %q, want %s", tt.ua, ctx.Response.StatusCode(), loc, tt.want)
		}
		if v := string(ctx.Response.Header.Peek("Vary")); v != "User-Agent, Cookie" {
			t.Errorf("Vary %q", v)
		}
	}
}

// TestPasswordLinkStates: a protected link that is disabled or expired is
// 410 without a form, to GET and to a post; a post to a plain link goes
// back to it, to an unknown code 404; the form's address opened is 303 to
// the link; methods other than POST there are 405; an edge without a Gate
// never redirects a protected link.
func TestPasswordLinkStates(t *testing.T) {
	e := newPwEnv(t, unlock.Config{})
	f := formOf(t, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	for _, code := range []string{"pwgone", "pwexp1"} {
		for _, ctx := range []*fasthttp.RequestCtx{e.call("GET", "/"+code, "192.0.2.1", ""), e.post(code, "192.0.2.1", f, "correct+horse")} {
			checkNoTarget(t, code, ctx)
			if ctx.Response.StatusCode() != 410 || bytes.Contains(ctx.Response.Body(), []byte("<form")) {
				t.Errorf("%s %s: %d, want 410 without a form", ctx.Method(), code, ctx.Response.StatusCode())
			}
		}
	}
	if ctx := e.post("plain1", "192.0.2.1", f, "x"); ctx.Response.StatusCode() != 303 || string(ctx.Response.Header.Peek("Location")) != "/plain1" {
		t.Errorf("post to a plain link: %d %q", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
	}
	if ctx := e.post("nolink", "192.0.2.1", f, "x"); ctx.Response.StatusCode() != 404 {
		t.Errorf("post to an unknown code: %d", ctx.Response.StatusCode())
	}
	for _, m := range []string{"GET", "HEAD"} {
		if ctx := e.call(m, "/pw0001/unlock?ref=1", "192.0.2.1", ""); ctx.Response.StatusCode() != 303 || string(ctx.Response.Header.Peek("Location")) != "/pw0001?ref=1" {
			t.Errorf("%s of the form's address: %d %q", m, ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
		}
	}
	for _, tt := range []struct{ method, uri, allow string }{
		{"PUT", "/pw0001/unlock", "GET, HEAD, POST"}, {"DELETE", "/pw0001/unlock", "GET, HEAD, POST"},
		{"POST", "/pw0001", "GET, HEAD"}, {"POST", "/ab/unlock", "GET, HEAD"}, {"POST", "/pw0001/unlock/x", "GET, HEAD"},
		{"POST", "/-/unlock", "GET, HEAD"},
	} {
		ctx := e.call(tt.method, tt.uri, "192.0.2.1", "password=x&csrf="+f.token)
		if ctx.Response.StatusCode() != 405 || string(ctx.Response.Header.Peek("Allow")) != tt.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tt.method, tt.uri, ctx.Response.StatusCode(), ctx.Response.Header.Peek("Allow"), tt.allow)
		}
	}
	e.h.Unlock = nil
	for _, ctx := range []*fasthttp.RequestCtx{e.call("GET", "/pw0001", "192.0.2.1", ""), e.post("pw0001", "192.0.2.1", f, "correct+horse")} {
		checkNoTarget(t, "without a gate", ctx)
		if ctx.Response.StatusCode() != 503 {
			t.Errorf("%s without a gate: %d, want 503", ctx.Method(), ctx.Response.StatusCode())
		}
	}
}

// TestPasswordPostsHostile: bodies that are no form, too large, of another
// type; a missing, foreign or expired token; a post from another site; a
// password no link can have (non-UTF-8, CR LF, too long): each refused
// with the form (or a plain 413/415), never a redirect, never the target.
func TestPasswordPostsHostile(t *testing.T) {
	e := newPwEnv(t, unlock.Config{ClientRate: -1, LinkRate: -1})
	f := formOf(t, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	other := formOf(t, e.call("GET", "/pw0002", "192.0.2.1", ""), 200, "pw0002")
	good := "password=correct+horse&csrf=" + f.token
	cookie := "elk_form=" + f.nonce
	for _, tt := range []struct {
		name    string
		body    string
		headers []string
		status  int
	}{
		{"too large", good + "&pad=" + strings.Repeat("x", unlock.MaxBodyLen), []string{"Cookie", cookie}, 413},
		{"JSON", `{"password":"correct horse"}`, []string{"Cookie", cookie, "Content-Type", "application/json"}, 415},
		{"multipart", good, []string{"Cookie", cookie, "Content-Type", "multipart/form-data; boundary=x"}, 415},
		{"no token", "password=correct+horse", []string{"Cookie", cookie}, 400},
		{"a bad escape", "password=%zz&csrf=" + f.token, []string{"Cookie", cookie}, 400},
		{"the password twice", good + "&password=x", []string{"Cookie", cookie}, 400},
		{"no form cookie", good, nil, 403},
		{"another form's cookie", good, []string{"Cookie", "elk_form=" + other.nonce}, 403},
		{"another link's token", "password=correct+horse&csrf=" + other.token, []string{"Cookie", "elk_form=" + other.nonce}, 403},
		{"a garbled token", "password=correct+horse&csrf=" + strings.Repeat("A", unlock.TokenLen), []string{"Cookie", cookie}, 403},
		{"cross-site", good, []string{"Cookie", cookie, "Sec-Fetch-Site", "cross-site"}, 403},
		{"same-site", good, []string{"Cookie", cookie, "Sec-Fetch-Site", "same-site"}, 403},
		{"another origin", good, []string{"Cookie", cookie, "Origin", "https://evil.example"}, 403},
		{"non-UTF-8", "password=%ff%fe%fd%fc%fb%fa&csrf=" + f.token, []string{"Cookie", cookie}, 403},
		{"CR LF", "password=correct%0d%0ahorse&csrf=" + f.token, []string{"Cookie", cookie}, 403},
		{"NUL", "password=correct%00horse&csrf=" + f.token, []string{"Cookie", cookie}, 403},
		{"too long", "password=" + strings.Repeat("y", 300) + "&csrf=" + f.token, []string{"Cookie", cookie}, 403},
		{"empty", "password=&csrf=" + f.token, []string{"Cookie", cookie}, 403},
	} {
		ctx := e.call("POST", formAction, "192.0.2.1", tt.body, tt.headers...)
		checkNoTarget(t, tt.name, ctx)
		if ctx.Response.StatusCode() != tt.status || ctx.Response.Header.PeekCookie("elk_unlock") != nil {
			t.Errorf("%s: %d, want %d and no unlock cookie", tt.name, ctx.Response.StatusCode(), tt.status)
		}
		if tt.status == 400 || tt.status == 403 {
			formOf(t, ctx, tt.status, "pw0001")
		}
	}
	if n := e.gate.Attempts[unlock.Right].Load() + e.gate.Attempts[unlock.Wrong].Load(); n != 5 {
		t.Errorf("%d attempts counted; only the 5 well-formed posts are attempts", n)
	}
	// Origin null (what a page with Referrer-Policy: no-referrer sends)
	// and the edge's own origin are the form's own posts.
	for _, origin := range []string{"null", "http://example.com"} {
		ctx := e.call("POST", formAction, "192.0.2.1", good, "Cookie", cookie, "Origin", origin, "Sec-Fetch-Site", "same-origin", "Host", "example.com")
		if ctx.Response.StatusCode() != 303 {
			t.Errorf("Origin %s: %d, want 303", origin, ctx.Response.StatusCode())
		}
	}
	// An expired form: its token and cookie outlive FormTTL no longer.
	e.advance(time.Hour)
	if ctx := e.call("POST", formAction, "192.0.2.1", good, "Cookie", cookie); ctx.Response.StatusCode() != 403 {
		t.Errorf("an hour-old form: %d, want 403", ctx.Response.StatusCode())
	}
}

// TestPasswordAttemptsLimited: a client past its attempts gets 429 with
// Retry-After and the form, even with the right password; other clients
// go on until the link's attempts are spent; a refill lets one more in.
func TestPasswordAttemptsLimited(t *testing.T) {
	e := newPwEnv(t, unlock.Config{ClientRate: 0.5, ClientBurst: 3, LinkRate: 1, LinkBurst: 5})
	f := formOf(t, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	statuses := func(peer string, n int, password string) []int {
		var out []int
		for range n {
			ctx := e.post("pw0001", peer, f, password)
			checkNoTarget(t, "attempt", ctx)
			out = append(out, ctx.Response.StatusCode())
			if ctx.Response.StatusCode() == 429 {
				if ra := string(ctx.Response.Header.Peek("Retry-After")); ra == "" {
					t.Errorf("429 without Retry-After")
				}
				formOf(t, ctx, 429, "pw0001")
			}
		}
		return out
	}
	if got := statuses("192.0.2.1", 5, "wrong+horse"); !equalInts(got, []int{403, 403, 403, 429, 429}) {
		t.Fatalf("one client's 5 wrong attempts: %v", got)
	}
	if got := statuses("192.0.2.1", 1, "correct+horse"); !equalInts(got, []int{429}) {
		t.Fatalf("the right password past the client's budget: %v, want 429", got)
	}
	if got := statuses("192.0.2.2", 3, "wrong+horse"); !equalInts(got, []int{403, 403, 429}) {
		t.Fatalf("a second client, the link's 4th to 6th attempts: %v", got)
	}
	if got := statuses("2001:db8::5", 1, "correct+horse"); !equalInts(got, []int{429}) {
		t.Fatalf("a third client on a spent link: %v", got)
	}
	e.advance(2 * time.Second) // 2 link tokens, 1 client token
	if got := statuses("192.0.2.3", 1, "correct+horse"); !equalInts(got, []int{303}) {
		t.Fatalf("after a refill: %v", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPasswordVerificationsBounded: with every verification slot held, a
// post is answered 503 with Retry-After and the form once its short wait
// is over; the held one goes on. Verify is held open by the test (a real
// argon2id is over too soon and unsteadily to fill the slots on cue).
func TestPasswordVerificationsBounded(t *testing.T) {
	hold, started := make(chan struct{}), make(chan struct{}, 1)
	e := newPwEnv(t, unlock.Config{Verifiers: 1, VerifyWait: 10 * time.Millisecond, ClientRate: -1, LinkRate: -1,
		Verify: func(hash, password []byte) (bool, error) {
			started <- struct{}{}
			<-hold
			return passhash.Verify(hash, password)
		}})
	f := formOf(t, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	first := make(chan int, 1)
	go func() { first <- e.post("pw0001", "192.0.2.1", f, "correct+horse").Response.StatusCode() }()
	<-started
	busy := e.post("pw0001", "192.0.2.2", f, "correct+horse")
	checkNoTarget(t, "busy", busy)
	if busy.Response.StatusCode() != 503 || string(busy.Response.Header.Peek("Retry-After")) != "1" {
		t.Fatalf("with the one slot held: %d Retry-After %q, want 503 and 1", busy.Response.StatusCode(), busy.Response.Header.Peek("Retry-After"))
	}
	formOf(t, busy, 503, "pw0001")
	close(hold)
	if s := <-first; s != 303 {
		t.Fatalf("the held attempt: %d", s)
	}
}

// TestUnlockedHitDoesNotAllocate: a protected link opened by its cookie
// costs no allocation (the cookie's MAC state is pooled).
func TestUnlockedHitDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items on purpose")
	}
	e := newPwEnv(t, unlock.Config{})
	c := e.gate.AppendCookie(nil, 0, []byte("pw0001"), []byte(e.hash), e.clock().Unix())
	ctx := fromPeer("192.0.2.1", "/pw0001", "Cookie", "elk_unlock="+string(c))
	e.h.Clicks = nil
	if n := hitAllocs(e.h, ctx); n != 0 {
		t.Fatalf("%v allocations per unlocked hit", n)
	}
	if ctx.Response.StatusCode() != 302 {
		t.Fatalf("status %d", ctx.Response.StatusCode())
	}
}

// TestPasswordOverTheWire: the whole flow through a real fasthttp server
// and client, the client keeping cookies as a browser does: HEAD has the
// form's headers and no body; the form, the post, the 303 and the
// redirect; over a trusted proxy saying https the cookies are Secure.
func TestPasswordOverTheWire(t *testing.T) {
	e := newPwEnv(t, unlock.Config{})
	e.h.FromProxy = func(ctx *fasthttp.RequestCtx) bool { return true }
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: e.h.Serve, MaxRequestBodySize: 4 << 10, NoDefaultServerHeader: true, Logger: quiet{}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = ln.Close()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	client := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	do := func(method, uri, body string, headers ...string) *fasthttp.Response {
		req, resp := fasthttp.AcquireRequest(), new(fasthttp.Response)
		defer fasthttp.ReleaseRequest(req)
		req.Header.SetMethod(method)
		req.SetRequestURI("http://sho.rt" + uri)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		if body != "" {
			req.Header.SetContentType("application/x-www-form-urlencoded")
			req.SetBodyString(body)
		}
		if err := client.Do(req, resp); err != nil {
			t.Fatalf("%s %s: %v", method, uri, err)
		}
		return resp
	}
	head := do("HEAD", "/pw0001", "", "X-Forwarded-Proto", "https")
	if head.StatusCode() != 200 || len(head.Body()) != 0 || string(head.Header.Peek("Content-Security-Policy")) != unlock.ContentSecurityPolicy {
		t.Fatalf("HEAD: %d body %d bytes CSP %q", head.StatusCode(), len(head.Body()), head.Header.Peek("Content-Security-Policy"))
	}
	get := do("GET", "/pw0001", "", "X-Forwarded-Proto", "https")
	m := tokenField.FindSubmatch(get.Body())
	var fc fasthttp.Cookie
	fc.SetKey("elk_form")
	if m == nil || !get.Header.Cookie(&fc) || !fc.Secure() {
		t.Fatalf("GET: no token or no Secure form cookie behind https (%s)", &get.Header)
	}
	post := do("POST", "/pw0001/unlock", "password=correct+horse&csrf="+string(m[1]), "Cookie", "elk_form="+string(fc.Value()), "X-Forwarded-Proto", "https",
		"Origin", "null", "Sec-Fetch-Site", "same-origin")
	var uc fasthttp.Cookie
	uc.SetKey("elk_unlock")
	if post.StatusCode() != 303 || !post.Header.Cookie(&uc) || !uc.Secure() || bytes.Contains(post.Header.Header(), []byte("secret.example.com")) {
		t.Fatalf("POST: %d\n%s", post.StatusCode(), &post.Header)
	}
	open := do("GET", string(post.Header.Peek("Location")), "", "Cookie", "elk_unlock="+string(uc.Value()))
	if open.StatusCode() != 302 || string(open.Header.Peek("Location")) != pwTarget {
		t.Fatalf("GET with the cookie: %d %q", open.StatusCode(), open.Header.Peek("Location"))
	}
	big := do("POST", "/pw0001/unlock", "password="+strings.Repeat("x", 8<<10)+"&csrf="+string(m[1]), "Cookie", "elk_form="+string(fc.Value()))
	if s := big.StatusCode(); s != 400 && s != 413 || big.Header.PeekCookie("elk_unlock") != nil {
		t.Fatalf("an 8 KiB post: %d, want the server's refusal (400 or 413)", s)
	}
}

// quiet is a fasthttp logger that keeps the server's refusals out of the
// test output.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// FuzzUnlockPost: whatever a post's body, the answer never shows the
// target, is one of the statuses the flow has, and opens the link (303
// with the unlock cookie) only when the body carried the right password
// and the form's token.
func FuzzUnlockPost(f *testing.F) {
	for _, s := range []string{"password=correct+horse&csrf=", "password=wrong&csrf=", "csrf=&password=%63orrect%20horse", "password=%ff&csrf=", "&&==&csrf=", "%"} {
		f.Add([]byte(s), true)
	}
	e := newPwEnv(f, unlock.Config{ClientRate: -1, LinkRate: -1})
	fm := formOf(f, e.call("GET", "/pw0001", "192.0.2.1", ""), 200, "pw0001")
	f.Fuzz(func(t *testing.T, body []byte, withToken bool) {
		if withToken {
			body = append(append(bytes.Clone(body), fm.token...), "&x"...)
		}
		ctx := e.call("POST", formAction, "192.0.2.1", string(body)+"&", "Cookie", "elk_form="+fm.nonce)
		checkNoTarget(t, "fuzzed post", ctx)
		var parsed unlock.Form
		right := unlock.ParseForm(append(body, '&'), &parsed) == nil && string(parsed.Password) == rightPw && !parsed.TooLong &&
			string(parsed.Token) == fm.token
		switch s := ctx.Response.StatusCode(); {
		case s == 303:
			if !right || ctx.Response.Header.PeekCookie("elk_unlock") == nil {
				t.Fatalf("303 for %q (right password: %v)", body, right)
			}
		case s == 400 || s == 403 || s == 413:
			if right && s == 403 {
				t.Fatalf("the right password refused: %q", body)
			}
			if ctx.Response.Header.PeekCookie("elk_unlock") != nil {
				t.Fatalf("an unlock cookie with %d", s)
			}
		default:
			t.Fatalf("status %d for %q", s, body)
		}
	})
}
