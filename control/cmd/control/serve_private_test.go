package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// TestServeAllowPrivateTargets: serve refuses a target on the visitor's own
// machine unless --allow-private-targets (or its environment variable)
// says this server may store them.
func TestServeAllowPrivateTargets(t *testing.T) {
	dsn := pgtest.DSN(t)
	ns := natstest.Start(t)
	out, err := runCLI(t, "--database-url", dsn, "tenants", "create", "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(out, "api key (shown once): ")
	key = strings.TrimSpace(key)
	globals, flags := []string{"--database-url", dsn, "--log-level", "warn"}, []string{"--nats-url", ns.ClientURL()}

	create := func(base, target string) (int, map[string]any) {
		t.Helper()
		body, _ := json.Marshal(map[string]string{"url": target})
		req, _ := http.NewRequest("POST", base+"/api/v1/links", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}

	strict := serve(t, globals, flags)
	status, problem := create(strict, "http://0x7f.1/admin")
	if detail, _ := problem["detail"].(string); status != http.StatusBadRequest || !strings.Contains(detail, "127.0.0.1, is a loopback address") {
		t.Errorf("default serve: create http://0x7f.1/admin answered %d %v; want 400 naming the loopback address", status, problem)
	}
	if status, _ := create(strict, "https://example.com/"); status != http.StatusCreated {
		t.Errorf("default serve: create https://example.com/ answered %d; want 201", status)
	}

	flag := serve(t, globals, append(flags, "--allow-private-targets"))
	t.Setenv("EDGELINK_ALLOW_PRIVATE_TARGETS", "true")
	env := serve(t, globals, flags)
	for name, base := range map[string]string{"--allow-private-targets": flag, "EDGELINK_ALLOW_PRIVATE_TARGETS": env} {
		status, l := create(base, "http://0x7f.1/admin")
		if status != http.StatusCreated || l["url"] != "http://127.0.0.1/admin" || l["url_original"] != "http://0x7f.1/admin" {
			t.Errorf("serve with %s: create http://0x7f.1/admin answered %d %v; want 201 stored as http://127.0.0.1/admin", name, status, l)
		}
	}
}
