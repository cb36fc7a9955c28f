package controlserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/scrape"
)

// Control as run: an endpoint registered through the API gets the
// link.created of a link created through the API, signed, and the
// webhook metrics say so.
func TestWebhooksWired(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []string
		sigs []string
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, sigs = append(got, string(b)), append(sigs, r.Header.Get("webhook-signature"))
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	dsn := pgtest.DSN(t)
	nats := natstest.Start(t)
	c := startControl(t, Config{DatabaseURL: dsn, NATSURL: nats.ClientURL(), PublicURL: "http://edge.test",
		Webhooks: WebhookConfig{AllowHTTP: true, AllowPrivate: true}})
	waitStatus(t, c.url+"/startupz", 200)
	key := tenantKey(t, newPool(t, dsn))

	a := call(t, "POST", c.url+"/api/v1/webhooks", key, `{"url": "`+recv.URL+`/hook", "event_types": ["link.created"]}`)
	if a.status != 201 || !strings.Contains(a.body, `"secret":"whsec_`) {
		t.Fatalf("create endpoint: %d %s", a.status, a.body)
	}
	if a := createLink(t, c.url, key, "https://example.com/wired"); a.status != 201 {
		t.Fatalf("create link: %d %s", a.status, a.body)
	}
	poll.Until(t, "the link.created webhook", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	mu.Lock()
	var ev struct {
		Type string `json:"type"`
		Data struct {
			URL string `json:"url"`
		} `json:"data"`
	}
	err := json.Unmarshal([]byte(got[0]), &ev)
	body, sig := got[0], sigs[0]
	mu.Unlock()
	if err != nil || ev.Type != "link.created" || ev.Data.URL != "https://example.com/wired" || !strings.HasPrefix(sig, "v1,") {
		t.Errorf("webhook %s (signature %q): want a signed link.created of the link", body, sig)
	}
	poll.Until(t, "the delivery counted", 30*time.Second, func() bool {
		fams, err := scrape.Scrape(c.url + "/metrics")
		if err != nil {
			return false
		}
		v, ok := scrape.Value(fams, "control_webhook_deliveries_total", "outcome", "succeeded")
		return ok && v == 1
	})
}
