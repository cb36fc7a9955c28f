package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/kvwitness"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// `alloc witness` names a counter below the witness and fails; `alloc
// fence-recover` raises it to the witness; then both say all is well.
func TestAllocWitnessAndFenceRecover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := allocstore.New(pool)
	if err := store.EnsureNamespace(ctx, idalloc.Namespace{Name: "default", Start: 1, End: 1_000_000, Step: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Lease(ctx, idalloc.LeaseRequest{RequestID: "00000000-0000-4000-8000-000000000001", Namespace: "default", Instance: "a"}); err != nil {
		t.Fatal(err)
	}
	nats := natstest.Start(t)
	_, js := nats.Connect(t)
	// What the lost primary confirmed: [101, 301) never reached this one.
	if err := kvwitness.New(js, "", 1).Advance(ctx, "default", 301); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"--database-url", dsn}, args...), &out, &errOut, nil)
		return out.String(), err
	}
	out, err := cli("alloc", "witness", "--nats-url", nats.ClientURL())
	if err == nil || !strings.Contains(out, "MISSING: namespace default: counter 101") || !strings.Contains(out, "[101, 301)") {
		t.Fatalf("alloc witness below the witness: %q, %v; want MISSING naming [101, 301) and an error", out, err)
	}
	out, err = cli("alloc", "fence-recover", "--nats-url", nats.ClientURL(), "--actor", "tester")
	if err != nil || !strings.Contains(out, "counter raised from 101 to 301") {
		t.Fatalf("alloc fence-recover: %q, %v", out, err)
	}
	out, err = cli("alloc", "witness", "--nats-url", nats.ClientURL())
	if err != nil || !strings.HasPrefix(out, "ok: namespace default: counter 301") {
		t.Fatalf("alloc witness after recovery: %q, %v", out, err)
	}
	out, err = cli("alloc", "fence-recover", "--nats-url", nats.ClientURL())
	if err != nil || !strings.Contains(out, "nothing to recover") {
		t.Fatalf("alloc fence-recover again: %q, %v", out, err)
	}
	ivs, err := store.Intervals(ctx, "default")
	if err != nil || len(ivs) != 2 || ivs[1].Start != 101 || ivs[1].End != 301 || !ivs[1].Sealed || ivs[1].Used != 0 {
		t.Fatalf("audit after recovery: %v, %v; want [101, 301) sealed unused", ivs, err)
	}
}
