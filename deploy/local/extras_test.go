package main

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/passhash"
)

// TestExtrasReachTheEdge: end to end, a link created over HTTP with rules,
// a password and a click limit reaches the edge's memory with them, byte
// for byte as the authority composes them (the hash included, which the
// API never answers), and a patch that removes them reaches it too.
func TestExtrasReachTheEdge(t *testing.T) {
	r, edge := startEdgeStack(t, "", nil)
	status, body := create(t, r, `{"url": "https://example.com/app", "password": "edge secret", "max_clicks": 25,
		"rules": [{"url": "https://apps.apple.com/app/id1", "device": ["ios"]}, {"url": "https://example.de/", "country": ["de"], "language": ["de"]}]}`)
	if status != http.StatusCreated || body["password_protected"] != true {
		t.Fatalf("create: %d %v", status, body)
	}
	code := body["code"].(string)
	pool := dbPool(t, r)
	var (
		rules []byte
		hash  pgtype.Text
		max   pgtype.Int8
	)
	if err := pool.QueryRow(context.Background(), `SELECT rules, password_hash, max_clicks FROM links WHERE code = $1`, code).Scan(&rules, &hash, &max); err != nil {
		t.Fatal(err)
	}
	want, err := link.ComposeExtras(nil, rules, hash.String, max.Int64)
	if err != nil {
		t.Fatal(err)
	}
	// The stream brings the link into the edge's overlay; the record is
	// copied, since its bytes are valid while the record is held.
	atEdge := func() (extras []byte, found bool) {
		rec, ok := edge.Overlay.Lookup(link.DefaultDomain, []byte(code))
		if !ok {
			return nil, false
		}
		if rec.Extras == nil {
			return nil, true
		}
		return bytes.Clone(rec.Extras), true
	}
	extrasAtEdge := func() []byte { x, _ := atEdge(); return x }
	if err := stack.Poll(context.Background(), "the link's extras at the edge", 30*time.Second, func() bool {
		return bytes.Equal(extrasAtEdge(), want)
	}); err != nil {
		t.Fatalf("%v: the edge holds %x; want %x", err, extrasAtEdge(), want)
	}
	v := link.ViewExtras(extrasAtEdge())
	if ok, err := passhash.Verify(v.PasswordHash(), []byte("edge secret")); !ok || err != nil || v.MaxClicks() != 25 {
		t.Errorf("the edge's extras: hash verifies %v (%v), max clicks %d", ok, err, v.MaxClicks())
	}
	if rule, target := v.Route(&link.Facts{Device: link.DeviceIOS}); rule != 1 || string(target) != "https://apps.apple.com/app/id1" {
		t.Errorf("Route for iOS = %d, %q", rule, target)
	}

	res := client(r).Do(context.Background(), "PATCH", "/api/v1/links/"+code, `{"rules": [], "password": null, "max_clicks": null}`)
	if res.Err != nil || res.Status != http.StatusOK {
		t.Fatalf("patch: %v", res)
	}
	if err := stack.Poll(context.Background(), "the extras gone at the edge", 30*time.Second, func() bool {
		got, found := atEdge()
		return found && got == nil
	}); err != nil {
		t.Fatal(err)
	}
}
