package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/internal/stack"
)

// hostileDescription opens a script if a page writes it unescaped.
const hostileDescription = `CRM <script>alert("webhook")</script>`

// startWebhookStack is control alone (webhooks need no edge) on a fresh
// database and JetStream, sending webhooks as wh says: the default
// (https, public addresses only) or a development policy that lets the
// test's own receiver on loopback have them.
func startWebhookStack(t *testing.T, wh controlserver.WebhookConfig) *env {
	t.Helper()
	pg := stack.SharedPostgres(t)
	natsURL := stack.NewNATS(t, stack.NATSConfig{}).URL()
	c := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: natsURL, PublicURL: "http://s.example",
		Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: stack.CodeKeys(t), DomainKey: stack.CodeKeyName, Webhooks: wh})
	tenant, key := pg.NewTenant(t, "console-"+t.Name())
	return &env{controlURL: c.URL, pg: pg, tenant: tenant, key: key}
}

// received is one POST the test's receiver had.
type received struct {
	id, timestamp, signature string
	body                     []byte
}

// webhookReceiver is an HTTP server that answers 204 to every POST and
// hands it to the test.
func webhookReceiver(t *testing.T) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- received{r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// registerSteps fill the webhooks page's form and press Register, as a
// creator does (the button, so the browser's own checks run).
func registerSteps(s *env, url, description string, events ...string) []chromedp.Action[chromedp.Void] {
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(s.controlURL + "/console/webhooks"), chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), url), chromedp.SendKeys(chromedp.ID("description"), description),
	}
	for _, e := range events {
		steps = append(steps, chromedp.Click(chromedp.CSS(`input[name=event][value="`+e+`"]`)))
	}
	return append(steps, chromedp.Click(chromedp.CSS(`main form[action="/console/webhooks"] button[type=submit]`)))
}

// endpointOf is the id of the endpoint the registration's answer names.
func endpointOf(t *testing.T, b *browser) string {
	t.Helper()
	id := b.text(t, ".secret a")
	if !strings.HasPrefix(id, "ep_") {
		t.Fatalf("the registration names endpoint %q. The page says: %s", id, b.text(t, "main"))
	}
	return id
}

// noScriptRan checks that the page the browser shows has no inline
// script and that no dialog has opened.
func noScriptRan(t *testing.T, b *browser, where string) {
	t.Helper()
	if n := run(t, b, "inline scripts", chromedp.Evaluate[int](`document.querySelectorAll("script:not([src])").length`)); n != 0 {
		t.Errorf("%s has %d inline scripts: the description was written as markup", where, n)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%s: %d JavaScript dialogs opened", where, n)
	}
}

// TestWebhooksInChromium drives the webhook pages with JavaScript on:
// register an endpoint on the test's receiver from the nav, see its
// secret once, send a test event and see the receiver get it signed with
// that secret and the delivery log show it, disable and enable it, and
// delete it through its confirmation. The control sends to loopback over
// http (its development policy); TestWebhooksWithoutJavaScript has the
// default one refuse such URLs.
func TestWebhooksInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startWebhookStack(t, controlserver.WebhookConfig{AllowHTTP: true, AllowPrivate: true})
	srv, got := webhookReceiver(t)
	b.signIn(t, s.controlURL, s.key)

	target := srv.URL + "/hooks/edgelink"
	b.do(t, "open the webhooks from the nav",
		chromedp.Click(chromedp.CSS(`nav a[href="/console/webhooks"]`)), chromedp.WaitVisible(chromedp.ID("url")))
	if got := b.text(t, "main table.keys tbody"); !strings.Contains(got, "No endpoints yet") {
		t.Errorf("a new tenant's endpoints: %q", got)
	}
	b.do(t, "register an endpoint", append(registerSteps(s, target, hostileDescription, "link.created"), chromedp.WaitVisible(chromedp.ID("secret")))...)
	id := endpointOf(t, b)
	secret := run(t, b, "the secret", chromedp.Value(chromedp.ID("secret")))
	key, err := webhooks.DecodeSecret(secret)
	if err != nil || len(key) != webhooks.SecretLen {
		t.Fatalf("the secret shown %q: %v", secret, err)
	}
	row := b.text(t, "#ep-"+id)
	for _, want := range []string{target, hostileDescription, "link.created", "enabled"} {
		if !strings.Contains(row, want) {
			t.Errorf("the endpoint's row %q lacks %q", row, want)
		}
	}
	noScriptRan(t, b, "the webhooks page")

	// Shown once: neither the list nor the endpoint's page has it again.
	for _, page := range []string{"/console/webhooks", "/console/webhooks/" + id} {
		b.do(t, "open "+page, chromedp.Navigate(s.controlURL+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		html := run(t, b, "the page's HTML", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		if strings.Contains(html, secret) || strings.Contains(html, webhooks.SecretPrefix) {
			t.Errorf("%s shows the secret again", page)
		}
		if bad := run(t, b, "unnamed controls", chromedp.Evaluate[[]string](unnamedControls)); len(bad) > 0 {
			t.Errorf("%s has controls without an accessible name: %v", page, bad)
		}
		noScriptRan(t, b, page)
	}
	if st := b.text(t, "#state"); st != "enabled" {
		t.Errorf("a new endpoint's state %q; want enabled", st)
	}

	// A test event: the receiver gets it, signed with the secret shown,
	// and the delivery log shows it delivered.
	b.do(t, "send a test event",
		chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if n := b.text(t, "p.notice"); !strings.Contains(n, "webhook.test") {
		t.Errorf("after sending a test event the page says %q", n)
	}
	var r received
	select {
	case r = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the receiver had no test event within a minute")
	}
	var ev struct {
		ID, Type string
		Data     struct {
			EndpointID string `json:"endpoint_id"`
		}
	}
	if err := json.Unmarshal(r.body, &ev); err != nil || ev.Type != "webhook.test" || ev.ID != r.id || ev.Data.EndpointID != id {
		t.Errorf("the receiver had %s (webhook-id %s, %v); want a webhook.test event for %s", r.body, r.id, err, id)
	}
	ts, err := strconv.ParseInt(r.timestamp, 10, 64)
	if want := "v1," + webhooks.Sign(key, r.id, ts, r.body); err != nil || r.signature != want {
		t.Errorf("webhook-signature %q (timestamp %q); want %q, signed with the secret the page showed", r.signature, r.timestamp, want)
	}
	stack.Eventually(t, "the delivery log shows the test event", time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(s.controlURL+"/console/webhooks/"+id), chromedp.WaitVisible(chromedp.CSS("main table.keys"))); err != nil {
			return false
		}
		log, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main table.keys tbody")))
		return err == nil && strings.Contains(log, r.id) && strings.Contains(log, "webhook.test") && strings.Contains(log, "succeeded") && strings.Contains(log, "204")
	})

	b.do(t, "disable it",
		chromedp.Click(chromedp.CSS(`form[action$="/disable"] button`)), chromedp.WaitVisible(chromedp.CSS(`form[action$="/enable"] button`)))
	if st, n := b.text(t, "#state"), b.text(t, "p.notice"); !strings.HasPrefix(st, "disabled") || !strings.Contains(n, "Endpoint disabled") {
		t.Errorf("after disable: state %q, notice %q", st, n)
	}
	b.do(t, "see it disabled in the list", chromedp.Navigate(s.controlURL+"/console/webhooks"), chromedp.WaitVisible(chromedp.ID("ep-"+id)))
	if row := b.text(t, "#ep-"+id); !strings.Contains(row, "disabled") {
		t.Errorf("the list's row after disable: %q", row)
	}
	b.do(t, "enable it",
		chromedp.Click(chromedp.CSS("#ep-"+id+" a")), chromedp.WaitVisible(chromedp.CSS(`form[action$="/enable"] button`)),
		chromedp.Click(chromedp.CSS(`form[action$="/enable"] button`)), chromedp.WaitVisible(chromedp.CSS(`form[action$="/disable"] button`)))
	if st, n := b.text(t, "#state"), b.text(t, "p.notice"); st != "enabled" || !strings.Contains(n, "Endpoint enabled") {
		t.Errorf("after enable: state %q, notice %q", st, n)
	}

	// Delete asks first; Cancel keeps it, the confirmation's button
	// deletes it with its log.
	b.do(t, "delete, then cancel",
		chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(`main form[method=post][action$="/delete"]`)),
		chromedp.Click(chromedp.CSS(`main a[href="/console/webhooks/`+id+`"]`)), chromedp.WaitVisible(chromedp.ID("state")))
	b.do(t, "delete for good",
		chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(`main form[method=post][action$="/delete"]`)))
	if h := b.text(t, "main h1"); !strings.Contains(h, id) {
		t.Errorf("the confirmation's heading %q does not name %s", h, id)
	}
	noScriptRan(t, b, "the delete confirmation")
	b.do(t, "confirm",
		chromedp.Click(chromedp.CSS(`main form[method=post][action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if loc := run(t, b, "location", chromedp.Location()); loc != s.controlURL+"/console/webhooks?done=deleted" {
		t.Errorf("after the delete at %s", loc)
	}
	if n := run(t, b, "rows", chromedp.Evaluate[int](`document.querySelectorAll("#ep-`+id+`").length`)); n != 0 {
		t.Error("the deleted endpoint is still listed")
	}
	var left int
	if err := s.pg.Pool().QueryRow(t.Context(), `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, id).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d delivery attempts of the deleted endpoint left (%v)", left, err)
	}
}

// refusedURLs are endpoint URLs control's default policy refuses, each
// with what the reason must say.
var refusedURLs = []struct{ url, why string }{
	{"javascript:alert(document.cookie)", `must be an https URL, not "javascript"`},
	{"http://hooks.example.com/in", "must be https"},
	{"https://127.0.0.1:8080/hook", "a loopback address"},
	{"https://[::1]/hook", "a loopback address"},
	{"https://localhost/hook", "a name of the machine itself"},
	{"https://10.0.0.5/hook", "a private address"},
	{"https://192.168.1.10/hook", "a private address"},
	{"https://169.254.169.254/latest/meta-data/", "a link-local address"},
	{"https://[::ffff:127.0.0.1]/hook", "a loopback address"},
	{"https://2130706433/hook", "a number, not a name"},
	{"https://db.internal/hook", "a name only a private network resolves"},
}

// TestWebhooksWithoutJavaScript: with scripts off, on control's default
// policy, every URL a tenant could aim at control's own network is
// refused on the form with the reason and everything typed kept (the
// hostile description as text), nothing stored; then an endpoint on a
// public name is registered (secret once), disabled, enabled and deleted
// through its confirmation, each a plain form post.
func TestWebhooksWithoutJavaScript(t *testing.T) {
	b := newBrowser(t)
	b.noScript(t)
	s := startWebhookStack(t, controlserver.WebhookConfig{})
	b.signIn(t, s.controlURL, s.key)
	for _, c := range refusedURLs {
		b.do(t, "register "+c.url, append(registerSteps(s, c.url, hostileDescription, "link.deleted"), chromedp.WaitVisible(chromedp.ID("form-problem")))...)
		if p := b.text(t, "#form-problem"); !strings.Contains(p, c.why) {
			t.Errorf("%s refused with %q; want it to say %q", c.url, p, c.why)
		}
		if u, d := run(t, b, "url kept", chromedp.Value(chromedp.ID("url"))), run(t, b, "description kept", chromedp.Value(chromedp.ID("description"))); u != c.url || d != hostileDescription {
			t.Errorf("%s: the form kept url %q, description %q", c.url, u, d)
		}
		if !run(t, b, "event kept", chromedp.Evaluate[bool](`document.querySelector('input[name=event][value="link.deleted"]').checked`)) {
			t.Errorf("%s: the form lost the event chosen", c.url)
		}
		noScriptRan(t, b, "refusing "+c.url)
	}
	var n int
	if err := s.pg.Pool().QueryRow(t.Context(), `SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1`, s.tenant).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d endpoints stored after refusals (%v)", n, err)
	}

	b.do(t, "register a public endpoint", append(registerSteps(s, "https://hooks.example.com/edgelink", hostileDescription, "link.deleted"), chromedp.WaitVisible(chromedp.ID("secret")))...)
	id := endpointOf(t, b)
	if secret := run(t, b, "the secret", chromedp.Value(chromedp.ID("secret"))); !strings.HasPrefix(secret, webhooks.SecretPrefix) {
		t.Errorf("the secret shown: %q", secret)
	}
	if n := run(t, b, "copy buttons shown", chromedp.Evaluate[int](`document.querySelectorAll("button.copy-button:not([hidden])").length`)); n != 0 {
		t.Errorf("%d copy buttons shown without JavaScript; want none (the secret is a selectable field)", n)
	}
	if d := b.text(t, "#ep-"+id+" .help"); d != hostileDescription {
		t.Errorf("the description shows as %q; want it literally", d)
	}
	b.do(t, "open it", chromedp.Click(chromedp.CSS(".secret a")), chromedp.WaitVisible(chromedp.ID("state")))
	if html := run(t, b, "the page's HTML", chromedp.Evaluate[string](`document.documentElement.outerHTML`)); strings.Contains(html, webhooks.SecretPrefix) {
		t.Error("the endpoint's page shows the secret again")
	}
	b.do(t, "disable it",
		chromedp.Click(chromedp.CSS(`form[action$="/disable"] button`)), chromedp.WaitVisible(chromedp.CSS(`form[action$="/enable"] button`)))
	if loc := run(t, b, "location", chromedp.Location()); loc != s.controlURL+"/console/webhooks/"+id+"?done=disabled" {
		t.Errorf("after a plain post at %s", loc)
	}
	b.do(t, "enable it",
		chromedp.Click(chromedp.CSS(`form[action$="/enable"] button`)), chromedp.WaitVisible(chromedp.CSS(`form[action$="/disable"] button`)))
	if st := b.text(t, "#state"); st != "enabled" {
		t.Errorf("after enable: %q", st)
	}
	b.do(t, "delete it",
		chromedp.Click(chromedp.CSS(`form[action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS(`main form[method=post][action$="/delete"]`)),
		chromedp.Click(chromedp.CSS(`main form[method=post][action$="/delete"] button`)), chromedp.WaitVisible(chromedp.CSS("p.notice")))
	if got := b.text(t, "main table.keys tbody"); !strings.Contains(got, "No endpoints yet") {
		t.Errorf("after the delete the list says %q", got)
	}
	b.do(t, "the deleted endpoint", chromedp.Navigate(s.controlURL+"/console/webhooks/"+id), chromedp.WaitVisible(chromedp.CSS("main h1")))
	if p := b.text(t, "main"); !strings.Contains(p, "no such webhook endpoint") {
		t.Errorf("the deleted endpoint's page says %q", p)
	}
}

// loggedDescription is the description of webhookWithLog's endpoint.
const loggedDescription = "CRM sync (staging)"

// webhookWithLog registers an endpoint of s's tenant through the API and
// gives it a delivery log of two events (one delivered, one failing with
// its next try), for the screens of the endpoint's page; it answers the
// endpoint's id.
func webhookWithLog(ctx context.Context, s *env) (string, error) {
	c := stack.Client{ControlURL: s.controlURL, Key: s.key}
	a := c.Do(ctx, "POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/edgelink", "description": "`+loggedDescription+`",
		"event_types": ["link.updated", "link.deleted"]}`)
	var e struct{ Endpoint struct{ ID string } }
	if err := json.Unmarshal(a.Body, &e); a.Status != http.StatusCreated || err != nil || e.Endpoint.ID == "" {
		return "", fmt.Errorf("register through the API: %s (%v)", a, err)
	}
	_, err := s.pg.Pool().Exec(ctx, `
		INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, attempt, outcome, status_code, latency_ms, error, next_attempt_at, attempted_at)
		VALUES ($1, gen_random_uuid(), 'webhook.test', 1, 'succeeded', 204, 38, NULL, NULL, now() - interval '3 minutes'),
		       ($1, gen_random_uuid(), 'link.updated', 1, 'failed', 503, 412, 'answered 503 Service Unavailable', now() + interval '25 seconds', now() - interval '5 seconds')`, e.Endpoint.ID)
	return e.Endpoint.ID, err
}

// The webhook screens' steps for the accessibility check and the
// screenshots (a11yScreens, TestScreenshots).

// webhookRegisteredSteps register an endpoint through the form: the
// answer shows its secret once. It asks for link.deleted, which no screen
// makes happen: the pictures show no attempt at hooks.example.com.
func webhookRegisteredSteps(s *env) []chromedp.Action[chromedp.Void] {
	return registerSteps(s, "https://hooks.example.com/edgelink", "CRM sync", "link.deleted")
}

// webhookRefusedSteps post an endpoint on a private address: the form
// comes back with the reason.
func webhookRefusedSteps(s *env) []chromedp.Action[chromedp.Void] {
	return registerSteps(s, "https://10.0.0.5/hook", "Office NAS", "link.created")
}

// webhookLogSteps open an endpoint with a delivery log (made once).
func webhookLogSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		id, err := webhookLogged(ctx, s)
		if err != nil {
			return err
		}
		_, err = chromedp.Navigate(s.controlURL+"/console/webhooks/"+id)(ctx, tg)
		return err
	})}
}

// webhookDeleteSteps open the delete confirmation of that endpoint.
func webhookDeleteSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		id, err := webhookLogged(ctx, s)
		if err != nil {
			return err
		}
		_, err = chromedp.Navigate(s.controlURL+"/console/webhooks/"+id+"/delete")(ctx, tg)
		return err
	})}
}

// webhookLogged is the endpoint webhookWithLog made for s's tenant, made
// on the first call.
func webhookLogged(ctx context.Context, s *env) (string, error) {
	var id string
	err := s.pg.Pool().QueryRow(ctx, `SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND description = $2 ORDER BY id LIMIT 1`,
		s.tenant, loggedDescription).Scan(&id)
	if err == nil {
		return id, nil
	}
	return webhookWithLog(ctx, s)
}
