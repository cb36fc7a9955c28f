package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/logbuf"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
)

// serve runs `control [globals] serve [flags]` in this process, as the
// binary would, on a free port until the test ends, and returns its API's
// base URL once it takes creates.
func serve(t *testing.T, globals, flags []string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var log logbuf.Buffer
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		args := append(append(append([]string{}, globals...), "serve", "--listen", "127.0.0.1:0"), flags...)
		done <- run(ctx, args, io.Discard, &log, func(a net.Addr) { addr <- a })
	}()
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
		done <- err // for the cleanup, which waits for it too
		t.Fatalf("control serve: %v\n%s", err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("control serve did not start within 2 minutes\n%s", log.String())
	}
	return ""
}

// TestSetLimitsAppliesOnEveryInstance: two control instances on one
// database, and a tenant whose limit an operator changes with the CLI while
// they serve: both enforce the new limit, and then the default again,
// without a restart.
func TestSetLimitsAppliesOnEveryInstance(t *testing.T) {
	dsn := pgtest.DSN(t)
	ns := natstest.Start(t)
	db := []string{"--database-url", dsn}
	out, err := runCLI(t, append(db, "tenants", "create", "acme")...)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(out, "api key (shown once): ")
	key = strings.TrimSpace(key)
	globals := []string{"--database-url", dsn, "--log-level", "warn"}
	flags := []string{"--nats-url", ns.ClientURL(), "--tenant-rate", "1000", "--tenant-burst", "1000"}
	urls := []string{serve(t, globals, flags), serve(t, globals, flags)}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(base string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/v1/links?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for _, u := range urls {
		for range 5 {
			if code, _ := get(u); code != http.StatusOK {
				t.Fatalf("%s before the change: %d", u, code)
			}
		}
	}

	// 2 requests and then one every 1,000 s: the second instance's bucket,
	// full at 1,000, must shrink to 2 too.
	if out, err := runCLI(t, append(db, "tenants", "set-limits", "acme", "--rate", "0.001", "--burst", "2")...); err != nil {
		t.Fatalf("set-limits: %v %s", err, out)
	}
	for _, u := range urls {
		served := 0
		var retryAfter string
		poll.Until(t, u+" refusing acme past its new limit", 30*time.Second, func() bool {
			code, ra := get(u)
			if code == http.StatusOK {
				served++
			}
			retryAfter = ra
			return code == http.StatusTooManyRequests
		})
		if served > 2 {
			t.Errorf("%s served %d requests after the burst became 2", u, served)
		}
		if retryAfter == "" {
			t.Errorf("%s: 429 without Retry-After", u)
		}
	}

	// Back to the server's default: both serve again.
	if out, err := runCLI(t, append(db, "tenants", "set-limits", "acme", "--rate", "default", "--burst", "default")...); err != nil {
		t.Fatalf("set-limits default: %v %s", err, out)
	}
	for _, u := range urls {
		poll.Until(t, u+" serving acme at the default limit", 30*time.Second, func() bool {
			code, _ := get(u)
			return code == http.StatusOK
		})
	}
	out, err = runCLI(t, append(db, "tenants", "list")...)
	if err != nil || !strings.Contains(strings.Join(strings.Fields(out), " "), "acme 1 default default 1") {
		t.Errorf("tenants list: %q %v", out, err)
	}
}
