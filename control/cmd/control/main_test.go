package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut, nil)
	return out.String(), err
}

func TestTenantsAndKeys(t *testing.T) {
	dsn := pgtest.DSN(t)
	out, err := runCLI(t, "--database-url", dsn, "tenants", "create", "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, key, ok := strings.Cut(out, "api key (shown once): ")
	key = strings.TrimSpace(key)
	if !ok || !strings.HasPrefix(key, postgres.KeyPrefix) {
		t.Fatalf("tenants create printed %q", out)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := postgres.New(pool)
	if _, err := st.TenantByKey(context.Background(), key); err != nil {
		t.Fatalf("printed key does not authenticate: %v", err)
	}
	if _, err := runCLI(t, "--database-url", dsn, "keys", "revoke", key); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TenantByKey(context.Background(), key); err == nil {
		t.Fatal("revoked key still authenticates")
	}
	if _, err := runCLI(t, "--database-url", dsn, "keys", "revoke", key); err == nil {
		t.Fatal("revoking a revoked key succeeded")
	}
	if _, err := runCLI(t, "--database-url", dsn, "keys", "create", "nobody"); err == nil {
		t.Fatal("key for an unknown tenant created")
	}
}

// allocator opens dsn's database and an allocator of namespace default,
// [1, 1,000,000) in segments of step, as control runs it. The pool is
// closed when the test ends; closing the allocator is the test's.
func allocator(t *testing.T, dsn string, step uint64) (*pgxpool.Pool, *idalloc.Allocator) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a, err := idalloc.New(ctx, allocstore.New(pool), idalloc.Config{
		Namespaces: []idalloc.Namespace{{Name: "default", Start: 1, End: 1_000_000, Step: step}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool, a
}

func TestAllocVerify(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, a := allocator(t, dsn, 10)
	for range 25 { // three segments
		id, err := a.Next(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		a.Done(id, true)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "--database-url", dsn, "alloc", "verify"); err != nil || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("verify of a sound audit: %q, %v", out, err)
	}
	// A lagging authority, as a promoted replica without the last advances.
	if _, err := pool.Exec(ctx, `UPDATE alloc_namespaces SET next_id = 11 WHERE namespace = 'default'`); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "--database-url", dsn, "alloc", "verify")
	if err == nil {
		t.Fatalf("verify passed a counter below the audit: %q", out)
	}
	if !strings.Contains(out, "VIOLATION") || !strings.Contains(out, "21") {
		t.Fatalf("verify did not name the intervals above the counter: %q", out)
	}
}

func TestSnapshotBuild(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	ns := natstest.Start(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	l := &link.Link{ID: 7, Code: "000007", TenantID: tenant, Namespace: "default", URL: "https://example.com/", URLOriginal: "https://example.com/", RedirectType: 302}
	if err := st.CreateLink(ctx, l, false); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "links.snap")
	out, err := runCLI(t, "--database-url", dsn, "snapshot", "build", "--out", file, "--publish", "--nats-url", ns.ClientURL())
	if err != nil {
		t.Fatalf("snapshot build: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := snap.Lookup(link.DefaultDomain, []byte("000007")); !ok || string(e.AppendURL(nil)) != l.URL {
		t.Fatalf("snapshot lookup of 000007: %+v %v", e, ok)
	}
	if !strings.Contains(out, "published as "+snapshot.ObjectName(snap.Header.ChangeVersion)) {
		t.Fatalf("output does not say where it was published: %q", out)
	}
	if _, err := runCLI(t, "--database-url", dsn, "snapshot", "build"); err == nil {
		t.Fatal("snapshot build with neither --out nor --publish succeeded")
	}
}
