package clickroll_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var day = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

type env struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	js    jetstream.JetStream
}

func newEnv(t *testing.T, codes int) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	ctx := context.Background()
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
SELECT i, 'code-' || i, $1, 'custom', 'u', 'u', nextval('change_version_seq') FROM generate_series(1, $2::bigint) i`, tenant, codes); err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	if _, err := js.CreateOrUpdateStream(ctx, clicks.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, store: st, js: js}
}

// publish sends msgs batches of per clicks from edge, spread over codes
// code-1..code-10, every third click a bot; it returns the clicks sent.
func (e *env) publish(t *testing.T, edge string, msgs, per int) int {
	t.Helper()
	sent := 0
	for m := range msgs {
		b := clicks.AppendHeader(nil, clicks.Source{Edge: edge, Boot: "boot", Offered: uint64(sent + per)}, per)
		for i := range per {
			code := fmt.Sprintf("code-%d", (m*per+i)%10+1)
			b = clicks.AppendClick(b, clicks.ClickView{Domain: link.DefaultDomain, Code: []byte(code), At: day.UnixMilli() + int64(i), Status: 302,
				Device: clicks.DeviceMobile, Bot: i%3 == 0, Referrer: []byte("t.co")})
		}
		if _, err := e.js.Publish(context.Background(), clicks.Subject(edge), b); err != nil {
			t.Fatal(err)
		}
		sent += per
	}
	return sent
}

func (e *env) total(t *testing.T) (clicks, bots, breakdown int64) {
	t.Helper()
	err := e.pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT sum(clicks) FROM link_clicks_daily), 0)::bigint,
		coalesce((SELECT sum(bot_clicks) FROM link_clicks_daily), 0)::bigint,
		coalesce((SELECT sum(clicks) FROM link_click_breakdown_daily WHERE dimension = 'device'), 0)::bigint`).Scan(&clicks, &bots, &breakdown)
	if err != nil {
		t.Fatal(err)
	}
	return
}

func (e *env) lastSeq(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), clicks.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// run starts r and stops it when the test ends.
func run(t *testing.T, r *clickroll.Roller) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitPosition polls the stored position until it reaches seq, within a
// bound.
func (e *env) waitPosition(t *testing.T, seq uint64) {
	t.Helper()
	var pos uint64
	if err := poll.Wait(context.Background(), "the stored position", 30*time.Second, func() bool {
		var err error
		if pos, err = e.store.ClickPosition(context.Background(), clicks.Stream); err != nil {
			t.Fatal(err)
		}
		return pos >= seq
	}); err != nil {
		t.Fatalf("position %d; want %d: %v", pos, seq, err)
	}
}

// TestTwoRollersApplyEachClickOnce: two control instances at once, one
// active; the standby takes over when the active one stops, mid-stream.
func TestTwoRollersApplyEachClickOnce(t *testing.T) {
	e := newEnv(t, 10)
	a := clickroll.New(e.store, e.js, clickroll.Config{Batch: 8, FetchWait: 100 * time.Millisecond})
	b := clickroll.New(e.store, e.js, clickroll.Config{Batch: 8, FetchWait: 100 * time.Millisecond})
	stopA := run(t, a)
	run(t, b)
	sent := e.publish(t, "e1", 100, 30)
	e.waitPosition(t, 40)
	stopA()
	sent += e.publish(t, "e2", 100, 30)
	e.waitPosition(t, e.lastSeq(t))
	got, bots, breakdown := e.total(t)
	if got != int64(sent) || bots != int64(sent/3) || breakdown != got {
		t.Fatalf("rolled up %d clicks (%d bots, %d by device); want %d (%d)", got, bots, breakdown, sent, sent/3)
	}
	if a.Stats().Txs == 0 && b.Stats().Txs == 0 {
		t.Fatal("no roller applied anything")
	}
}

// TestRedeliveryIsSkipped: messages delivered again after they were
// applied (a durable consumer's ack floor going back after a kill -9)
// change nothing.
func TestRedeliveryIsSkipped(t *testing.T) {
	e := newEnv(t, 10)
	r := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond})
	stop := run(t, r)
	sent := e.publish(t, "e1", 5, 10)
	e.waitPosition(t, 5)
	stop()
	// Deliver all five again, as a reset consumer would.
	ctx := context.Background()
	cons, err := e.js.OrderedConsumer(ctx, clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	pos, err := clickroll.Apply(ctx, r, 5, msgs)
	if err != nil || pos != 5 || r.Stats().Skipped != 5 {
		t.Fatalf("apply of redeliveries: position %d, %v, skipped %d; want 5, nil, 5", pos, err, r.Stats().Skipped)
	}
	if got, _, _ := e.total(t); got != int64(sent) {
		t.Fatalf("rolled up %d; want %d", got, sent)
	}
}

// TestDiscardedMessagesAreCounted: when the stream's limits dropped
// messages the roller never read, it counts them and goes on.
func TestDiscardedMessagesAreCounted(t *testing.T) {
	e := newEnv(t, 10)
	e.publish(t, "e1", 10, 10)
	s, err := e.js.Stream(context.Background(), clicks.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(context.Background(), jetstream.WithPurgeSequence(7)); err != nil { // keeps 7..10
		t.Fatal(err)
	}
	r := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond})
	run(t, r)
	e.waitPosition(t, 10)
	p, err := e.store.ClickPipelineStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := e.total(t); got != 40 || p.LostMsgs != 6 || r.Stats().Lost != 6 {
		t.Fatalf("rolled up %d clicks, %d messages counted lost (roller %d); want 40 and 6", got, p.LostMsgs, r.Stats().Lost)
	}
}

// TestLatencyMerged: two edges' histograms for one day add up bucket by
// bucket.
func TestLatencyMerged(t *testing.T) {
	e := newEnv(t, 1)
	var h1, h2 clicks.Histogram
	h1[clicks.Bucket(1000)], h2[clicks.Bucket(1000)], h2[clicks.Bucket(90000)] = 5, 3, 1
	for i, h := range []*clicks.Histogram{&h1, &h2} {
		b := clicks.AppendLatency(nil, clicks.Source{Edge: fmt.Sprint("e", i), Boot: "b"}, day.UnixMilli()+1000, h)
		if _, err := e.js.Publish(context.Background(), clicks.Subject(fmt.Sprint("e", i)), b); err != nil {
			t.Fatal(err)
		}
	}
	run(t, clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond}))
	e.waitPosition(t, 2)
	hists, err := e.store.RedirectLatency(context.Background(), day, day)
	if err != nil {
		t.Fatal(err)
	}
	var want clicks.Histogram
	want.Add(&h1)
	want.Add(&h2)
	if hists[day] == nil || *hists[day] != want {
		t.Fatalf("merged histogram differs")
	}
}

// TestBacklogRollsUpInLargeTransactions: a roller that finds a backlog
// applies it in transactions of many messages (a transaction costs per row
// it writes, and the rows of one link and day are written once however
// many clicks they sum), each click exactly once.
func TestBacklogRollsUpInLargeTransactions(t *testing.T) {
	e := newEnv(t, 10)
	sent := e.publish(t, "e1", 1000, 10)
	r := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond})
	run(t, r)
	e.waitPosition(t, e.lastSeq(t))
	wantBots := int64(1000 * 4) // clicks 0, 3, 6 and 9 of each message
	if got, bots, breakdown := e.total(t); got != int64(sent) || bots != wantBots || breakdown != got {
		t.Fatalf("rolled up %d clicks (%d bots, %d by device); want %d (%d)", got, bots, breakdown, sent, wantBots)
	}
	// 1,000 messages: 4 transactions of the default 256, a few more if the
	// machine stalls a delivery past MaxDelay; never one per few dozen.
	if st := r.Stats(); st.Txs > 8 {
		t.Fatalf("%d transactions for a backlog of 1,000 messages; want at most 8", st.Txs)
	}
}

// lossyStore loses one committed rollup as a crashed PostgreSQL loses a
// commit it had not flushed (the store commits without waiting for the
// disk): the roller is told it committed, and acknowledges; the next apply
// finds the connection gone.
type lossyStore struct {
	clickroll.Store
	mu   sync.Mutex
	lose int // applies to let through before losing one
	lost bool
	down bool
}

func (s *lossyStore) ApplyClicks(ctx context.Context, r *clickroll.Rollup) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down:
		s.down = false
		return errors.New("server closed the connection unexpectedly")
	case !s.lost && s.lose == 0:
		s.lost, s.down = true, true
		return nil
	}
	s.lose--
	return s.Store.ApplyClicks(ctx, r)
}

// TestLostCommitIsAppliedAgain: a rollup whose commit was lost after the
// roller acknowledged its messages is applied again from the stream, once:
// the stored position, not the acknowledgements, says what was applied.
func TestLostCommitIsAppliedAgain(t *testing.T) {
	e := newEnv(t, 10)
	store := &lossyStore{Store: e.store, lose: 2}
	r := clickroll.New(store, e.js, clickroll.Config{Batch: 8, FetchWait: 100 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	run(t, r)
	sent := e.publish(t, "e1", 40, 10)
	e.waitPosition(t, e.lastSeq(t))
	store.mu.Lock()
	lost := store.lost
	store.mu.Unlock()
	if !lost {
		t.Fatal("no commit was lost: the test lost nothing")
	}
	if got, _, breakdown := e.total(t); got != int64(sent) || breakdown != got {
		t.Fatalf("rolled up %d clicks (%d by device); want %d", got, breakdown, sent)
	}
}

// formatV2 is a click batch as edges published it before domains (format
// 2, no domain in a click): n clicks on code, none a bot, no referrer.
func formatV2(edge string, code string, n int) []byte {
	b := []byte{2, byte(len(edge))}
	b = append(b, edge...)
	b = append(b, 4, 'b', 'o', 'o', 't', 0, 0) // boot, offered and dropped 0
	b = binary.AppendUvarint(b, uint64(n))
	for i := range n {
		b = binary.AppendVarint(b, day.UnixMilli()+int64(i))
		b = binary.AppendUvarint(b, 302)
		b = append(b, byte(clicks.DeviceDesktop), 0, byte(len(code)))
		b = append(b, code...)
	}
	return b
}

// TestClicksRollUpByDomain: the same code on two domains is two links of
// two tenants, rolled up apart from batches that mix them; a batch an edge
// published before domains (format 2, still in the stream after an
// upgrade) rolls up on the platform's domain; a code a domain does not
// have counts as unknown, though another domain has it.
func TestClicksRollUpByDomain(t *testing.T) {
	e := newEnv(t, 0)
	ctx := context.Background()
	a, err := e.store.TenantByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.store.CreateTenant(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `
INSERT INTO domains (id, host, tenant_id, code_mode, version) VALUES (1, 'go.beta.test', $1, 'sequential', nextval('change_version_seq'))`, b); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `
INSERT INTO links (id, domain_id, code, tenant_id, code_source, url_original, url, version) VALUES
	(1, 0, 'same', $2, 'custom', 'u', 'u', nextval('change_version_seq')),
	($3::bigint + 1, 1, 'same', $1, 'custom', 'u', 'u', nextval('change_version_seq'))`, b, a, int64(link.IDBase(1))); err != nil {
		t.Fatal(err)
	}
	// Two messages mixing the domains, then one in the old format.
	for m := range 2 {
		msg := clicks.AppendHeader(nil, clicks.Source{Edge: "e1", Boot: "boot"}, 10)
		for i := range 10 {
			d := []link.DomainID{0, 1, 2, 0}[i%4] // domain 2 has no link "same"
			msg = clicks.AppendClick(msg, clicks.ClickView{Domain: d, Code: []byte("same"), At: day.UnixMilli() + int64(m*10+i), Status: 302, Device: clicks.DeviceMobile})
		}
		if _, err := e.js.Publish(ctx, clicks.Subject("e1"), msg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.js.Publish(ctx, clicks.Subject("old"), formatV2("old", "same", 7)); err != nil {
		t.Fatal(err)
	}
	r := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond})
	run(t, r)
	e.waitPosition(t, 3)
	if st := r.Stats(); st.Bad != 0 || st.Clicks != 27 {
		t.Fatalf("roller applied %d clicks, %d messages undecodable; want 27 and 0", st.Clicks, st.Bad)
	}
	// Of each message's 10 clicks, i = 0, 3, 4, 7, 8 are on domain 0, i =
	// 1, 5, 9 on domain 1 and i = 2, 6 on domain 2.
	for _, tt := range []struct {
		d                  link.DomainID
		clicks, mobile     int64
		desktop, status302 int64
	}{{0, 10 + 7, 10, 7, 17}, {1, 6, 6, 0, 6}} {
		days, br, err := e.store.LinkClicks(ctx, tt.d, "same", day, day, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 1 || days[0].Clicks != tt.clicks {
			t.Errorf("domain %d: days %+v; want %d clicks", tt.d, days, tt.clicks)
		}
		got := map[string]int64{}
		for _, v := range br {
			got[v.Dimension+"="+v.Value] = v.Clicks
		}
		if got["device=mobile"] != tt.mobile || got["device=desktop"] != tt.desktop || got["status=302"] != tt.status302 {
			t.Errorf("domain %d: breakdown %v; want %d mobile, %d desktop, %d status 302", tt.d, got, tt.mobile, tt.desktop, tt.status302)
		}
	}
	for _, tt := range []struct{ tenant, want int64 }{{a, 17}, {b, 6}} {
		days, _, err := e.store.TenantClicks(ctx, tt.tenant, day, day)
		if err != nil || len(days) != 1 || days[0].Clicks != tt.want {
			t.Errorf("tenant %d: %+v, %v; want %d clicks", tt.tenant, days, err, tt.want)
		}
	}
	var unknown int64
	if err := e.pool.QueryRow(ctx, `SELECT unknown_clicks FROM clicks_daily WHERE day = $1`, day).Scan(&unknown); err != nil || unknown != 4 {
		t.Fatalf("unknown clicks %d, %v; want 4 (domain 2's)", unknown, err)
	}
}

// TestOldHoursArePruned: the active roller deletes hourly rows past its
// retention (in batches, from a goroutine of its own), and does not write
// the hours of clicks older than that; days are kept.
func TestOldHoursArePruned(t *testing.T) {
	e := newEnv(t, 2)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Hour)
	// Hours already rolled up: two links, 30 hours each, 10 of them old.
	r := &clickroll.Rollup{Stream: clicks.Stream, Last: 0}
	for i := range 30 {
		h := now.Add(-time.Duration(i) * time.Hour)
		for _, code := range []string{"code-1", "code-2"} {
			r.Hours = append(r.Hours, clickroll.LinkHour{Code: code, Hour: h, Clicks: 1})
			r.Links = append(r.Links, clickroll.LinkDay{Code: code, Day: h.Truncate(24 * time.Hour)})
		}
	}
	slices.SortFunc(r.Links, func(a, b clickroll.LinkDay) int { return cmp.Or(strings.Compare(a.Code, b.Code), a.Day.Compare(b.Day)) })
	r.Links = slices.CompactFunc(r.Links, func(a, b clickroll.LinkDay) bool { return a.Code == b.Code && a.Day.Equal(b.Day) })
	if err := e.store.ApplyClicks(ctx, r); err != nil {
		t.Fatal(err)
	}
	// A click of 40 hours ago, from the stream: its day counts, its hour
	// is past retention.
	old := now.Add(-40 * time.Hour)
	m := clicks.AppendHeader(nil, clicks.Source{Edge: "e1", Boot: "b"}, 1)
	m = clicks.AppendClick(m, clicks.ClickView{Code: []byte("code-1"), At: old.UnixMilli(), Status: 302})
	if _, err := e.js.Publish(ctx, clicks.Subject("e1"), m); err != nil {
		t.Fatal(err)
	}
	// The roller's clock is half past the test's hour, whenever the test
	// runs: the marks do not move under it.
	roller := clickroll.New(e.store, e.js, clickroll.Config{FetchWait: 100 * time.Millisecond, HourRetention: 20 * time.Hour,
		PruneEvery: 50 * time.Millisecond, PruneBatch: 3, Now: func() time.Time { return now.Add(30 * time.Minute) }})
	run(t, roller)
	e.waitPosition(t, 1)
	// Hours before now - 21h (the retention and an hour of margin) go:
	// 8 of each link's, and the tenant's 8.
	poll.Until(t, "old hours pruned", 30*time.Second, func() bool { return roller.Stats().Pruned >= 24 })
	hours, err := e.store.LinkHours(ctx, link.DefaultDomain, "code-1", now.Add(-48*time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 22 || !hours[0].Hour.Equal(now.Add(-21*time.Hour)) {
		t.Fatalf("code-1 keeps %d hours from %v; want the 22 from %v", len(hours), hours[0].Hour, now.Add(-21*time.Hour))
	}
	days, err := e.store.LinkDays(ctx, link.DefaultDomain, "code-1", old.Truncate(24*time.Hour), old.Truncate(24*time.Hour))
	if err != nil || len(days) != 1 || days[0].Clicks < 1 {
		t.Fatalf("the old click's day: %+v, %v; want it counted", days, err)
	}
	if st := roller.Stats(); st.Pruned != 24 {
		t.Fatalf("pruned %d rows; want 24 (8 hours of two links and of their tenant)", st.Pruned)
	}
}
