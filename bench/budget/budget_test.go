package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func TestMain(m *testing.M) { stack.Main(m) }

// TestColdLinkStillRedirects is the gate's "every 201 redirects" under a
// memory budget, on the real pieces (PostgreSQL, NATS, control, edge): a
// code probed (404) before its create, then created, its segment sealed,
// held hot by one budgeted snapshot and dropped as cold by the next, is
// held by neither the snapshot nor the overlay at the end, and still
// redirects, through the authority. Every other link redirects too.
func TestColdLinkStillRedirects(t *testing.T) {
	ctx := context.Background()
	pg := stack.SharedPostgres(t)
	ns := stack.NewNATS(t, stack.NATSConfig{})
	edge := stack.NewEdge(t, edgeserver.Config{NATSURL: ns.URL(), Name: "budget", SnapshotDir: t.TempDir(),
		SnapshotPoll: 100 * time.Millisecond})
	control := stack.NewControl(t, controlserver.Config{DatabaseURL: pg.DSN, NATSURL: ns.URL(), PublicURL: edge.URL,
		IDStep: 4, Snapshots: snapshots.Schedule{Disabled: true}})
	_, key := pg.NewTenant(t, "budget")
	api := stack.Client{ControlURL: control.URL, EdgeURL: edge.URL, Key: key}

	create := func(want string) {
		t.Helper()
		c := api.CreatePatiently(ctx, stack.Link{URL: "https://example.com/" + want})
		if c.Status != 201 || c.Code != want {
			t.Fatalf("create: %d %q %v; want 201 %s", c.Status, c.Code, c.Err, want)
		}
	}
	follow := func(code string, want int) {
		t.Helper()
		status, _, err := api.Follow(code)
		if err != nil || status != want {
			t.Fatalf("GET /%s: %d %v; want %d", code, status, err, want)
		}
	}
	cold := "000002"
	create("000001")
	follow(cold, 404) // probed while its segment is open: the authority says unknown
	parts := edge.Parts()
	for _, c := range []string{"000002", "000003", "000004"} {
		create(c)
		// Followed once the change arrived, as on every edge but the
		// creator's nearest: answered from the overlay, not the authority.
		stack.Eventually(t, c+" in the overlay", time.Minute, func() bool { _, ok := parts.Overlay.Lookup(link.DefaultDomain, []byte(c)); return ok })
		follow(c, 302)
	}
	stack.Eventually(t, "segment [1, 5) sealed at the edge", time.Minute, func() bool { return parts.Segments.Sealed(2) })

	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// One link in the budget: first the cold one (clicked most), then,
	// after one more change so the snapshot is a newer version, another.
	publish := func(hot string, clicks int) {
		t.Helper()
		// Added to today's row: the roller may already have written one
		// for the redirects followed above.
		if _, err := pg.Pool().Exec(ctx, `INSERT INTO link_clicks_daily (code, day, clicks, bot_clicks) VALUES ($1, $2, $3, 0)
			ON CONFLICT (domain_id, code, day) DO UPDATE SET clicks = link_clicks_daily.clicks + EXCLUDED.clicks`,
			hot, time.Now().UTC(), clicks); err != nil {
			t.Fatal(err)
		}
		st := pg.Store()
		var buf bytes.Buffer
		h, err := snapshots.New(st, js, nil).WithBudget(1, st.Hotness(7, nil)).Build(ctx, &buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h.Entries != 1 || h.Flags&snapshot.FlagPartial == 0 {
			t.Fatalf("budgeted snapshot: %+v; want 1 entry, partial", h)
		}
		name, err := snapshots.Publish(ctx, js, buf.Bytes(), 1)
		if err != nil {
			t.Fatal(err)
		}
		stack.Eventually(t, "edge serving "+name, time.Minute, func() bool {
			l := parts.Snapshots.Current()
			return l != nil && l.Name == name
		})
		if _, ok := parts.Snapshots.Current().Snap.Lookup(link.DefaultDomain, []byte(hot)); !ok {
			t.Fatalf("%s is not in the snapshot it is the hottest link of", hot)
		}
	}
	publish(cold, 1000)
	if _, ok := parts.Overlay.Lookup(link.DefaultDomain, []byte(cold)); ok {
		t.Fatalf("%s still in the overlay after a snapshot holding it: the test would not show the cold path", cold)
	}
	// A change on the stream, so the next snapshot is a newer version
	// (snapshots are named by it).
	create("000005")
	stack.Eventually(t, "000005 at the edge", time.Minute, func() bool { _, ok := parts.Overlay.Lookup(link.DefaultDomain, []byte("000005")); return ok })
	publish("000003", 2000)
	if _, ok := parts.Snapshots.Current().Snap.Lookup(link.DefaultDomain, []byte(cold)); ok {
		t.Fatalf("%s still in the second snapshot", cold)
	}
	for id := uint64(1); id <= 5; id++ {
		c, _ := base62.Encode(id)
		follow(c, 302)
	}
}

// TestZipfShareMatchesTheSample: the computed share of requests for the
// hottest links, which the results extrapolate to 10⁸ links with, is what
// the scenario's own sampler draws (within 1 percentage point on 200,000
// draws; the standard error is about 0.1).
func TestZipfShareMatchesTheSample(t *testing.T) {
	p := newPopulation(10_000, 7)
	hot := map[int32]bool{}
	for r := range 1000 {
		hot[p.byRank[r]] = true
	}
	reqs := sample(p, 1.1, 0, 200_000, 9)
	n := 0
	for _, q := range reqs {
		if hot[q.index] {
			n++
		}
	}
	got := float64(n) / float64(len(reqs))
	want, _ := zipfShare(10_000, 1000, 0, 1.1)
	if got < want-0.01 || got > want+0.01 {
		t.Fatalf("share of the 1,000 hottest of 10,000 links: sampled %.4f, computed %.4f", got, want)
	}
}

// TestFlagsRefused: flags that cannot describe a run are refused with what
// is wrong, before anything starts.
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-links", "10"}, "-links 10: want 100"},
		{[]string{"-links", "1000", "-budget", "1000"}, "-budget 1000: want 1 to links-1"},
		{[]string{"-s", "1"}, "-s 1: a Zipf exponent must be above 1"},
		{[]string{"-unknown", "1"}, "-unknown 1: want a share"},
		{[]string{"-rate", "0"}, "must be positive"},
	} {
		_, err := parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse(%q): %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}
