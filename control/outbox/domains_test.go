package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// TestRelayPublishesDomains: domain rows reach the stream as domain events
// carrying their configuration as of their version (the platform's, which
// the migrations write, first), and the same code on two domains is two
// link events, each with its domain, in version order with the rest. The
// rows are written as control writes them, straight into the outbox: the
// relay reads nothing else.
func TestRelayPublishesDomains(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	var platform uint64
	if err := pool.QueryRow(ctx, `SELECT version FROM outbox WHERE kind = 'domain' AND domain_id = 0`).Scan(&platform); err != nil {
		t.Fatalf("the migration's platform domain row: %v", err)
	}
	next := func() uint64 {
		var v uint64
		if err := pool.QueryRow(ctx, `SELECT nextval('change_version_seq')`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	domainRow := func(c link.Domain) uint64 {
		t.Helper()
		v := next()
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (version, kind, domain_id, domain_conf) VALUES ($1, 'domain', $2, $3)`,
			v, int32(c.ID), b); err != nil {
			t.Fatal(err)
		}
		return v
	}
	linkRow := func(d link.DomainID, code, url string) uint64 {
		t.Helper()
		v := next()
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (version, kind, domain_id, code, url, redirect_type, status)
			VALUES ($1, 'link', $2, $3, $4, 302, 'active')`, v, int32(d), code, url); err != nil {
			t.Fatal(err)
		}
		return v
	}
	acme := link.Domain{ID: 3, Host: "go.acme.com", TenantID: 1, NotFoundRedirect: "https://acme.com/missing",
		Robots: "User-agent: *\nDisallow: /\n", CodeMode: link.CodesFF1, KeyIDs: []string{"k2026"}, Status: link.DomainActive}
	other := link.Domain{ID: 4, Host: "xn--bcher-kva.example", TenantID: 2, CodeMode: link.CodesSequential, Status: link.DomainActive}
	vAcme := domainRow(acme)
	vOther := domainRow(other)
	v3 := linkRow(3, "spring", "https://acme.com/spring")
	v4 := linkRow(4, "spring", "https://books.example/spring")
	v0 := linkRow(0, "spring", "https://platform.example/spring")
	removed := acme
	removed.Status = link.DomainRemoved
	vRemoved := domainRow(removed)

	r := outbox.New(postgres.New(pool), js, outbox.Config{PollInterval: 50 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var got []linkevent.Event
	// Past the bound the events it has are compared as they are.
	_ = poll.Wait(ctx, "every row on the stream", 30*time.Second, func() bool {
		got = natstest.ChangeEvents(t, js)
		return len(got) >= 7
	})
	at := func(c link.Domain, v uint64) *link.Domain {
		c.Version = v
		return &c
	}
	want := []linkevent.Event{
		{Version: platform, Kind: linkevent.KindDomain, Conf: &link.Domain{Host: "platform.invalid", CodeMode: link.CodesSequential,
			Status: link.DomainActive, Version: platform}},
		{Version: vAcme, Prev: platform, Kind: linkevent.KindDomain, Conf: at(acme, vAcme)},
		{Version: vOther, Prev: vAcme, Kind: linkevent.KindDomain, Conf: at(other, vOther)},
		{Version: v3, Prev: vOther, Kind: linkevent.KindLink, Domain: 3, Code: "spring", URL: "https://acme.com/spring", RedirectType: 302, Status: link.Active},
		{Version: v4, Prev: v3, Kind: linkevent.KindLink, Domain: 4, Code: "spring", URL: "https://books.example/spring", RedirectType: 302, Status: link.Active},
		{Version: v0, Prev: v4, Kind: linkevent.KindLink, Code: "spring", URL: "https://platform.example/spring", RedirectType: 302, Status: link.Active},
		{Version: vRemoved, Prev: v0, Kind: linkevent.KindDomain, Conf: at(removed, vRemoved)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stream (-want +got):\n%s", diff)
	}
	for _, m := range natstest.ChangeMessages(t, js) {
		if m.Bytes == 0 || m.MsgID != linkevent.MsgID(m.Events[0].Version) {
			t.Errorf("message %d: id %q; want %q", m.Seq, m.MsgID, linkevent.MsgID(m.Events[0].Version))
		}
	}
}

// TestRelayStopsAtABadDomainRow: a domain row whose configuration no edge
// could apply is never skipped: what precedes it is published, the relay
// stays on it, and once it is mended the relay goes on.
func TestRelayStopsAtABadDomainRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v1 := e.create(t)
	var bad uint64
	if err := e.pool.QueryRow(ctx, `INSERT INTO outbox (version, kind, domain_id, domain_conf)
		VALUES (nextval('change_version_seq'), 'domain', 5, '{"id": 5, "host": "Not A Host", "code_mode": "sequential", "status": "active"}')
		RETURNING version`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	v3 := e.create(t)
	logs := &warnings{}
	r := outbox.New(e.store, e.js, outbox.Config{PollInterval: 50 * time.Millisecond, Log: slog.New(logs)})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.waitVersions(t, []uint64{v1})
	// The relay meets the bad row, says which it is, and tries again; it
	// never publishes past it.
	name := fmt.Sprintf("outbox row %d", bad)
	poll.Until(t, "the relay to retry the bad row", 30*time.Second, func() bool { return logs.count(name) >= 2 })
	if evs := natstest.ChangeEvents(t, e.js); len(evs) != 1 || r.Stats().Published != 1 {
		t.Fatalf("%d events on the stream, %d published; want only the one before the bad row", len(evs), r.Stats().Published)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE outbox SET domain_conf = jsonb_set(domain_conf, '{host}', '"ok.example"') WHERE version = $1`, bad); err != nil {
		t.Fatal(err)
	}
	evs := e.waitVersions(t, []uint64{v1, bad, v3})
	if c := evs[1].Conf; c == nil || c.Host != "ok.example" || c.ID != 5 {
		t.Fatalf("mended domain event: %+v", evs[1])
	}
}

// warnings is a slog handler keeping the errors of warnings.
type warnings struct {
	mu   sync.Mutex
	errs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			w.mu.Lock()
			w.errs = append(w.errs, a.Value.String())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

// count is how many errors logged mention s.
func (w *warnings) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.errs {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}
