package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// lockedLog collects a server's log for a failure report; safe for
// concurrent use.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe runs `control <args>` (a serve command) in this process on a
// free port until the test ends and returns its API's base URL once it
// takes creates.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var log lockedLog
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, io.Discard, &log, func(a net.Addr) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("control serve stopped with %v\n%s", err, log.String())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("control serve: %v\n%s", err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("control serve did not start within 2 minutes\n%s", log.String())
	}
	return ""
}

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
	serve := []string{"--database-url", dsn, "--log-level", "warn", "serve", "--listen", "127.0.0.1:0", "--nats-url", ns.ClientURL()}

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

	strict := startServe(t, serve...)
	status, problem := create(strict, "http://0x7f.1/admin")
	if detail, _ := problem["detail"].(string); status != http.StatusBadRequest || !strings.Contains(detail, "127.0.0.1, is a loopback address") {
		t.Errorf("default serve: create http://0x7f.1/admin answered %d %v; want 400 naming the loopback address", status, problem)
	}
	if status, _ := create(strict, "https://example.com/"); status != http.StatusCreated {
		t.Errorf("default serve: create https://example.com/ answered %d; want 201", status)
	}

	flag := startServe(t, append(serve, "--allow-private-targets")...)
	t.Setenv("EDGELINK_ALLOW_PRIVATE_TARGETS", "true")
	env := startServe(t, serve...)
	for name, base := range map[string]string{"--allow-private-targets": flag, "EDGELINK_ALLOW_PRIVATE_TARGETS": env} {
		status, l := create(base, "http://0x7f.1/admin")
		if status != http.StatusCreated || l["url"] != "http://127.0.0.1/admin" || l["url_original"] != "http://0x7f.1/admin" {
			t.Errorf("serve with %s: create http://0x7f.1/admin answered %d %v; want 201 stored as http://127.0.0.1/admin", name, status, l)
		}
	}
}
