package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/control/webhooks/pgstore"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// webhookAPI is the creator API with webhooks on a fresh database and a
// real JetStream, and a tenant's key.
func webhookAPI(t *testing.T) (url, key string) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	if err := webhooks.EnsureStream(ctx, js, webhooks.StreamConfig(0, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	hooks := webhooks.NewService(pgstore.New(pool), js, webhooks.ServiceConfig{})
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: api.Routes})
	h := httptest.NewServer(api.New(st, svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1, Webhooks: hooks}))
	t.Cleanup(h.Close)
	_, key, err := st.CreateTenantWithKey(ctx, "cli")
	if err != nil {
		t.Fatal(err)
	}
	return h.URL, key
}

func TestWebhooksCommands(t *testing.T) {
	url, key := webhookAPI(t)
	env := map[string]string{"EDGELINK_API_URL": url, "EDGELINK_API_KEY": key}
	out, _, err := runCLIEnv(t, env, "webhooks", "create", "https://hooks.example.com/in", "--event", "link.created,link.deleted", "--json")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	var created apiclient.WebhookSecret
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Secret, "whsec_") {
		t.Fatalf("create printed %q: %v", out, err)
	}
	id := created.Endpoint.ID
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "list"}, id},
		{[]string{"webhooks", "get", id}, "link.created, link.deleted"},
		{[]string{"webhooks", "update", id, "--event", "clicks.aggregated", "--description", "stats"}, "clicks.aggregated"},
		{[]string{"webhooks", "rotate-secret", id, "--grace", "1h"}, "shown this once"},
		{[]string{"webhooks", "disable", id}, "disabled since"},
		{[]string{"webhooks", "enable", id}, "enabled"},
		{[]string{"webhooks", "test", id}, "queued webhook.test event evt_"},
		{[]string{"webhooks", "deliveries", id}, "ATTEMPTED"},
		{[]string{"webhooks", "delete", id}, "deleted " + id},
	} {
		out, _, err := runCLIEnv(t, env, tc.args...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %q, %v; want it to say %q", tc.args, out, err, tc.want)
		}
	}
	// Errors: the API's problem, and the command line's own.
	if _, _, err := runCLIEnv(t, env, "webhooks", "get", id); apiclient.StatusOf(err) != 404 {
		t.Errorf("get after delete: %v; want the API's 404", err)
	}
	if _, _, err := runCLIEnv(t, env, "webhooks", "create", "http://hooks.example.com/", "--event", "link.created"); apiclient.StatusOf(err) != 400 || !strings.Contains(err.Error(), "https") {
		t.Errorf("create over http: %v; want 400 saying https", err)
	}
	var usage usageError
	if _, _, err := runCLIEnv(t, env, "webhooks", "rotate-secret", id, "--grace", "200h"); !errors.As(err, &usage) {
		t.Errorf("rotate with a grace of 200h: %v; want a usage error", err)
	}
	if _, _, err := runCLIEnv(t, env, "webhooks", "update", id); !errors.As(err, &usage) {
		t.Errorf("update with nothing: %v; want a usage error", err)
	}
}

func TestWebhookServeFlags(t *testing.T) {
	good := webhookServe{WebhooksMaxEndpoints: 10, WebhooksTimeout: 10e9, WebhooksStreamMaxAge: 96 * 3600e9, WebhooksRetention: 168 * 3600e9}
	if _, err := good.config(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for name, change := range map[string]func(w *webhookServe){
		"no endpoints":          func(w *webhookServe) { w.WebhooksMaxEndpoints = 0 },
		"a 100ms timeout":       func(w *webhookServe) { w.WebhooksTimeout = 1e8 },
		"a log kept too little": func(w *webhookServe) { w.WebhooksRetention = 24 * 3600e9 },
	} {
		w := good
		change(&w)
		var usage usageError
		if _, err := w.config(); !errors.As(err, &usage) {
			t.Errorf("%s: %v; want a usage error", name, err)
		}
	}
}
