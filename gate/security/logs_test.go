package security

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// testInfoLogsCarryNoLinkDataOrKeys runs control and an edge logging at
// info level, drives every kind of request through them with distinctive
// codes, URLs, idempotency keys and API keys (creates, replays, reads,
// lists, changes, deletes, redirects, unknown codes, bad input, a revoked
// key, an authority lookup), and then searches everything they logged: no
// line may carry any of those values.
func testInfoLogsCarryNoLinkDataOrKeys(t *testing.T, s *env) {
	tenant, key := s.tenant(t, "acme")
	_, other := s.tenant(t, "other")
	tag := func(prefix string) string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	secrets := map[string]string{ // value -> what it is
		key:   "API key",
		other: "API key",
	}
	secret := func(what, v string) string { secrets[v] = what; return v }

	customCode := secret("custom code", tag("canary-code-"))
	customURL := secret("URL", "https://"+tag("canary-host-")+".example/"+tag("canary-path-"))
	genURL := secret("URL", "https://example.com/"+tag("canary-gen-")+"?q="+tag("canary-query-"))
	patchedURL := secret("URL", "https://example.com/"+tag("canary-patched-"))
	idem1 := secret("idempotency key", tag("canary-idem-"))
	idem2 := secret("idempotency key", tag("canary-idem-"))
	batchIdem := secret("idempotency key", tag("canary-idem-"))
	batchURL := secret("URL", "https://example.com/"+tag("canary-batch-"))
	badURL := secret("URL", "javascript:"+tag("canary-bad-"))
	blockedURL := secret("URL", "https://blocked-canary.example/"+tag("canary-blocked-"))
	unknownCode := secret("unknown code", tag("canary-none-"))

	body := func(url, code string) string {
		if code == "" {
			return fmt.Sprintf(`{"url": %q}`, url)
		}
		return fmt.Sprintf(`{"url": %q, "code": %q}`, url, code)
	}
	expect := func(what string, a answer, status int) {
		t.Helper()
		if a.status != status {
			t.Fatalf("%s: %v; want %d", what, a, status)
		}
	}
	s.create(t, key, body(customURL, customCode), "Idempotency-Key", idem1)
	genCode, _ := s.create(t, key, body(genURL, ""), "Idempotency-Key", idem2)
	secret("generated code", genCode)
	expect("replay", s.call(t, "POST", "/api/v1/links", key, body(genURL, ""), "Idempotency-Key", idem2), 201)
	expect("key reused", s.call(t, "POST", "/api/v1/links", key, body(customURL, ""), "Idempotency-Key", idem2), 409)
	expect("code taken", s.call(t, "POST", "/api/v1/links", key, body(genURL, customCode)), 409)
	a := s.call(t, "POST", "/api/v1/links/batch", key, `{"links": [`+body(batchURL, "")+`, `+body(badURL, "")+`]}`, "Idempotency-Key", batchIdem)
	expect("batch", a, 200)
	for _, c := range strings.Split(string(a.body), `"code":"`)[1:] {
		secret("generated code", c[:6])
	}
	expect("bad url", s.call(t, "POST", "/api/v1/links", key, body(badURL, "")), 400)
	expect("blocked url", s.call(t, "POST", "/api/v1/links", key, body(blockedURL, "")), 400)
	expect("bad json", s.call(t, "POST", "/api/v1/links", key, `{"url": "`+customURL), 400)
	expect("get", s.call(t, "GET", "/api/v1/links/"+customCode, key, ""), 200)
	expect("get unknown", s.call(t, "GET", "/api/v1/links/"+unknownCode, key, ""), 404)
	expect("get, other tenant", s.call(t, "GET", "/api/v1/links/"+customCode, other, ""), 404)
	expect("list", s.call(t, "GET", "/api/v1/links?limit=10", key, ""), 200)
	expect("bad list", s.call(t, "GET", "/api/v1/links?limit=100000&cursor="+unknownCode, key, ""), 400)
	expect("stats", s.call(t, "GET", "/api/v1/links/"+customCode+"/stats", key, ""), 200)
	expect("tenant stats", s.call(t, "GET", "/api/v1/stats", key, ""), 200)

	for _, c := range []string{customCode, genCode} {
		if a := s.follow(t, "/"+c); a.status != http.StatusFound {
			t.Fatalf("GET /%s: %v", c, a)
		}
	}
	// Unknown on the edge: a custom-shaped code goes to the authority.
	if a := raw(t, s.edgeAddr, "GET /"+unknownCode+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); a.status != http.StatusNotFound {
		t.Fatalf("GET /%s: %v", unknownCode, a)
	}
	expect("patch", s.call(t, "PATCH", "/api/v1/links/"+customCode, key, body(patchedURL, "")[:len(body(patchedURL, ""))-1]+`, "redirect_type": 307}`), 200)
	expect("bad patch", s.call(t, "PATCH", "/api/v1/links/"+customCode, key, body(badURL, "")), 400)
	expect("disable", s.call(t, "PATCH", "/api/v1/links/"+genCode, key, `{"status": "disabled"}`), 200)
	waitStatus(t, s, genCode, http.StatusGone)
	expect("delete", s.call(t, "DELETE", "/api/v1/links/"+customCode, key, ""), 204)
	expect("delete again", s.call(t, "DELETE", "/api/v1/links/"+customCode, key, ""), 204)
	waitStatus(t, s, customCode, http.StatusGone)

	revoked := secret("API key", s.key(t, tenant))
	expect("fresh key", s.call(t, "GET", "/api/v1/links", revoked, ""), 200)
	if err := s.pg.Store().RevokeAPIKey(t.Context(), revoked); err != nil {
		t.Fatal(err)
	}
	expect("revoked key", s.call(t, "GET", "/api/v1/links/"+genCode, revoked, ""), 401)
	expect("unknown key", s.call(t, "GET", "/api/v1/links", secret("API key", "elk_"+tag("canary-key-")), ""), 401)
	expect("malformed key", s.call(t, "GET", "/api/v1/links", secret("API key", tag("canary-notakey-")), ""), 401)

	// Server-side failures log their cause: take the links table away for
	// a moment (a real fault of the real database), so reads, changes,
	// creates and the authority's lookups fail inside control.
	faultCode := secret("custom code", tag("canary-fault-"))
	if _, err := s.pg.Pool().Exec(t.Context(), `ALTER TABLE links RENAME TO links_away`); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/links/" + genCode, ""},
		{"PATCH", "/api/v1/links/" + genCode, body(patchedURL, "")},
		{"DELETE", "/api/v1/links/" + genCode, ""},
		{"GET", "/api/v1/links/" + genCode + "/stats", ""},
		{"POST", "/api/v1/links", body(customURL, faultCode)},
		{"POST", "/api/v1/links/batch", `{"links": [` + body(batchURL, faultCode+"-b") + `]}`},
	} {
		if a := s.call(t, r.method, r.path, key, r.body, "Idempotency-Key", tag("canary-fault-idem-")); a.status < 500 {
			t.Errorf("%s %s without the links table: %v; want a 5xx", r.method, r.path, a)
		}
	}
	if a := raw(t, s.edgeAddr, "GET /"+faultCode+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); a.status != http.StatusServiceUnavailable {
		t.Errorf("GET /%s on the edge without the links table: %v; want 503", faultCode, a)
	}
	if _, err := s.pg.Pool().Exec(t.Context(), `ALTER TABLE links_away RENAME TO links`); err != nil {
		t.Fatal(err)
	}

	// Corrupt data logs what is wrong with it, not whose it is: a row an
	// authority reply cannot carry (an active link without a URL, under
	// a code the edge has never seen) and an event the feed cannot apply.
	corruptCode := secret("custom code", tag("canary-corrupt-"))
	if _, err := s.pg.Pool().Exec(t.Context(), `UPDATE links SET code = $1, url = '' WHERE code = $2`, corruptCode, genCode); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pg.Pool().Exec(t.Context(), `UPDATE links SET status = 'active' WHERE code = $1`, corruptCode); err != nil {
		t.Fatal(err)
	}
	if a := raw(t, s.edgeAddr, "GET /"+corruptCode+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); a.status != http.StatusServiceUnavailable {
		t.Errorf("GET /%s, a row the authority cannot answer: %v; want 503", corruptCode, a)
	}
	eventCode := secret("custom code", tag("canary-event-"))
	nc, _ := stack.External(s.natsURL).Client(t)
	if err := nc.Publish(linkevent.Subject, []byte(fmt.Sprintf(`{"v": %d, "k": "link", "c": %q, "s": "active", "t": 302}`, 1<<50, eventCode))); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	stack.Eventually(t, "the edge counts the bad event", 30*time.Second, func() bool {
		return strings.Contains(raw(t, s.edgeAddr, "GET /-/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").String(), "edge_changefeed_bad_events_total 1")
	})

	// The edge answered the last change (waitStatus above), so the relay
	// and the feed have handled everything; their logs are in.
	var leaks []string
	for name, buf := range map[string]*stack.LogBuffer{"control": s.controlLog, "edge": s.edgeLog} {
		lines := buf.Lines()
		if len(lines) < 2 {
			t.Errorf("%s logged %d lines at info level; the test would see nothing", name, len(lines))
		}
		for _, line := range lines {
			for v, what := range secrets {
				if containsToken(line, v) {
					leaks = append(leaks, fmt.Sprintf("%s log carries a %s (%q): %s", name, what, v, line))
				}
			}
			if strings.Contains(line, "elk_") {
				leaks = append(leaks, fmt.Sprintf("%s log carries something like an API key: %s", name, line))
			}
		}
		t.Logf("%s logged %d lines at info level:\n%s", name, len(lines), strings.Join(lines, "\n"))
	}
	if len(leaks) > 0 {
		t.Fatalf("%d log lines leak link data or keys:\n%s", len(leaks), strings.Join(leaks, "\n"))
	}
}

// waitStatus polls the edge until code answers status.
func waitStatus(t *testing.T, s *env, code string, status int) {
	t.Helper()
	var a answer
	if err := stack.Poll(t.Context(), "edge answers", 30*time.Second, func() bool {
		a = raw(t, s.edgeAddr, "GET /"+code+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		return a.status == status
	}); err != nil {
		t.Fatalf("GET /%s: %v; want %d", code, a, status)
	}
}

// containsToken reports whether v occurs in line with no code character
// (0-9A-Za-z-_) right before or after it, so a 6-character code is not
// found inside a longer number or word.
func containsToken(line, v string) bool {
	isCode := func(c byte) bool {
		return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '-' || c == '_'
	}
	for i := 0; ; {
		j := strings.Index(line[i:], v)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(v)
		if (start == 0 || !isCode(line[start-1])) && (end == len(line) || !isCode(line[end])) {
			return true
		}
		i = start + 1
	}
}
