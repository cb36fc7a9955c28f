package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestSnapshotBuildBudget: with --snapshot-budget the file's entries are
// the hottest links by recent clicks, flagged partial, and its bloom still
// holds every code.
func TestSnapshotBuildBudget(t *testing.T) {
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
	for id := uint64(1); id <= 3; id++ {
		code := fmt.Sprintf("00000%d", id)
		l := &link.Link{ID: id, Code: code, TenantID: tenant, Namespace: "default", URL: "https://example.com/" + code,
			URLOriginal: "https://example.com/" + code, RedirectType: 302}
		if err := st.CreateLink(ctx, l, false); err != nil {
			t.Fatal(err)
		}
	}
	// 000001 is the oldest link, but the only one clicked lately.
	if _, err := pool.Exec(ctx, `INSERT INTO link_clicks_daily (code, day, clicks, bot_clicks) VALUES ('000001', $1, 9, 0)`,
		time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "links.snap")
	out, err := runCLI(t, "--database-url", dsn, "snapshot", "build", "--out", file, "--nats-url", ns.ClientURL(), "--snapshot-budget", "1")
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
	h := snap.Header
	if h.Flags&snapshot.FlagPartial == 0 || h.Entries != 1 || h.BloomCount != 3 {
		t.Fatalf("header %+v; want partial, 1 entry, 3 codes in the bloom", h)
	}
	if _, ok := snap.Lookup(link.DefaultDomain, []byte("000001")); !ok {
		t.Fatal("the clicked link is not in the budget")
	}
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(strings.NewReader(string(snap.Bloom(link.DefaultDomain)))); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"000001", "000002", "000003"} {
		if !f.TestString(code) {
			t.Errorf("bloom lacks %s", code)
		}
	}
	if !strings.Contains(out, "hottest 1 of 3 codes") {
		t.Errorf("output does not report the budget: %q", out)
	}
}

// TestSnapshotBudgetRefused: a negative budget or a window outside 1 to 366
// days stops serve and snapshot build at start (exit code 2), before
// anything is opened.
func TestSnapshotBudgetRefused(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		env        map[string]string
		args       []string
	}{
		{"negative budget", "--snapshot-budget -5: want 0", nil, []string{"--snapshot-budget=-5"}},
		{"no days", "--snapshot-hot-days 0: want 1 to 366", nil, []string{"--snapshot-hot-days", "0"}},
		{"too many days", "--snapshot-hot-days 400: want 1 to 366", nil, []string{"--snapshot-hot-days", "400"}},
		{"environment", "--snapshot-budget -1: want 0", map[string]string{"EDGELINK_SNAPSHOT_BUDGET": "-1"}, nil},
	} {
		for _, cmd := range [][]string{{"serve"}, {"snapshot", "build", "--out", filepath.Join(t.TempDir(), "x")}} {
			t.Run(tc.name+" "+cmd[0], func(t *testing.T) {
				args := append(append([]string{"--database-url", "postgres://127.0.0.1:1/none"}, cmd...), tc.args...)
				_, _, err := runCLIEnv(t, tc.env, args...)
				if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != exitUsage {
					t.Fatalf("%v (env %v): %v; want a usage error saying %q", args, tc.env, err, tc.want)
				}
			})
		}
	}
}
