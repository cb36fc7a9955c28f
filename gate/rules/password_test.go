package rules

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
)

const password = "correct horse battery"

// TestPasswordLinkNeverOpensWithoutItsPassword: protected links created
// with the edge's feed paused (what the edge knows of them comes from the
// authority, whose answer must carry the password hash) and followed at
// once: every answer before the right password (GET, HEAD, the form's
// address, wrong passwords, forged and missing tokens, other links'
// cookies, posts past the limits) is checked for the link's target and its
// rule's in every header and the body, and none redirects; the right
// password sets the cookie, 303 to the link, then the redirect, before and
// after the feed applied the link.
func TestPasswordLinkNeverOpensWithoutItsPassword(t *testing.T) {
	e := newEnv(t)
	parts := e.edge.Parts()
	parts.Feed.Pause()
	t.Cleanup(parts.Feed.Resume)
	resolvedBefore := parts.Handler.Counters.Resolved.Load()

	n := scale(3, 10)
	type protected struct{ code, target, ios string }
	links := make([]protected, n)
	for i := range links {
		p := protected{target: fmt.Sprintf("https://secret-target.example.com/pw/%d?k=v", i), ios: fmt.Sprintf("https://apps.example.com/secret-ios/%d", i)}
		p.code = e.create(t, fmt.Sprintf(`{"url": %q, "password": %q, "rules": [%s]}`, p.target, password,
			ruleJSON(p.ios, map[string]any{"device": []string{"ios"}})))
		links[i] = p
	}
	checked, forms := 0, 0
	check := func(what string, a answer, secrets ...string) {
		t.Helper()
		checked++
		if a.status >= 300 && a.status < 400 && a.status != http.StatusSeeOther {
			t.Fatalf("%s: %d, a redirect without the password (Location %q)", what, a.status, a.header.Get("Location"))
		}
		if l := leaks(a, secrets...); l != "" {
			t.Fatalf("%s: %d shows the target: %s", what, a.status, l)
		}
	}
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	var cookies []string
	var v *visitor
	for i, p := range links {
		// A visitor of its own a link: one address's attempts are few.
		v = newVisitor(t, e.edge.URL, stack.LoopbackIP(1+i))
		secrets := []string{"secret-target", "secret-ios"}
		get := v.do(t, "GET", "/"+p.code, "", "User-Agent", iphone)
		check("GET "+p.code, get, secrets...)
		f := formOf(t, "GET "+p.code+" right after its 201", get)
		forms++
		head := v.do(t, "HEAD", "/"+p.code, "")
		check("HEAD "+p.code, head, secrets...)
		if head.status != http.StatusOK || len(head.body) != 0 {
			t.Fatalf("HEAD %s: %d with %d body bytes", p.code, head.status, len(head.body))
		}
		check("GET of the form's address", v.do(t, "GET", "/"+p.code+"/unlock", ""), secrets...)
		post := func(pw, token, nonce string, headers ...string) answer {
			return v.do(t, "POST", "/"+p.code+"/unlock", url.Values{"password": {pw}, "csrf": {token}}.Encode(),
				append([]string{"Cookie", "elk_form=" + nonce}, headers...)...)
		}
		for _, bad := range []struct {
			what   string
			a      answer
			status int
		}{
			{"a wrong password", post("wrong horse battery", f.token, f.nonce), http.StatusForbidden},
			{"the right password without the form's cookie", v.do(t, "POST", "/"+p.code+"/unlock", url.Values{"password": {password}, "csrf": {f.token}}.Encode()), http.StatusForbidden},
			{"the right password with a forged token", post(password, strings.Repeat("A", len(f.token)), f.nonce), http.StatusForbidden},
			{"the right password from another site", post(password, f.token, f.nonce, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
			{"JSON", v.do(t, "POST", "/"+p.code+"/unlock", "", "Content-Type", "application/json"), http.StatusUnsupportedMediaType},
		} {
			check(bad.what, bad.a, secrets...)
			if bad.a.status != bad.status || bad.a.cookie("elk_unlock") != "" {
				t.Fatalf("%s on %s: %d, want %d and no unlock cookie", bad.what, p.code, bad.a.status, bad.status)
			}
		}
		if i > 0 {
			// The cookie of another link opens nothing here.
			other := v.do(t, "GET", "/"+p.code, "", "Cookie", "elk_unlock="+cookies[i-1])
			check("another link's cookie", other, secrets...)
			formOf(t, "another link's cookie", other)
		}
		right := post(password, f.token, f.nonce)
		check("the right password", right, secrets...)
		c := right.cookie("elk_unlock")
		if right.status != http.StatusSeeOther || right.header.Get("Location") != "/"+p.code || c == "" {
			t.Fatalf("the right password on %s: %d Location %q cookie %q", p.code, right.status, right.header.Get("Location"), c)
		}
		cookies = append(cookies, c)
		for _, tt := range []struct{ ua, want string }{{iphone, p.ios}, {"curl/8", p.target}} {
			open := v.do(t, "GET", "/"+p.code, "", "Cookie", "elk_unlock="+c, "User-Agent", tt.ua)
			if open.status != http.StatusFound || open.header.Get("Location") != tt.want {
				t.Fatalf("%s with its cookie (%s): %d %q, want 302 to %s", p.code, tt.ua, open.status, open.header.Get("Location"), tt.want)
			}
		}
	}
	resolved := parts.Handler.Counters.Resolved.Load() - resolvedBefore
	if resolved == 0 {
		t.Fatal("no answer came from the authority with the feed paused")
	}
	parts.Feed.Resume()
	stack.WaitApplied(t, e.edge, e.pg.Pool(), time.Minute)
	for i, p := range links {
		if a := v.do(t, "GET", "/"+p.code, ""); a.status != http.StatusOK {
			t.Fatalf("%s from the overlay without a cookie: %d", p.code, a.status)
		} else {
			check("GET from the overlay", a, "secret-target", "secret-ios")
		}
		if a := v.do(t, "GET", "/"+p.code, "", "Cookie", "elk_unlock="+cookies[i]); a.status != http.StatusFound || a.header.Get("Location") != p.target {
			t.Fatalf("%s from the overlay with its cookie: %d %q", p.code, a.status, a.header.Get("Location"))
		}
	}
	evidence.Record(t, evidence.PasswordGuarded,
		"%d password links (each with an iOS rule) created with the edge's feed paused and followed at once (%d answered by the long-tail cache or the authority, whose answers carried the extras): %d answers before the right password (GET, HEAD, the form's address, a wrong password, no form cookie, a forged token, a cross-site post, a JSON body, another link's cookie) checked for the target and the rule's in every header and body: none shows them, none redirects; the right password: 303 and a cookie that opens its link (iOS to its rule's target, others to the link's) from the authority's answer and, after the feed applied it, from the overlay; without the cookie the form again",
		n, resolved, checked)
}

// TestGuessingIsCutAtTheConfiguredRate: wrong passwords tried as fast as
// the edge answers, from one client and then from many clients on one
// link: the attempts the edge verified (403) never exceed the configured
// budget (burst plus rate times the time the tries took), every other try
// is 429 without a verification, and the right password past the budget is
// 429 too. Clients are distinct loopback addresses (the edge's peer).
func TestGuessingIsCutAtTheConfiguredRate(t *testing.T) {
	e := newEnv(t)
	one, many := e.create(t, fmt.Sprintf(`{"url": "https://secret-target.example.com/one", "password": %q}`, password)),
		e.create(t, fmt.Sprintf(`{"url": "https://secret-target.example.com/many", "password": %q}`, password))
	stack.WaitApplied(t, e.edge, e.pg.Pool(), time.Minute)

	type tally struct{ verified, limited, other int }
	try := func(v *visitor, code string, f form, pw string) answer {
		a := v.do(t, "POST", "/"+code+"/unlock", url.Values{"password": {pw}, "csrf": {f.token}}.Encode(), "Cookie", "elk_form="+f.nonce)
		if l := leaks(a, "secret-target"); l != "" {
			t.Fatalf("a guess at %s: %d shows the target: %s", code, a.status, l)
		}
		if a.status == http.StatusTooManyRequests && a.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After")
		}
		return a
	}
	count := func(t *tally, a answer) {
		switch a.status {
		case http.StatusForbidden:
			t.verified++
		case http.StatusTooManyRequests:
			t.limited++
		default:
			t.other++
		}
	}

	// One client.
	tries := scale(30, 200)
	v := newVisitor(t, e.edge.URL, stack.LoopbackIP(2))
	f := formOf(t, "GET "+one, v.do(t, "GET", "/"+one, ""))
	var single tally
	start := time.Now()
	for i := range tries {
		count(&single, try(v, one, f, fmt.Sprintf("guess number %d", i)))
	}
	singleTook := time.Since(start)
	last := try(v, one, f, password)
	singleBound := clientBurst + int(clientRate*singleTook.Seconds()) + 1
	// The right password after the guesses must be refused when the
	// client's budget cannot hold a token: the verifications already made
	// cover the burst and all the bucket refilled since the first try.
	// (The clock started before the first try, so the refill is
	// overestimated and a token is never demanded too early.)
	mustRefuse := float64(single.verified) >= clientBurst+clientRate*time.Since(start).Seconds()
	if single.other != 0 || single.verified > singleBound || single.verified < clientBurst ||
		(mustRefuse && last.status != http.StatusTooManyRequests) || (last.status != http.StatusTooManyRequests && last.status != http.StatusSeeOther) {
		t.Fatalf("one client, %d tries in %v: %d verified (bound %d, at least the burst %d), %d limited, %d other; the right password after: %d (a 429 required: %v)",
			tries, singleTook.Round(time.Millisecond), single.verified, singleBound, clientBurst, single.limited, single.other, last.status, mustRefuse)
	}

	// Many clients on one link, each trying once.
	clients := scale(100, 600)
	var spread tally
	start = time.Now()
	for i := range clients {
		cv := newVisitor(t, e.edge.URL, stack.LoopbackIP(100+i))
		cf := formOf(t, "GET "+many, cv.do(t, "GET", "/"+many, ""))
		count(&spread, try(cv, many, cf, fmt.Sprintf("guess from client %d", i)))
		cv.client.CloseIdleConnections()
	}
	spreadTook := time.Since(start)
	spreadBound := linkBurst + int(linkRate*spreadTook.Seconds()) + 1
	fresh := newVisitor(t, e.edge.URL, stack.LoopbackIP(99))
	lastMany := try(fresh, many, formOf(t, "GET "+many, fresh.do(t, "GET", "/"+many, "")), password)
	// Every try past what the link's budget could have held is a 429.
	if spread.other != 0 || spread.verified > spreadBound || spread.verified < linkBurst || spread.limited < clients-spreadBound {
		t.Fatalf("%d clients once each in %v: %d verified (bound %d, at least the burst %d), %d limited, %d other",
			clients, spreadTook.Round(time.Millisecond), spread.verified, spreadBound, linkBurst, spread.limited, spread.other)
	}
	// The link's budget may have refilled a token by now: the right
	// password then opens it, else it is 429; never anything else.
	if lastMany.status != http.StatusTooManyRequests && lastMany.status != http.StatusSeeOther {
		t.Fatalf("the right password on the guessed link: %d", lastMany.status)
	}
	evidence.Record(t, evidence.PasswordGuarded,
		"guessing at %.2f/s burst %d per client and %.2f/s burst %d per link: one client's %d wrong tries in %v: %d verified (bound %d), %d answered 429, the right password after them %d; %d clients once each on one link in %v: %d verified (bound %d), %d answered 429; no answer showed the target",
		clientRate, clientBurst, linkRate, linkBurst, tries, singleTook.Round(time.Millisecond), single.verified, singleBound, single.limited, last.status,
		clients, spreadTook.Round(time.Millisecond), spread.verified, spreadBound, spread.limited)
}
