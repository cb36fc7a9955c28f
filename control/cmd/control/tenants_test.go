package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// TestTenantAndKeyErrors: each failure says what happened in words of its
// own (no "link not found", no SQLSTATE) and exits with its own code.
func TestTenantAndKeyErrors(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := func(args ...string) []string { return append([]string{"--database-url", dsn}, args...) }
	out, err := runCLI(t, db("tenants", "create", "acme")...)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(out, "api key (shown once): ")
	key = strings.TrimSpace(key)
	if _, err := runCLI(t, db("keys", "revoke", key)...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{db("keys", "create", "nosuch"), `keys create: no tenant named "nosuch" (control tenants list shows them)`, exitNotFound},
		{db("keys", "revoke", "elk_neverissued"), "keys revoke: no such API key (check that it was copied whole)", exitNotFound},
		{db("keys", "revoke", "neverissued"), "keys revoke: no such API key (keys start with elk_)", exitNotFound},
		{db("keys", "revoke", key), "keys revoke: the API key was revoked already (at ", exitConflict},
		{db("tenants", "create", "acme"), `tenants create: a tenant named "acme" exists already`, exitConflict},
		{db("tenants", "create", ""), "tenants create: invalid input: a tenant name cannot be empty", exitUsage},
		{db("tenants", "create", " acme"), "cannot start or end with white space", exitUsage},
		{db("tenants", "create", strings.Repeat("x", 201)), "at most 200 characters, not 201", exitUsage},
		{db("tenants", "create", "bob", "--rate", "0"), "--rate \"0\": want requests per second above 0", exitUsage},
		{db("tenants", "create", "bob", "--burst", "1.5"), "--burst \"1.5\": want a whole number", exitUsage},
		{db("tenants", "set-limits", "acme"), "give --rate, --burst or both", exitUsage},
		{db("tenants", "set-limits", "acme", "--rate=-3"), "--rate \"-3\"", exitUsage},
		{db("tenants", "set-limits", "nosuch", "--rate", "5"), `tenants set-limits: no tenant named "nosuch"`, exitNotFound},
		{[]string{"tenants", "list"}, "--database-url", exitUsage},
		{db("tenants", "frobnicate"), "unexpected argument frobnicate", exitUsage},
		{[]string{"--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5", "tenants", "list"}, "database: temporarily unavailable", exitUnavailable},
	} {
		t.Setenv("EDGELINK_DATABASE_URL", "")
		_, err := runCLI(t, tc.args...)
		switch {
		case err == nil:
			t.Errorf("%q succeeded; want %q", tc.args[2:], tc.want)
		case !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SQLSTATE") || strings.Contains(err.Error(), "link not found"):
			t.Errorf("%q: %v; want a message with %q", tc.args, err, tc.want)
		case exitCode(err) != tc.code:
			t.Errorf("%q: exit code %d; want %d (%v)", tc.args, exitCode(err), tc.code, err)
		}
	}
	// Nothing refused created a tenant.
	out, err = runCLI(t, db("tenants", "list")...)
	if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "acme") {
		t.Errorf("tenants list after the refusals: %q %v; want the header and acme", out, err)
	}
}

func TestTenantLimitsCommands(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := func(args ...string) []string { return append([]string{"--database-url", dsn}, args...) }
	out, err := runCLI(t, db("tenants", "create", "acme", "--rate", "2.5", "--burst", "10")...)
	if err != nil || !strings.Contains(out, "rate 2.5/s, burst 10") {
		t.Fatalf("create with limits: %q %v", out, err)
	}
	if _, err := runCLI(t, db("tenants", "create", "bob")...); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, db("tenants", "set-limits", "bob", "--burst", "50")...)
	if err != nil || !strings.Contains(out, `tenant "bob": rate default, burst 50`) {
		t.Fatalf("set-limits: %q %v", out, err)
	}
	out, err = runCLI(t, db("tenants", "set-limits", "acme", "--rate", "default")...)
	if err != nil || !strings.Contains(out, `tenant "acme": rate default, burst 10`) {
		t.Fatalf("set-limits --rate default: %q %v", out, err)
	}
	out, err = runCLI(t, db("tenants", "list")...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME ID RATE/S BURST KEYS CREATED" {
		t.Fatalf("tenants list:\n%s", out)
	}
	for i, want := range []string{"acme 1 default 10 1", "bob 2 default 50 1"} {
		if f := strings.Fields(lines[i+1]); len(f) != 6 || strings.Join(f[:5], " ") != want {
			t.Errorf("row %d %q; want %q and a time", i+1, lines[i+1], want)
		}
	}
	out, err = runCLI(t, db("tenants", "set-limits", "acme", "--rate", "7", "--burst", "default")...)
	if err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, db("tenants", "list", "--json")...)
	var ts []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &ts) != nil || len(ts) != 2 {
		t.Fatalf("tenants list --json: %q %v", out, err)
	}
	if ts[0]["name"] != "acme" || ts[0]["rate_per_second"] != 7.0 || ts[0]["burst"] != nil || ts[1]["burst"] != 50.0 || ts[1]["rate_per_second"] != nil {
		t.Errorf("tenants list --json: %v", ts)
	}
}

func TestExitCodesOfAPIAnswers(t *testing.T) {
	for status, want := range map[int]int{400: exitUsage, 413: exitUsage, 401: exitAuth, 403: exitAuth, 404: exitNotFound, 410: exitNotFound,
		409: exitConflict, 429: exitUnavailable, 503: exitUnavailable, 500: exitFailed, 507: exitFailed} {
		if got := exitCode(fmt.Errorf("links get x: %w", &apiclient.Problem{Status: status})); got != want {
			t.Errorf("a %d answer exits %d; want %d", status, got, want)
		}
	}
}
