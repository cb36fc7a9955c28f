package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/console/pgstore"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSessionsEndAndArePurged(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tenant, key, err := postgres.New(pool).CreateTenantWithKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	st := pgstore.New(pool)
	now := time.Now()
	const idle = 30 * time.Minute
	open := func(expires time.Time) string {
		t.Helper()
		sess, token, err := st.OpenSession(ctx, key, now, expires)
		if err != nil || sess.TenantID != tenant || sess.KeyID == 0 || len(sess.CSRF) < 32 || token == "" {
			t.Fatalf("open: %+v %q %v", sess, token, err)
		}
		return token
	}
	live, short, closed := open(now.Add(time.Hour)), open(now.Add(time.Minute)), open(now.Add(time.Hour))
	if _, _, err := st.OpenSession(ctx, "elk_unknown", now, now.Add(time.Hour)); !errors.Is(err, link.ErrUnauthorized) {
		t.Errorf("open with an unknown key: %v; want ErrUnauthorized", err)
	}
	if err := st.CloseSession(ctx, closed); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * time.Minute)
	for token, want := range map[string]error{live: nil, short: console.ErrNoSession, closed: console.ErrNoSession, "nope": console.ErrNoSession} {
		if _, err := st.Session(ctx, token, later, idle); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("session %.6s…: %v; want %v", token, err, want)
		}
	}
	// Touched at later, it is not idle at later+idle-1s; untouched it would be.
	if err := st.TouchSession(ctx, live, later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, live, now.Add(idle+time.Second), idle); err != nil {
		t.Errorf("a touched session idle since its touch only: %v", err)
	}
	n, err := st.PurgeSessions(ctx, later, idle)
	if err != nil || n != 1 {
		t.Errorf("purge: %d, %v; want the expired one", n, err)
	}
	keys, err := st.Keys(ctx, tenant)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	if err := st.RevokeKey(ctx, tenant+1, keys[0].ID, later); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("revoke another tenant's key: %v; want ErrNotFound", err)
	}
	if err := st.RevokeKey(ctx, tenant, keys[0].ID, later); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, live, later, idle); !errors.Is(err, console.ErrNoSession) {
		t.Errorf("session of a revoked key: %v; want ErrNoSession", err)
	}
	if _, _, err := st.OpenSession(ctx, key, later, later.Add(time.Hour)); !errors.Is(err, link.ErrUnauthorized) {
		t.Errorf("open with a revoked key: %v; want ErrUnauthorized", err)
	}
	secret, err := st.CreateKey(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := postgres.New(pool).TenantByKey(ctx, secret); err != nil || got != tenant {
		t.Errorf("the API does not take a key the console made: %d %v", got, err)
	}
}
