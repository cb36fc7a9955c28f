package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/links"
)

func TestSessionCookieFlags(t *testing.T) {
	secure := true
	for _, c := range []struct {
		name       string
		cfg        console.Config
		cookie     string
		wantSecure bool
	}{
		{"http", console.Config{PublicURL: "http://sho.rt"}, "elk_console", false},
		{"https public URL", console.Config{PublicURL: "https://sho.rt"}, "__Host-elk_console", true},
		{"behind TLS", console.Config{PublicURL: "http://sho.rt", Secure: &secure}, "__Host-elk_console", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.cfg)
			b := e.browser("10.0.0.1")
			b.signIn(t, e.key)
			got := b.cookies[c.cookie]
			if got == nil {
				t.Fatalf("no cookie %s; have %v", c.cookie, b.cookies)
			}
			if !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.Secure != c.wantSecure || got.Path != "/" {
				t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, Secure=%v, Path=/", got, c.wantSecure)
			}
			if d := got.Expires.Sub(e.clock.now()); d <= 0 || d > console.DefaultMaxLifetime {
				t.Errorf("cookie expires in %v; want within the session's %v", d, console.DefaultMaxLifetime)
			}
			if strings.Contains(got.Value, e.key) {
				t.Error("the cookie holds the API key")
			}
		})
	}
}

func TestSignInRefusals(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.0.2")
	w := b.do("GET", "/console/sign-in", nil)
	token := csrf(t, w)

	// No pre-session token, or another one: another site posted it.
	other := e.browser("10.0.0.2")
	if w := other.do("POST", "/console/sign-in", url.Values{"csrf": {token}, "key": {e.key}}); w.Code != http.StatusForbidden {
		t.Errorf("sign-in without the form's cookie: %d; want 403", w.Code)
	}
	if w := b.do("POST", "/console/sign-in", url.Values{"csrf": {token + "x"}, "key": {e.key}}); w.Code != http.StatusForbidden {
		t.Errorf("sign-in with a wrong token: %d; want 403", w.Code)
	}
	for _, key := range []string{"", "elk_nope", "not a key", strings.Repeat("k", 5000)} {
		w := b.do("GET", "/console/sign-in", nil)
		w = b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf(t, w)}, "key": {key}})
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `role="alert"`) {
			t.Errorf("sign-in with key %.20q: %d; want 401 with the reason", key, w.Code)
		}
		if strings.Contains(w.Body.String(), key) && key != "" {
			t.Errorf("the refusal shows the key typed back")
		}
	}
	if len(b.cookies) != 1 || b.cookies["elk_console"] != nil {
		t.Errorf("cookies after refused sign-ins: %v; want only the form's", b.cookies)
	}
	big := url.Values{"csrf": {token}, "key": {strings.Repeat("x", console.MaxFormBytes)}}
	if w := b.do("POST", "/console/sign-in", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized sign-in form: %d; want 413", w.Code)
	}
}

func TestSignInFailuresAreLimitedPerAddress(t *testing.T) {
	e := newEnv(t, console.Config{SignInFailuresPerSecond: 1, SignInFailureBurst: 3})
	b := e.browser("10.0.0.3")
	try := func(b *browser, key string) int {
		w := b.do("GET", "/console/sign-in", nil)
		return b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf(t, w)}, "key": {key}}).Code
	}
	for i := range 3 {
		if got := try(b, "elk_wrong"); got != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d; want 401", i+1, got)
		}
	}
	if got := try(b, e.key); got != http.StatusTooManyRequests {
		t.Fatalf("a good key past the budget: %d; want 429 before it is looked up", got)
	}
	if got := try(e.browser("10.0.0.4"), e.key); got != http.StatusSeeOther {
		t.Errorf("another address: %d; want 303 (signed in)", got)
	}
	e.clock.advance(2 * time.Second)
	if got := try(b, e.key); got != http.StatusSeeOther {
		t.Errorf("after the budget refilled: %d; want 303", got)
	}
}

func TestPostsNeedTheSessionsCSRFToken(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.0.5")
	token := b.signIn(t, e.key)
	form := url.Values{"url": {"https://example.com/a"}}
	for _, c := range []struct {
		name   string
		token  string
		header string
	}{{"missing", "", ""}, {"wrong", flipLast(token), ""}, {"another session's", e.browser("10.0.0.6").signIn(t, e.key), ""}} {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if c.token != "" {
			f.Set("csrf", c.token)
		}
		if w := b.do("POST", "/console/links", f); w.Code != http.StatusForbidden {
			t.Errorf("create with a %s token: %d; want 403", c.name, w.Code)
		}
	}
	for _, path := range []string{"/console/sign-out", "/console/keys", "/console/keys/1/revoke", "/console/links/abc-1/status", "/console/links/abc-1/delete"} {
		if w := b.do("POST", path, url.Values{}); w.Code != http.StatusForbidden {
			t.Errorf("POST %s without a token: %d; want 403", path, w.Code)
		}
	}
	ls, _, err := e.svc.List(context.Background(), e.tenant, links.ListRequest{Limit: 10})
	if err != nil || len(ls) != 0 {
		t.Fatalf("links after refused posts: %d, %v; want none", len(ls), err)
	}
	// The header htmx can send instead of the field.
	if w := b.do("POST", "/console/links", form, "X-CSRF-Token", token); w.Code != http.StatusSeeOther {
		t.Errorf("create with the token in X-CSRF-Token: %d; want 303", w.Code)
	}
}

func TestEndedSessionsGoToSignIn(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(e *env, b *browser)
	}{
		{"idle", func(e *env, b *browser) { e.clock.advance(console.DefaultIdleTimeout + time.Second) }},
		{"past its lifetime", func(e *env, b *browser) {
			// Active every 20 minutes, so never idle, until its end.
			for e.clock.advance(20 * time.Minute); ; e.clock.advance(20 * time.Minute) {
				if w := b.do("GET", "/console/links", nil); w.Code != http.StatusOK {
					return
				}
			}
		}},
		{"key revoked", func(e *env, b *browser) {
			if err := e.store.RevokeAPIKey(context.Background(), e.key); err != nil {
				panic(err)
			}
		}},
		{"signed out", func(e *env, b *browser) {
			w := b.do("GET", "/console/links", nil)
			b.do("POST", "/console/sign-out", url.Values{"csrf": {csrfField.FindStringSubmatch(w.Body.String())[1]}})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, console.Config{})
			b := e.browser("10.0.0.7")
			token := b.signIn(t, e.key)
			start := e.clock.now()
			saved := map[string]*http.Cookie{}
			for k, v := range b.cookies {
				saved[k] = v
			}
			c.end(e, b)
			if c.name == "past its lifetime" && e.clock.now().Sub(start) < console.DefaultMaxLifetime {
				t.Fatalf("the session ended after %v; want %v", e.clock.now().Sub(start), console.DefaultMaxLifetime)
			}
			b.cookies = saved // as if the browser kept the cookie
			wantRedirect(t, b.do("GET", "/console/links", nil), "/console/sign-in")
			w := b.do("POST", "/console/links", url.Values{"csrf": {token}, "url": {"https://example.com/late"}})
			wantRedirect(t, w, "/console/sign-in")
			if w := b.do("GET", "/console/keys", nil, "HX-Request", "true"); w.Code != http.StatusUnauthorized || w.Header().Get("HX-Redirect") == "" {
				t.Errorf("htmx request of an ended session: %d, HX-Redirect %q; want 401 and a redirect", w.Code, w.Header().Get("HX-Redirect"))
			}
			ls, _, _ := e.svc.List(context.Background(), e.tenant, links.ListRequest{Limit: 10})
			if len(ls) != 0 {
				t.Errorf("an ended session created %d links", len(ls))
			}
		})
	}
}

func TestNoKeyInLogsOrURLs(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.0.8")
	b.signIn(t, e.key)
	w := b.do("GET", "/console/sign-in", nil) // signed in: sent on
	if loc := w.Header().Get("Location"); strings.Contains(loc, "elk_") {
		t.Errorf("a redirect holds a key: %s", loc)
	}
	w = b.do("GET", "/console/keys", nil)
	token := csrf(t, w)
	w = b.do("POST", "/console/keys", url.Values{"csrf": {token}})
	secret := regexpSecret.FindString(w.Body.String())
	if secret == "" || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("new key page: secret %q, Cache-Control %q; want the secret, no-store", secret, w.Header().Get("Cache-Control"))
	}
	if w := b.do("GET", "/console/keys", nil); strings.Contains(w.Body.String(), secret) {
		t.Error("the key list shows a secret again")
	}
	for _, k := range []string{e.key, secret} {
		if strings.Contains(e.log.String(), k) || strings.Contains(e.log.String(), k[:20]) {
			t.Errorf("the log holds a key:\n%s", e.log.String())
		}
	}
	if !strings.Contains(e.log.String(), "console sign-in") {
		t.Errorf("no sign-in logged:\n%s", e.log.String())
	}
}

// flipLast is s with its last character changed.
func flipLast(s string) string {
	last := byte('A')
	if s[len(s)-1] == last {
		last = 'B'
	}
	return s[:len(s)-1] + string(last)
}

func TestHomeSendsToSignInOrLinks(t *testing.T) {
	e := newEnv(t, console.Config{})
	b := e.browser("10.0.0.9")
	wantRedirect(t, b.do("GET", "/console/", nil), "/console/sign-in")
	b.signIn(t, e.key)
	wantRedirect(t, b.do("GET", "/console/", nil), "/console/links")
	wantRedirect(t, b.do("GET", "/console/sign-in", nil), "/console/links")
}
