package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
)

// TestConsoleOnADomain: control as it is wired in production offers the
// tenant's own domain on the create form; a link made there is listed with
// its short URL on that host and redirects on the edge with that Host, and
// not on the platform's.
func TestConsoleOnADomain(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	api := stack.Client{ControlURL: s.controlURL, Key: s.key}
	if a := api.Do(t.Context(), "POST", "/api/v1/domains", `{"host": "go.acme.test"}`); a.Err != nil || a.Status != http.StatusCreated {
		t.Fatalf("add a domain: %v", a)
	}
	b.signIn(t, s.controlURL, s.key)
	const target = "https://example.com/on-a-domain"
	b.do(t, "create a link on the domain",
		chromedp.Navigate(s.controlURL+"/console/links/new"),
		chromedp.WaitVisible(chromedp.ID("domain")),
		chromedp.SetValue(chromedp.ID("domain"), "go.acme.test"),
		chromedp.SendKeys(chromedp.ID("url"), target),
		chromedp.SendKeys(chromedp.ID("code"), "dom-link"),
		chromedp.Submit(chromedp.ID("create")),
		chromedp.WaitVisible(chromedp.ID("state")),
	)
	row := `[id="row-dom-link@go.acme.test"]`
	b.do(t, "find it in the list", chromedp.Navigate(s.controlURL+"/console/links"), chromedp.WaitVisible(chromedp.CSS(row)))
	port := s.edgeURL[strings.LastIndexByte(s.edgeURL, ':'):]
	if short := run(t, b, "short URL", chromedp.Value(chromedp.CSS(row+" input.short"))); short != "http://go.acme.test"+port+"/dom-link" {
		t.Errorf("the list's short URL %q; want it on go.acme.test", short)
	}
	v := stack.NewVisitor(s.edgeURL, stack.LoopbackIP(1))
	t.Cleanup(v.Close)
	var status int
	var loc string
	_ = stack.Poll(t.Context(), "the domain's link on the edge", time.Minute, func() bool {
		status, loc, _ = v.FollowHost("go.acme.test", "dom-link")
		return status == http.StatusFound
	})
	if status != http.StatusFound || loc != target {
		t.Fatalf("edge, Host go.acme.test: %d %q; want 302 to %s", status, loc, target)
	}
	if status, loc, _ := v.Follow("dom-link"); loc == target {
		t.Fatalf("edge, the platform's host: %d answered the domain's link", status)
	}
}
