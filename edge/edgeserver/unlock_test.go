package edgeserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// keyFile writes an unlock key file of one fresh key.
func keyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	path := filepath.Join(t.TempDir(), "unlock-keys")
	if err := os.WriteFile(path, []byte("k1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runEdge runs an edge with cfg until the test ends and returns its base
// URL.
func runEdge(t *testing.T, cfg edgeserver.Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg.HTTPAddr, cfg.OnListen = "127.0.0.1:0", func(a net.Addr) { addr <- a }
	go func() { done <- edgeserver.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge %s: %v", cfg.Name, err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a.String()
	case err := <-done:
		done <- err
		t.Fatalf("edge %s stopped before it listened: %v", cfg.Name, err)
	}
	return ""
}

// TestUnlockAcrossEdgesAndCountryRules: edges given the same --unlock-keys
// take each other's unlock cookies, an edge with another key asks again;
// a country rule follows the edge's geo data for the client its trusted
// proxy forwards; the metrics count forms, attempts, cookies and rules.
func TestUnlockAcrossEdgesAndCountryRules(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	natstest.ChangeStream(t, js)
	hash, err := passhash.Hash([]byte("correct horse"), passhash.Params{Memory: passhash.MinMemory, Time: 1, Threads: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := link.AppendExtras(nil, &link.Extras{PasswordHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := link.AppendExtras(nil, &link.Extras{Rules: []link.Rule{
		{Countries: []string{"DE"}, URL: "https://example.de/"}, {Countries: []string{"US"}, URL: "https://example.com/us"}}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := snapshottest.Build([]snapshot.Link{
		{Code: "pw-0001", URL: "https://secret.example.com/target", RedirectType: 302, Status: link.Active, Extras: pw},
		{Code: "cc-0001", URL: "https://example.com/world", RedirectType: 302, Status: link.Active, Extras: cc},
	}, snapshot.Header{ChangeVersion: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	table, err := geo.LoadTor("../geo/testdata")
	if err != nil {
		t.Fatal(err)
	}
	shared, other := keyFile(t), keyFile(t)
	edge := func(name, keys string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return runEdge(t, edgeserver.Config{NATSURL: ns.ClientURL(), Name: name, SnapshotDir: dir, Geo: table,
			TrustedProxies: []string{"127.0.0.1"}, UnlockKeysFile: keys})
	}
	a, b, c := edge("a", shared), edge("b", shared), edge("c", other)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	do := func(method, target, body string, headers ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = snapshottest.PlatformHost
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for name, vs := range resp.Header {
			if strings.Contains(strings.Join(vs, " "), "secret.example.com") && resp.StatusCode != http.StatusFound {
				t.Fatalf("%s %s: %d shows the target in %s", method, target, resp.StatusCode, name)
			}
		}
		if bytes.Contains(b, []byte("secret.example.com")) {
			t.Fatalf("%s %s: %d shows the target in its body", method, target, resp.StatusCode)
		}
		return resp, string(b)
	}
	for _, base := range []string{a, b, c} {
		poll.Until(t, "the snapshot's links answer", 60*time.Second, func() bool {
			r, _ := do("GET", base+"/cc-0001", "", "X-Forwarded-For", "8.8.8.8")
			return r.StatusCode == http.StatusFound
		})
	}

	// Country rules, by the forwarded client.
	for xff, want := range map[string]string{"8.8.8.8": "https://example.com/us", "194.25.2.129": "https://example.de/",
		"2a01:4f8::1": "https://example.de/", "1.1.1.1": "https://example.com/world", "10.1.2.3": "https://example.com/world"} {
		if r, _ := do("GET", a+"/cc-0001", "", "X-Forwarded-For", xff); r.StatusCode != http.StatusFound || r.Header.Get("Location") != want {
			t.Errorf("client %s: %d %q, want 302 to %s", xff, r.StatusCode, r.Header.Get("Location"), want)
		}
	}

	// The form on a, the right password, the cookie.
	r, page := do("GET", a+"/pw-0001", "")
	m := regexp.MustCompile(`name="csrf" value="([A-Za-z0-9_-]+)"`).FindStringSubmatch(page)
	var formCookie *http.Cookie
	for _, ck := range r.Cookies() {
		if ck.Name == "elk_form" {
			formCookie = ck
		}
	}
	if r.StatusCode != http.StatusOK || m == nil || formCookie == nil {
		t.Fatalf("GET of the protected link: %d, token %v, cookie %v", r.StatusCode, m != nil, formCookie)
	}
	r, _ = do("POST", a+"/pw-0001/unlock", url.Values{"password": {"correct horse"}, "csrf": {m[1]}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Cookie", "elk_form="+formCookie.Value)
	var unlockCookie *http.Cookie
	for _, ck := range r.Cookies() {
		if ck.Name == "elk_unlock" {
			unlockCookie = ck
		}
	}
	if r.StatusCode != http.StatusSeeOther || unlockCookie == nil {
		t.Fatalf("the right password: %d, cookie %v", r.StatusCode, unlockCookie)
	}
	for _, tt := range []struct {
		base   string
		status int
	}{{a, http.StatusFound}, {b, http.StatusFound}, {c, http.StatusOK}} {
		if r, _ := do("GET", tt.base+"/pw-0001", "", "Cookie", "elk_unlock="+unlockCookie.Value); r.StatusCode != tt.status {
			t.Errorf("the cookie on %s: %d, want %d (same key file: redirect; another: the form)", tt.base, r.StatusCode, tt.status)
		}
	}
	for _, q := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"edge_unlock_attempts_total", []string{"outcome", "right"}, 1},
		{"edge_unlock_attempts_total", []string{"outcome", "wrong"}, 0},
		{"edge_password_forms_total", nil, 1},
		{"edge_unlock_cookies_total", []string{"outcome", "accepted"}, 1},
		{"edge_rule_redirects_total", []string{"outcome", "rule"}, 4}, // the readiness poll's (US) and three
		{"edge_rule_redirects_total", []string{"outcome", "default"}, 2},
	} {
		if v := metric(t, a, q.name, q.labels...); v != q.want {
			t.Errorf("%s%v = %v, want %v", q.name, q.labels, v, q.want)
		}
	}
	if v := metric(t, c, "edge_unlock_cookies_total", "outcome", "refused"); v != 1 {
		t.Errorf("edge c refused %v cookies, want 1", v)
	}
}

// TestBadUnlockKeysFile: an edge refuses to start with an unlock key file
// it cannot read, naming the line, never a key.
func TestBadUnlockKeysFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "unlock-keys")
	secret := base64.StdEncoding.EncodeToString([]byte("twenty bytes of key"))
	if err := os.WriteFile(bad, []byte("k1 "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := edgeserver.Run(context.Background(), edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: "nats://127.0.0.1:1", UnlockKeysFile: bad})
	if err == nil || !strings.Contains(err.Error(), "unlock keys line 1") || strings.Contains(err.Error(), secret) {
		t.Fatalf("Run with a bad unlock key file: %v", err)
	}
}
