package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/console/pgstore"
	"github.com/edgelink/edgelink/control/webhooks"
	whstore "github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/natstest"
)

// webhookEnv is newEnv with the webhook pages, on the env's database and a
// real JetStream (test events are published), https on public addresses
// only.
func webhookEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, console.Config{})
	pool := e.store.Pool()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	if err := webhooks.EnsureStream(context.Background(), js, webhooks.StreamConfig(0, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	hooks := webhooks.NewService(whstore.New(pool), js, webhooks.ServiceConfig{})
	ps := pgstore.New(pool)
	h, err := console.New(ps, ps, e.svc, console.Config{PublicURL: "http://sho.rt", Now: e.clock.now, Stats: e.store,
		Domains: e.domains, Webhooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	return e
}

var regexpEndpoint = regexp.MustCompile(`href="/console/webhooks/(ep_[0-9a-f]{24})"`)

func TestWebhookPages(t *testing.T) {
	e := webhookEnv(t)
	b := e.browser("192.0.2.10")
	token := b.signIn(t, e.key)
	w := b.do("GET", "/console/webhooks", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `<a href="/console/webhooks">Webhooks</a>`) || !strings.Contains(w.Body.String(), "No endpoints yet") {
		t.Fatalf("webhooks page: %d\n%.2000s", w.Code, w.Body.String())
	}
	// A refused form comes back as typed, with the reason, and stores nothing.
	w = b.do("POST", "/console/webhooks", url.Values{"csrf": {token}, "url": {"http://127.0.0.1/hook"}, "description": {`<script>x</script>`}, "event": {"link.created"}})
	body := w.Body.String()
	if w.Code != http.StatusBadRequest || !strings.Contains(body, "must be https") || !strings.Contains(body, `value="http://127.0.0.1/hook"`) ||
		strings.Contains(body, "<script>x") || !strings.Contains(body, `value="link.created" checked`) {
		t.Fatalf("refused create: %d\n%.3000s", w.Code, body)
	}
	w = b.do("POST", "/console/webhooks", url.Values{"csrf": {token}, "url": {"https://hooks.example.com/in"}, "description": {`CRM <b>`}, "event": {"link.created", "clicks.aggregated"}})
	body = w.Body.String()
	m := regexpEndpoint.FindStringSubmatch(body)
	if w.Code != http.StatusOK || m == nil || !strings.Contains(body, "whsec_") || !strings.Contains(body, "CRM &lt;b&gt;") {
		t.Fatalf("create: %d\n%.3000s", w.Code, body)
	}
	id := m[1]
	// The secret is shown once: not on the next page.
	if w := b.do("GET", "/console/webhooks", nil); strings.Contains(w.Body.String(), "whsec_") {
		t.Error("the secret is shown again")
	}
	if _, err := e.store.Pool().Exec(context.Background(), `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, attempt, outcome,
		status_code, latency_ms, error, next_attempt_at, attempted_at) VALUES ($1, gen_random_uuid(), 'link.created', 1, 'failed', 503, 42, 'answered 503', now(), now())`, id); err != nil {
		t.Fatal(err)
	}
	w = b.do("GET", "/console/webhooks/"+id, nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "answered 503") || !strings.Contains(w.Body.String(), "clicks.aggregated, link.created") {
		t.Fatalf("endpoint page: %d\n%.3000s", w.Code, w.Body.String())
	}
	for _, tc := range []struct{ action, want string }{
		{"test", "done=tested"}, {"disable", "done=disabled"}, {"enable", "done=enabled"},
	} {
		wantRedirect(t, b.do("POST", "/console/webhooks/"+id+"/"+tc.action, url.Values{"csrf": {token}}), "/console/webhooks/"+id+"?"+tc.want)
	}
	if w := b.do("GET", "/console/webhooks/"+id+"?done=enabled", nil); !strings.Contains(w.Body.String(), "Endpoint enabled") {
		t.Errorf("after enable: %.2000s", w.Body.String())
	}
	w = b.do("POST", "/console/webhooks/"+id+"/rotate", url.Values{"csrf": {token}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "The new signing secret") || !strings.Contains(w.Body.String(), "whsec_") {
		t.Errorf("rotate: %d\n%.2000s", w.Code, w.Body.String())
	}
	// Hostile and wrong requests.
	if w := b.do("POST", "/console/webhooks/"+id+"/disable", url.Values{"csrf": {"x" + token}}); w.Code != http.StatusForbidden {
		t.Errorf("a wrong CSRF token: %d; want 403", w.Code)
	}
	if w := b.do("POST", "/console/webhooks/"+id+"/explode", url.Values{"csrf": {token}}); w.Code != http.StatusNotFound {
		t.Errorf("an unknown action: %d; want 404", w.Code)
	}
	if w := b.do("GET", "/console/webhooks/"+id+"?before=-1", nil); w.Code != http.StatusBadRequest {
		t.Errorf("a bad page: %d; want 400", w.Code)
	}
	if w := b.do("GET", "/console/webhooks/ep_000000000000000000000000", nil); w.Code != http.StatusNotFound {
		t.Errorf("an unknown endpoint: %d; want 404", w.Code)
	}
	_, otherKey, err := e.store.CreateTenantWithKey(context.Background(), "rival")
	if err != nil {
		t.Fatal(err)
	}
	rival := e.browser("192.0.2.11")
	rivalToken := rival.signIn(t, otherKey)
	if w := rival.do("GET", "/console/webhooks/"+id, nil); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's endpoint: %d; want 404", w.Code)
	}
	if w := rival.do("POST", "/console/webhooks/"+id+"/delete", url.Values{"csrf": {rivalToken}}); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's delete: %d; want 404", w.Code)
	}
	if w := rival.do("GET", "/console/webhooks/"+id+"/delete", nil); w.Code != http.StatusNotFound {
		t.Errorf("another tenant's delete confirmation: %d; want 404", w.Code)
	}
	// Delete asks first: the endpoint page's button opens a confirmation,
	// whose own form posts the delete.
	if w := b.do("GET", "/console/webhooks/"+id, nil); !strings.Contains(w.Body.String(), `<form method="get" action="/console/webhooks/`+id+`/delete"`) {
		t.Errorf("the endpoint page's Delete does not lead to the confirmation:\n%.3000s", w.Body.String())
	}
	w = b.do("GET", "/console/webhooks/"+id+"/delete", nil)
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "Delete webhook") || !strings.Contains(body, `name="csrf" value="`+token+`"`) ||
		!strings.Contains(body, "CRM &lt;b&gt;") {
		t.Errorf("delete confirmation: %d\n%.3000s", w.Code, body)
	}
	wantRedirect(t, b.do("POST", "/console/webhooks/"+id+"/delete", url.Values{"csrf": {token}}), "/console/webhooks?done=deleted")
	if w := b.do("GET", "/console/webhooks/"+id, nil); w.Code != http.StatusNotFound {
		t.Errorf("after delete: %d; want 404", w.Code)
	}
	// Signed out: sign-in.
	anon := e.browser("192.0.2.12")
	wantRedirect(t, anon.do("GET", "/console/webhooks", nil), "/console/sign-in")
}
