package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/natstest"
)

// withWebhooks serves /api/v1/webhooks from control/webhooks on the env's
// database and a real JetStream, at most 3 endpoints a tenant, https on
// public addresses only (the default policy).
func withWebhooks(t *testing.T) envOption {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	if err := webhooks.EnsureStream(context.Background(), js, webhooks.StreamConfig(0, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	return func(c *Config, st *postgres.Store) {
		c.Webhooks = webhooks.NewService(pgstore.New(st.Pool()), js, webhooks.ServiceConfig{MaxEndpoints: 3})
	}
}

func webhookSecretOf(t *testing.T, r resp) apiwire.WebhookSecret {
	t.Helper()
	var s apiwire.WebhookSecret
	if err := json.Unmarshal(r.body, &s); err != nil || s.Endpoint.ID == "" {
		t.Fatalf("%v is not an endpoint with its secret: %v", r, err)
	}
	return s
}

func TestWebhookEndpoints(t *testing.T) {
	e := newEnv(t, withWebhooks(t))
	key := e.tenant(t, "acme")
	other := e.tenant(t, "rival")

	r := e.do(t, "POST", "/api/v1/webhooks", key, []byte(`{"url": "https://hooks.acme.example/in", "event_types": ["link.updated", "link.created", "link.created"], "description": "CRM"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %v", r)
	}
	created := webhookSecretOf(t, r)
	ep := created.Endpoint
	if !strings.HasPrefix(created.Secret, "whsec_") || r.header.Get("Location") != "/api/v1/webhooks/"+ep.ID {
		t.Errorf("create: secret %q, Location %q", created.Secret, r.header.Get("Location"))
	}
	if strings.Join(ep.EventTypes, ",") != "link.created,link.updated" || !ep.Enabled || ep.Description != "CRM" {
		t.Errorf("create: %+v; want the two types once each, sorted, enabled", ep)
	}
	// The secret is never shown again.
	r = e.do(t, "GET", "/api/v1/webhooks/"+ep.ID, key, nil)
	if r.status != http.StatusOK || bytes.Contains(r.body, []byte(created.Secret[6:])) || bytes.Contains(r.body, []byte("whsec_")) {
		t.Errorf("get: %v; want the endpoint without its secret", r)
	}
	r = e.do(t, "GET", "/api/v1/webhooks", key, nil)
	var list apiwire.WebhookEndpointList
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Endpoints) != 1 {
		t.Errorf("list: %v", r)
	}
	// Another tenant sees nothing of it.
	for _, p := range []string{"", "/deliveries"} {
		if r := e.do(t, "GET", "/api/v1/webhooks/"+ep.ID+p, other, nil); r.status != http.StatusNotFound {
			t.Errorf("another tenant GET %s: %v; want 404", p, r)
		}
	}
	if r := e.do(t, "DELETE", "/api/v1/webhooks/"+ep.ID, other, nil); r.status != http.StatusNotFound {
		t.Errorf("another tenant's DELETE: %v; want 404", r)
	}
	r = e.do(t, "PATCH", "/api/v1/webhooks/"+ep.ID, key, []byte(`{"event_types": ["clicks.aggregated"], "url": "https://hooks.acme.example/v2"}`))
	if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"event_types":["clicks.aggregated"]`)) || !bytes.Contains(r.body, []byte("/v2")) {
		t.Errorf("patch: %v", r)
	}
	r = e.do(t, "POST", "/api/v1/webhooks/"+ep.ID+"/rotate-secret", key, []byte(`{"grace_seconds": 3600}`))
	rotated := webhookSecretOf(t, r)
	if r.status != http.StatusOK || rotated.Secret == created.Secret || rotated.Endpoint.PreviousSecretExpiresAt == nil {
		t.Errorf("rotate: %v", r)
	}
	if r := e.do(t, "POST", "/api/v1/webhooks/"+ep.ID+"/rotate-secret", key, nil); r.status != http.StatusOK {
		t.Errorf("rotate without a body: %v; want 200 with the default grace", r)
	}
	r = e.do(t, "POST", "/api/v1/webhooks/"+ep.ID+"/disable", key, nil)
	if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"enabled":false`)) || !bytes.Contains(r.body, []byte(`"disabled_reason":"disabled through the API"`)) {
		t.Errorf("disable: %v", r)
	}
	r = e.do(t, "POST", "/api/v1/webhooks/"+ep.ID+"/enable", key, nil)
	if r.status != http.StatusOK || !bytes.Contains(r.body, []byte(`"enabled":true`)) || !bytes.Contains(r.body, []byte(`"disabled_at":null`)) {
		t.Errorf("enable: %v", r)
	}
	r = e.do(t, "POST", "/api/v1/webhooks/"+ep.ID+"/test", key, nil)
	if r.status != http.StatusAccepted || !bytes.Contains(r.body, []byte(`"event_id":"evt_`)) {
		t.Errorf("test: %v", r)
	}

	// The delivery log, a page at a time.
	for i := range 5 {
		outcome := "failed"
		if i == 4 {
			outcome = "succeeded"
		}
		if _, err := e.pool.Exec(context.Background(), `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, attempt, outcome,
			status_code, latency_ms, error, attempted_at) VALUES ($1, '00000000-0000-4000-8000-000000000001', 'link.created', $2, $3, 500, 12, 'answered 500', now())`,
			ep.ID, i+1, outcome); err != nil {
			t.Fatal(err)
		}
	}
	var attempts []int
	cursor := ""
	for range 4 {
		path := "/api/v1/webhooks/" + ep.ID + "/deliveries?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := e.do(t, "GET", path, key, nil)
		var page apiwire.WebhookDeliveryPage
		if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK {
			t.Fatalf("deliveries: %v", r)
		}
		for _, d := range page.Deliveries {
			attempts = append(attempts, d.Attempt)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if fmt.Sprint(attempts) != "[5 4 3 2 1]" {
		t.Errorf("deliveries paged: attempts %v; want 5 to 1, newest first, each once", attempts)
	}
	r = e.do(t, "GET", "/api/v1/webhooks/"+ep.ID+"/deliveries?outcome=succeeded&event_id=evt_00000000000040008000000000000001", key, nil)
	if r.status != http.StatusOK || bytes.Count(r.body, []byte(`"attempt"`)) != 1 {
		t.Errorf("deliveries filtered: %v; want the one success", r)
	}

	if r := e.do(t, "DELETE", "/api/v1/webhooks/"+ep.ID, key, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: %v", r)
	}
	if r := e.do(t, "GET", "/api/v1/webhooks/"+ep.ID, key, nil); r.status != http.StatusNotFound {
		t.Errorf("get after delete: %v", r)
	}
	if n := e.count(t, "webhook_deliveries"); n != 0 {
		t.Errorf("%d log rows after the delete; want none", n)
	}
}

// Malformed, hostile and oversized input: a clear 4xx naming the problem,
// and nothing stored.
func TestWebhookBadInput(t *testing.T) {
	e := newEnv(t, withWebhooks(t))
	key := e.tenant(t, "acme")
	r := e.do(t, "POST", "/api/v1/webhooks", key, []byte(`{"url": "https://hooks.example.com/", "event_types": ["link.created"]}`))
	id := webhookSecretOf(t, r).Endpoint.ID
	bomb := gzipped(t, strings.Repeat(" ", 2<<20))
	for _, tc := range []struct {
		method, path, body string
		headers            []string
		status             int
		detail             string
	}{
		{"POST", "/api/v1/webhooks", `{"url": "http://hooks.example.com/", "event_types": ["link.created"]}`, nil, 400, "must be https"},
		{"POST", "/api/v1/webhooks", `{"url": "https://169.254.169.254/latest", "event_types": ["link.created"]}`, nil, 400, "link-local"},
		{"POST", "/api/v1/webhooks", `{"url": "https://localhost:8080/", "event_types": ["link.created"]}`, nil, 400, "machine itself"},
		{"POST", "/api/v1/webhooks", `{"url": "https://[::ffff:10.0.0.1]/", "event_types": ["link.created"]}`, nil, 400, "private"},
		{"POST", "/api/v1/webhooks", `{"url": "https://u:p@hooks.example.com/", "event_types": ["link.created"]}`, nil, 400, "password"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/` + strings.Repeat("a", 2100) + `", "event_types": ["link.created"]}`, nil, 400, "at most 2048"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": []}`, nil, 400, "one or more"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": ["link.exploded"]}`, nil, 400, "is not one of"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": "link.created"}`, nil, 400, "must be an array"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/"}`, nil, 400, "one or more"},
		{"POST", "/api/v1/webhooks", `{"event_types": ["link.created"]}`, nil, 400, "url is required"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": ["link.created"], "secret": "mine"}`, nil, 400, "secret"},
		{"POST", "/api/v1/webhooks", `{"URL": "https://hooks.example.com/", "event_types": ["link.created"]}`, nil, 400, "URL"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": ["link.created"], "description": "` + strings.Repeat("é", 257) + `"}`, nil, 400, "at most 256"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": ["link.created"], "description": "a\u0000b"}`, nil, 400, "control character"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", `, nil, 400, "malformed JSON"},
		{"POST", "/api/v1/webhooks", "\xff\xfe", nil, 400, "UTF-8"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/", "event_types": ["link.created"]}`, []string{"Content-Type", "text/plain"}, 415, "Content-Type"},
		{"POST", "/api/v1/webhooks", string(bomb), []string{"Content-Encoding", "gzip"}, 413, "once decoded"},
		{"POST", "/api/v1/webhooks", `{"url": "https://hooks.example.com/` + strings.Repeat("a", 70<<10) + `"}`, nil, 413, "larger than"},
		{"POST", "/api/v1/webhooks?x=1", `{"url": "https://hooks.example.com/", "event_types": ["link.created"]}`, nil, 400, "no query parameters"},
		{"PATCH", "/api/v1/webhooks/" + id, `{}`, nil, 400, "nothing to change"},
		{"PATCH", "/api/v1/webhooks/" + id, `{"url": "ftp://x.example/"}`, nil, 400, "https URL"},
		{"POST", "/api/v1/webhooks/" + id + "/rotate-secret", `{"grace_seconds": 604801}`, nil, 400, "grace_seconds"},
		{"POST", "/api/v1/webhooks/" + id + "/rotate-secret", `{"grace_seconds": -1}`, nil, 400, "grace_seconds"},
		{"POST", "/api/v1/webhooks/" + id + "/rotate-secret", `{"grace_seconds": "1h"}`, nil, 400, "must be an integer"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?limit=0", "", nil, 400, "limit"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?limit=101", "", nil, 400, "limit"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?cursor=bogus", "", nil, 400, "cursor"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?outcome=maybe", "", nil, 400, "outcome"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?event_id=evt_zz", "", nil, 400, "not an event id"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?limit=1&limit=2", "", nil, 400, "once"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?sort=up", "", nil, 400, "unknown query parameter"},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries?%zz", "", nil, 400, "malformed"},
		{"GET", "/api/v1/webhooks/ep_nothex", "", nil, 404, "no such webhook endpoint"},
		{"GET", "/api/v1/webhooks/ep_000000000000000000000000", "", nil, 404, "no such webhook endpoint"},
		{"POST", "/api/v1/webhooks/%27%20OR%201=1--/test", "", nil, 404, "no such webhook endpoint"},
		{"PUT", "/api/v1/webhooks/" + id, "", nil, 405, "not allowed"},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		r := e.do(t, tc.method, tc.path, key, body, tc.headers...)
		if r.status != tc.status || !strings.Contains(string(r.body), tc.detail) {
			t.Errorf("%s %.80s %.60q: %.300v; want %d with %q", tc.method, tc.path, tc.body, r, tc.status, tc.detail)
		}
	}
	if n := e.count(t, "webhook_endpoints"); n != 1 {
		t.Errorf("%d endpoints stored; want the one good one", n)
	}
	// The fourth endpoint is over the limit of 3.
	for i := range 3 {
		r := e.do(t, "POST", "/api/v1/webhooks", key, []byte(`{"url": "https://hooks.example.com/`+fmt.Sprint(i)+`", "event_types": ["link.deleted"]}`))
		want := http.StatusCreated
		if i == 2 {
			want = http.StatusConflict
		}
		if r.status != want {
			t.Errorf("endpoint %d: %v; want %d", i+2, r, want)
		}
	}
	if r := e.do(t, "GET", "/api/v1/webhooks", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a key: %v", r)
	}
}

// Without a webhook service every route answers 404, as routes of a
// feature the server does not have.
func TestWebhooksNotConfigured(t *testing.T) {
	e, key := newEnvWithTenant(t)
	if r := e.do(t, "GET", "/api/v1/webhooks", key, nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "not configured") {
		t.Errorf("GET /api/v1/webhooks: %v", r)
	}
}
