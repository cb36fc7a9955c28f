package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/privateaddr"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/shared/link"
)

func TestScheduleNext(t *testing.T) {
	s := webhooks.DefaultSchedule
	if got := s.Attempts(); got != 14 {
		t.Errorf("attempts %d; want 14", got)
	}
	for _, tc := range []struct {
		n    int
		rnd  float64
		want time.Duration
		ok   bool
	}{
		{1, 0.5, 5 * time.Second, true},
		{1, 0, 4 * time.Second, true},     // -20%
		{2, 0.75, 33 * time.Second, true}, // +10%
		{9, 0.5, 8 * time.Hour, true},
		{13, 0.5, 12 * time.Hour, true},
		{14, 0.5, 0, false}, // the last attempt
		{0, 0.5, 0, false},
	} {
		got, ok := s.Next(tc.n, func() float64 { return tc.rnd })
		if got != tc.want || ok != tc.ok {
			t.Errorf("Next(%d, rnd %v) = %v, %v; want %v, %v", tc.n, tc.rnd, got, ok, tc.want, tc.ok)
		}
	}
	// The whole schedule spans about 2.7 days, 3.2 at the longest jitter;
	// the stream's default 4 days keeps an event for all of it.
	if h := s.Horizon(); h < 3*24*time.Hour || h > 4*24*time.Hour {
		t.Errorf("horizon %v; want 3 to 4 days", h)
	}
}

// An endpoint is disabled after failing without a break for After, and a
// pause longer than Gap starts a new run: time is moved by hand.
func TestDisablePolicy(t *testing.T) {
	p := webhooks.DisablePolicy{After: 72 * time.Hour, MinFailures: 10, Gap: 25 * time.Hour}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var s webhooks.Streak
	var off bool
	// Every 6 hours for three days: 13 failures, disabled at the 72nd hour.
	for h := 0; h <= 72; h += 6 {
		s, off = p.Fail(s, t0.Add(time.Duration(h)*time.Hour))
		if want := h == 72; off != want {
			t.Fatalf("failure at hour %d (%d in the run): disable %v; want %v", h, s.Failures, off, want)
		}
	}
	// Too few failures in the same three days: not yet.
	s = webhooks.Streak{}
	s, _ = p.Fail(s, t0)
	for _, h := range []int{24, 48, 72} {
		s, off = p.Fail(s, t0.Add(time.Duration(h)*time.Hour))
	}
	if off || s.Failures != 4 {
		t.Errorf("4 failures over 72h: disable %v (%d failures); want not disabled", off, s.Failures)
	}
	// A pause past Gap starts over.
	s, off = p.Fail(s, t0.Add(100*time.Hour))
	if off || s.Failures != 1 || !s.Since.Equal(t0.Add(100*time.Hour)) {
		t.Errorf("after a 28h pause: %+v, disable %v; want a new run of 1", s, off)
	}
}

func TestSignature(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	// A vector computed by hand with openssl:
	// printf 'evt_1.1700000000.{"a":1}' | openssl dgst -sha256 -hmac KEY -binary | base64
	got := webhooks.Sign(key, "evt_1", 1700000000, []byte(`{"a":1}`))
	if want := "E91RjL3XwKNvhbIjLEB4Oo053Uu727CszikrY+6s9HE="; got != want {
		t.Errorf("Sign = %s; want %s (openssl)", got, want)
	}
	if err := verify(key, "evt_1", 1700000000, []byte(`{"a":1}`), []string{"v1," + got}); err != nil {
		t.Fatal(err)
	}
	if err := verify(key, "evt_1", 1700000001, []byte(`{"a":1}`), []string{"v1," + got}); err == nil {
		t.Error("a signature verifies under another timestamp")
	}
	old := []byte("ffffffffffffffffffffffffffffffff")
	h := webhooks.SignatureHeader([][]byte{key, old}, "evt_1", 5, []byte("x"))
	parts := strings.Fields(h)
	if len(parts) != 2 || verify(key, "evt_1", 5, []byte("x"), parts[:1]) != nil || verify(old, "evt_1", 5, []byte("x"), parts[1:]) != nil {
		t.Errorf("header %q: want the current key's signature, then the old one's", h)
	}
	s := webhooks.EncodeSecret(key)
	back, err := webhooks.DecodeSecret(s)
	if !strings.HasPrefix(s, "whsec_") || err != nil || string(back) != string(key) {
		t.Errorf("secret %q decodes to %q, %v", s, back, err)
	}
}

func TestCheckURL(t *testing.T) {
	strict := webhooks.TargetPolicy{}
	for _, tc := range []struct {
		url  string
		want string // "" accepted; else a part of the error
	}{
		{"https://hooks.example.com/a?b=c", ""},
		{"https://hooks.example.com:8443/", ""},
		{"HTTPS://hooks.example.com/", ""},
		{"http://hooks.example.com/", "must be https"},
		{"ftp://hooks.example.com/", "https URL"},
		{"https://user:pw@hooks.example.com/", "user or password"},
		{"https://hooks.example.com/#frag", "fragment"},
		{"https:///path", "no host"},
		{"https://127.0.0.1/", "loopback"},
		{"https://169.254.169.254/latest/meta-data", "link-local"},
		{"https://10.1.2.3/", "private"},
		{"https://[::1]/", "loopback"},
		{"https://[::ffff:127.0.0.1]/", "IPv6 form of 127.0.0.1"},
		{"https://[fd00::1]/", "unique local"},
		{"https://localhost/", "machine itself"},
		{"https://db.internal/", "private network"},
		{"https://intranet/", "single-label"},
		{"https://0x7f.1/", "number"},
		{"https://2130706433/", "number"},
		{"https://hooks.example.com:0/", "port"},
		{"https://hooks.example.com:99999/", "port"},
		{"https://hooks.example.com/a b", "space"},
		{"https://hooks.example.com/\x00", "control"},
		{"https://bücher.example/", "non-ASCII"},
		{"", "empty"},
		{"https://example.com/" + strings.Repeat("a", 2100), "at most 2048"},
		{"not a url at all", "space"}, {"javascript:alert(1)", "https URL"},
	} {
		_, err := strict.CheckURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckURL(%.60q): %v; want accepted", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, link.ErrInvalidInput)):
			t.Errorf("CheckURL(%.60q): %v; want an invalid-input error with %q", tc.url, err, tc.want)
		}
	}
	dev := webhooks.TargetPolicy{AllowHTTP: true, AllowPrivate: true}
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://localhost/x", "https://10.0.0.1/"} {
		if _, err := dev.CheckURL(u); err != nil {
			t.Errorf("with private targets allowed, CheckURL(%q): %v", u, err)
		}
	}
	for _, a := range []string{"8.8.8.8", "2606:4700::1111", "1.1.1.1"} {
		if why := privateaddr.Reason(netip.MustParseAddr(a)); why != "" {
			t.Errorf("privateaddr.Reason(%s) = %q; want public", a, why)
		}
	}
}

// The address check runs where the connection is made, after DNS: a name
// that resolves to loopback (localhost) is refused as its address is, and
// the server never sees a request. Redirects are answers, not followed.
func TestSenderRefusesPrivateAddressesAndRedirects(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "http://169.254.169.254/", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	strict := webhooks.NewSender(webhooks.SenderConfig{Timeout: 5 * time.Second, Policy: webhooks.TargetPolicy{AllowHTTP: true}})
	for _, u := range []string{srv.URL, "http://localhost" + port} {
		res := strict.Post(context.Background(), u, "evt_x", time.Now(), []byte("{}"), key)
		if res.OK() || !strings.Contains(res.Err, "refused to connect") || !strings.Contains(res.Err, "loopback") {
			t.Errorf("POST %s: %+v; want refused as loopback", u, res)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the private server got %d requests", n)
	}
	open := webhooks.NewSender(webhooks.SenderConfig{Timeout: 5 * time.Second, Policy: webhooks.TargetPolicy{AllowHTTP: true, AllowPrivate: true}})
	res := open.Post(context.Background(), srv.URL, "evt_x", time.Now(), []byte("{}"), key)
	if res.OK() || res.StatusCode != http.StatusFound || !strings.Contains(res.Err, "not followed") || hits.Load() != 1 {
		t.Errorf("POST to a redirect: %+v after %d requests; want the 302 as a failure, not followed", res, hits.Load())
	}
}
