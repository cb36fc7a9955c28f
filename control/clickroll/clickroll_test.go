package clickroll_test

import (
	"context"
	"errors"
	"fmt"
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
			b = clicks.AppendClick(b, []byte(code), day.UnixMilli()+int64(i), 302, clicks.DeviceMobile, i%3 == 0, []byte("t.co"))
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
