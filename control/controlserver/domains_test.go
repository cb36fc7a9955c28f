package controlserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
)

// writeKeys writes a code key file holding the named keys and returns its
// path and the key bytes (the same for every name).
func writeKeys(t *testing.T, names ...string) (string, string) {
	t.Helper()
	const secret = "domain-key-bytes-32-long-0123456"
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n + " " + base64.StdEncoding.EncodeToString([]byte(secret)) + "\n")
	}
	path := filepath.Join(t.TempDir(), "code-keys")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, secret
}

// TestDomainsAcrossRestarts: control gives the platform's domain the host of
// --public-url once, serves a domain made while it runs (by another process,
// as the CLI does) at once, keeps it across a restart, and refuses to start
// when the domain's key is missing from its key file.
func TestDomainsAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool := newPool(t, dsn)
	key := tenantKey(t, pool)
	nats := natstest.Start(t)
	keyFile, secret := writeKeys(t, "k1")
	cfg := Config{DatabaseURL: dsn, NATSURL: nats.ClientURL(), PublicURL: "http://S.Edge.Test:8080", IDStep: 1000,
		CodeKeysFile: keyFile, DomainKey: "k1"}
	st := postgres.New(pool)
	tenant, err := st.TenantByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ff1.LoadKeys(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	platformEvents := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'domain' AND domain_id = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := platformEvents()

	createOn := func(base, host string) string {
		t.Helper()
		a := call(t, "POST", base+"/api/v1/links", key, `{"url": "https://acme.example/", "domain": "`+host+`"}`)
		if a.status != 201 {
			t.Fatalf("create on %s: %d %s", host, a.status, a.body)
		}
		var body struct{ Code string }
		if err := json.Unmarshal([]byte(a.body), &body); err != nil {
			t.Fatal(err)
		}
		return body.Code
	}
	// checkFF1 checks that code is on dom with the FF1 code of its local ID.
	checkFF1 := func(dom link.Domain, code string) {
		t.Helper()
		l, err := st.GetLink(ctx, tenant, dom.ID, code)
		if err != nil {
			t.Fatalf("link %s on %s: %v", code, dom.Host, err)
		}
		codes, err := keys.Codes("k1", dom.Host)
		if err != nil {
			t.Fatal(err)
		}
		if local, err := codes.ID(code); err != nil || local != l.ID-link.IDBase(dom.ID) {
			t.Errorf("code %s decodes to %d (%v); want its link's local id %d", code, local, err, l.ID-link.IDBase(dom.ID))
		}
	}

	c := startControl(t, cfg)
	waitStatus(t, c.url+"/readyz", 200)
	if p, err := st.DomainByID(ctx, link.DefaultDomain); err != nil || p.Host != "s.edge.test" {
		t.Fatalf("platform domain %+v, %v; want the host of --public-url, s.edge.test", p, err)
	}
	dom, err := domains.New(st, domains.Config{Keys: keys, DefaultKey: "k1"}).Create(ctx, tenant, domains.Input{Host: "go.acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	first := createOn(c.url, "go.acme.test")
	checkFF1(dom, first)
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}

	c = startControl(t, cfg)
	waitStatus(t, c.url+"/readyz", 200)
	second := createOn(c.url, "go.acme.test")
	checkFF1(dom, second)
	if second == first {
		t.Errorf("the restarted control made %s again", first)
	}
	if n := platformEvents(); n != before+1 {
		t.Errorf("%d platform domain events after two starts, want %d: the host is written once", n, before+1)
	}
	// Removed through this control's API, the domain takes no link at
	// once: the links service forgets what it had read of it.
	if a := call(t, "DELETE", c.url+"/api/v1/domains/go.acme.test", key, ""); a.status/100 != 2 {
		t.Fatalf("remove go.acme.test: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", c.url+"/api/v1/links", key, `{"url": "https://acme.example/", "domain": "go.acme.test"}`); a.status/100 != 4 {
		t.Errorf("create on the removed domain: %d %s; want a 4xx", a.status, a.body)
	}
	if err := c.stop(); err != nil {
		t.Fatal(err)
	}

	// An active FF1 domain whose key the file loses: control refuses to
	// start, naming the domain and the key, never the key's bytes.
	if _, err := domains.New(st, domains.Config{Keys: keys, DefaultKey: "k1"}).Create(ctx, tenant, domains.Input{Host: "go2.acme.test"}); err != nil {
		t.Fatal(err)
	}
	otherFile, _ := writeKeys(t, "k2")
	bad := cfg
	bad.CodeKeysFile, bad.DomainKey, bad.HTTPAddr = otherFile, "k2", "127.0.0.1:0"
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = Run(runCtx, bad)
	if err == nil || !strings.Contains(err.Error(), "go2.acme.test") || !strings.Contains(err.Error(), `"k1"`) || strings.Contains(err.Error(), secret) {
		t.Errorf("Run without the domain's key: %v; want an error naming go2.acme.test and k1, not the key", err)
	}
	bad.CodeKeysFile, bad.DomainKey = keyFile, "k9"
	if err := Run(runCtx, bad); err == nil || !strings.Contains(err.Error(), `"k9"`) {
		t.Errorf("Run with a domain key the file lacks: %v; want an error naming k9", err)
	}
}
