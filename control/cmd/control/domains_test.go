package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// writeKeys writes a code key file with keys k1 and k2 and returns its
// path.
func writeKeys(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"k1", "k2"} {
		b.WriteString(name + " " + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(name, 8))) + "\n")
	}
	path := filepath.Join(t.TempDir(), "code-keys")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func storeOf(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return postgres.New(pool)
}

// TestDomainsCommands: the operator adds a tenant's domains (told how to
// point DNS at the edges), lists, shows, changes (the platform's too) and
// removes them; each refusal says why, exits with its own code and
// changes nothing.
func TestDomainsCommands(t *testing.T) {
	dsn := pgtest.DSN(t)
	keys := writeKeys(t)
	db := func(args ...string) []string { return append([]string{"--database-url", dsn}, args...) }
	cli := func(args ...string) (string, error) {
		t.Helper()
		return runCLI(t, db(args...)...)
	}
	t.Setenv("EDGELINK_CODE_KEYS", "")
	t.Setenv("EDGELINK_DOMAIN_KEY", "")
	if _, err := cli("tenants", "create", "acme"); err != nil {
		t.Fatal(err)
	}
	// Before control has written the platform's host, the DNS hint says
	// where that host comes from.
	out, err := cli("domains", "add", "seq.acme.example", "--tenant", "acme", "--code-mode", "sequential")
	if err != nil || !strings.Contains(out, `domain seq.acme.example added for tenant "acme"`) || !strings.Contains(out, "sequential codes") ||
		!strings.Contains(out, "CNAME  the host of control's --public-url") {
		t.Fatalf("add a sequential domain: %q %v", out, err)
	}
	st := storeOf(t, dsn)
	if _, err := st.EnsureDefaultDomain(t.Context(), "sho.rt"); err != nil {
		t.Fatal(err)
	}
	out, err = cli("domains", "add", "Go.Acme.Example.", "--tenant", "acme", "--code-keys", keys, "--domain-key", "k1",
		"--not-found-redirect", "https://acme.example/missing")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`domain go.acme.example added for tenant "acme" (domain 2, ff1 codes, key k1)`, "go.acme.example.  CNAME  sho.rt.", "certificate cover go.acme.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("add printed %q; want it to hold %q", out, want)
		}
	}
	if strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k1", 8)))) {
		t.Fatal("add printed the key")
	}

	before, err := cli("domains", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	robots := filepath.Join(t.TempDir(), "robots.txt")
	_ = os.WriteFile(robots, []byte("User-agent: *\nAllow: /\n"), 0o644)
	big := filepath.Join(t.TempDir(), "big.txt")
	_ = os.WriteFile(big, []byte(strings.Repeat("a", link.MaxRobotsLen+1)), 0o644)
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"domains", "add", "GO.acme.example", "--tenant", "acme", "--code-keys", keys, "--domain-key", "k1"}, "go.acme.example is a domain already", exitConflict},
		{[]string{"domains", "add", "sho.rt", "--tenant", "acme", "--code-mode", "sequential"}, "is a domain already", exitConflict},
		{[]string{"domains", "add", "x.example", "--tenant", "nosuch", "--code-mode", "sequential"}, `no tenant named "nosuch"`, exitNotFound},
		{[]string{"domains", "add", "x.example", "--tenant", "acme"}, "give --code-keys", exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-keys", keys}, "needs a code key", exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-keys", keys, "--key", "nokey"}, `code key "nokey" is not in control's key file`, exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-mode", "sequential", "--key", "k1"}, "--key is for ff1 domains", exitUsage},
		{[]string{"domains", "add", "a b.example", "--tenant", "acme", "--code-mode", "sequential"}, "invalid host name", exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-mode", "sequential", "--root-redirect", "javascript:alert(1)"}, "root_redirect", exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-mode", "sequential", "--robots-file", big}, "a robots.txt is at most 4096", exitUsage},
		{[]string{"domains", "add", "x.example", "--tenant", "acme", "--code-mode", "random"}, "--code-mode", exitUsage},
		{[]string{"domains", "add", "x.example", "--code-mode", "sequential"}, "--tenant", exitUsage},
		{[]string{"domains", "show", "nosuch.example"}, "no domain nosuch.example", exitNotFound},
		{[]string{"domains", "set", "go.acme.example"}, "give --root-redirect", exitUsage},
		{[]string{"domains", "set", "go.acme.example", "--key", "k2"}, "give --code-keys", exitUsage},
		{[]string{"domains", "set", "seq.acme.example", "--key", "k2", "--code-keys", keys}, "only ff1 domains have keys", exitUsage},
		{[]string{"domains", "set", "go.acme.example", "--robots-file", robots, "--default-robots"}, "not both", exitUsage},
		{[]string{"domains", "set", "go.acme.example", "--not-found-redirect", "ftp://acme.example/"}, "not_found_redirect", exitUsage},
		{[]string{"domains", "set", "nosuch.example", "--root-redirect", "https://acme.example/"}, "no domain nosuch.example", exitNotFound},
		{[]string{"domains", "remove", "sho.rt"}, "cannot be removed", exitUsage},
		{[]string{"domains", "remove", "nosuch.example"}, "no domain nosuch.example", exitNotFound},
	} {
		_, err := cli(tc.args...)
		switch {
		case err == nil:
			t.Errorf("%q succeeded; want %q", tc.args, tc.want)
		case !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SQLSTATE"):
			t.Errorf("%q: %v; want a message with %q", tc.args, err, tc.want)
		case exitCode(err) != tc.code:
			t.Errorf("%q: exit code %d; want %d (%v)", tc.args, exitCode(err), tc.code, err)
		}
	}
	if after, err := cli("domains", "list", "--json"); err != nil || after != before {
		t.Errorf("the refusals changed the domains:\n%s\nwas\n%s", after, before)
	}

	out, err = cli("domains", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "HOST ID TENANT CODES KEYS STATUS ROOT NOT FOUND" {
		t.Fatalf("list:\n%s %v", out, err)
	}
	for i, want := range []string{"sho.rt 0 (platform) sequential - active - -", "seq.acme.example 1 acme sequential - active - -", "go.acme.example 2 acme ff1 k1 active - https://acme.example/missing"} {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != want {
			t.Errorf("list row %d: %q; want %q", i+1, got, want)
		}
	}
	out, err = cli("domains", "set", "go.acme.example", "--root-redirect", "https://acme.example/", "--robots-file", robots, "--key", "k2", "--code-keys", keys)
	if err != nil || !strings.Contains(out, "domain go.acme.example changed") || !strings.Contains(out, "k2, k1") || !strings.Contains(out, "Allow: /") {
		t.Fatalf("set: %q %v", out, err)
	}
	out, err = cli("domains", "set", "GO.ACME.EXAMPLE", "--not-found-redirect", "", "--default-robots", "--json")
	var d domainJSON
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.NotFoundRedirect != nil || d.Robots != nil || d.RootRedirect == nil ||
		!slices.Equal(d.KeyIDs, []string{"k2", "k1"}) || d.Tenant == nil || *d.Tenant != "acme" {
		t.Fatalf("set clearing: %q %v", out, err)
	}
	// The platform's settings are the operator's.
	out, err = cli("domains", "set", "sho.rt", "--root-redirect", "https://platform.example/")
	if err != nil || !strings.Contains(out, "root_redirect      https://platform.example/") || !strings.Contains(out, "(platform)") {
		t.Fatalf("set the platform's: %q %v", out, err)
	}
	out, err = cli("domains", "list", "--tenant", "acme", "--json")
	var ds []domainJSON
	if err != nil || json.Unmarshal([]byte(out), &ds) != nil || len(ds) != 3 || ds[2].Host != "sho.rt" || !ds[2].Platform || ds[2].Tenant != nil {
		t.Fatalf("list --tenant acme --json: %q %v", out, err)
	}
	out, err = cli("domains", "remove", "go.acme.example")
	if err != nil || !strings.Contains(out, "domain go.acme.example removed") {
		t.Fatalf("remove: %q %v", out, err)
	}
	if out, err := cli("domains", "show", "go.acme.example"); err != nil || !strings.Contains(out, "status             removed") {
		t.Errorf("show after remove: %q %v", out, err)
	}
	if _, err := cli("domains", "remove", "go.acme.example"); err != nil {
		t.Errorf("removing again: %v; want success", err)
	}
}

// TestLinksOnDomains: every links command takes --domain; the same code
// on the platform's domain and a tenant's is two links, each command
// addresses the one its domain names, and the list says whose each is.
func TestLinksOnDomains(t *testing.T) {
	url, key, pool := apiServer(t)
	st := postgres.New(pool)
	tenant, err := st.TenantByKey(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	svc := domains.New(st, domains.Config{Keys: &ff1.Keys{}})
	if _, err := svc.Create(t.Context(), tenant, domains.Input{Host: "go.cli.example", CodeMode: link.CodesSequential}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}
	links := func(args ...string) (string, error) {
		t.Helper()
		out, _, err := runCLIEnv(t, env, append([]string{"links", "--api-url", url}, args...)...)
		return out, err
	}
	if out, err := links("create", "https://platform.example/", "--code", "promo-1"); err != nil || !strings.Contains(out, "https://sho.rt/promo-1") {
		t.Fatalf("create on the platform's domain: %q %v", out, err)
	}
	out, err := links("--domain", "Go.Cli.Example", "create", "https://cli.example/", "--code", "promo-1")
	if err != nil || !strings.Contains(out, "created https://go.cli.example/promo-1 -> https://cli.example/") || !strings.Contains(out, "domain         go.cli.example") {
		t.Fatalf("create on go.cli.example: %q %v", out, err)
	}
	if out, err := links("get", "promo-1", "--domain", "go.cli.example"); err != nil || !strings.Contains(out, "url            https://cli.example/") {
		t.Errorf("get on go.cli.example: %q %v", out, err)
	}
	if out, err := links("get", "promo-1"); err != nil || !strings.Contains(out, "url            https://platform.example/") || !strings.Contains(out, "domain         sho.rt") {
		t.Errorf("get on the platform's: %q %v", out, err)
	}
	out, err = links("list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 3 || !strings.HasPrefix(strings.Join(strings.Fields(lines[0]), " "), "CODE DOMAIN STATUS") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "promo-1 go.cli.example active") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "promo-1 sho.rt active") {
		t.Fatalf("list:\n%s %v", out, err)
	}
	if out, err := links("list", "--domain", "go.cli.example"); err != nil || strings.Count(out, "promo-1") != 1 || !strings.Contains(out, "go.cli.example") {
		t.Errorf("list --domain: %q %v", out, err)
	}
	if out, err := links("disable", "promo-1", "--domain", "go.cli.example"); err != nil || !strings.Contains(out, "disabled https://go.cli.example/promo-1") {
		t.Fatalf("disable: %q %v", out, err)
	}
	if out, err := links("get", "promo-1"); err != nil || !strings.Contains(out, "status         active") {
		t.Errorf("disabling go.cli.example's promo-1 touched the platform's: %q %v", out, err)
	}
	if out, err := links("tag", "promo-1", "--add", "cli", "--domain", "go.cli.example"); err != nil || !strings.Contains(out, "promo-1  cli") {
		t.Errorf("tag: %q %v", out, err)
	}
	qr := filepath.Join(t.TempDir(), "qr.svg")
	if _, err := links("qr", "promo-1", "--domain", "go.cli.example", "--format", "svg", "-o", qr); err != nil {
		t.Errorf("qr: %v", err)
	}
	if out, err := links("delete", "promo-1", "--domain", "go.cli.example"); err != nil || !strings.Contains(out, "deleted promo-1 on go.cli.example") {
		t.Fatalf("delete: %q %v", out, err)
	}
	if out, err := links("get", "promo-1"); err != nil || !strings.Contains(out, "status         active") {
		t.Errorf("deleting go.cli.example's promo-1 touched the platform's: %q %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"get", "promo-1", "--domain", "nosuch.example"}, "404", exitNotFound},
		{[]string{"create", "https://x.example/", "--domain", "nosuch.example"}, "404 Not Found: no domain", exitNotFound},
		{[]string{"get", "promo-1", "--domain", "a b"}, "400 Bad Request", exitUsage},
	} {
		_, err := links(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != tc.code {
			t.Errorf("%v: %v (exit %d); want %q, exit %d", tc.args, err, exitCode(err), tc.want, tc.code)
		}
	}
}

// TestServeCodeKeys: serve's --code-keys and --domain-key (or their
// environment variables) reach control: a tenant's new domain gets ff1
// codes under the key named, a link on it has a 6-character code that is
// not the sequential one, and control refuses to start with a key file
// that lacks an active domain's key, naming the domain and the key.
func TestServeCodeKeys(t *testing.T) {
	dsn := pgtest.DSN(t)
	ns := natstest.Start(t)
	keys := writeKeys(t)
	out, err := runCLI(t, "--database-url", dsn, "tenants", "create", "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := strings.Cut(out, "api key (shown once): ")
	key = strings.TrimSpace(key)
	globals, flags := []string{"--database-url", dsn, "--log-level", "warn"}, []string{"--nats-url", ns.ClientURL(), "--public-url", "https://sho.rt"}
	t.Setenv("EDGELINK_CODE_KEYS", keys)
	base := serve(t, globals, append(flags, "--domain-key", "k2"))
	c, err := apiclient.New(base, key)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.CreateDomain(t.Context(), apiclient.DomainCreate{Host: "go.acme.example"})
	if err != nil || d.CodeMode != "ff1" {
		t.Fatalf("create a domain: %+v %v", d, err)
	}
	l, _, err := c.WithDomain("go.acme.example").Create(t.Context(), apiclient.CreateRequest{URL: "https://acme.example/"}, "")
	if err != nil || len(l.Code) != 6 || l.Code == "000001" || l.ShortURL != "https://go.acme.example/"+l.Code {
		t.Fatalf("a generated code on the ff1 domain: %+v %v", l, err)
	}
	out, err = runCLI(t, "--database-url", dsn, "domains", "show", "go.acme.example")
	if err != nil || !strings.Contains(out, "key_ids            k2") {
		t.Errorf("the domain's key: %q %v; want k2, serve's --domain-key", out, err)
	}
	// A key file without k2 stops control at start.
	other := filepath.Join(t.TempDir(), "keys")
	_ = os.WriteFile(other, []byte("k1 "+base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k1", 8)))+"\n"), 0o600)
	args := append(append(append([]string{}, globals...), "serve", "--listen", "127.0.0.1:0", "--code-keys", other), flags...)
	err = run(t.Context(), args, io.Discard, io.Discard, func(net.Addr) { t.Error("control served without the domain's key") })
	if err == nil || !strings.Contains(err.Error(), "go.acme.example") || !strings.Contains(err.Error(), `"k2"`) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k2", 8)))) {
		t.Errorf("serve without the domain's key: %v; want a refusal naming the domain and the key, never its bytes", err)
	}
}
