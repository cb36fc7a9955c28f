// Package clickroll is control's consumer of the CLICKS stream: it rolls
// clicks up per link (a domain and a code) per hour and per day (with
// referrer, device, browser, OS, country, UTM, status and edge breakdowns,
// bots apart, and the day's unique visitors), per tenant per hour and per
// day (with its own breakdowns and uniques) and per day overall, merges the
// edges' service-time histograms per day, and records what every edge
// process reported it offered and dropped. At most TopValues values of a
// dimension keep rows of their own per link (or tenant) and day: the rest
// are "other" (control/topn).
//
// Exactly-once: each transaction applies the messages after the stored
// stream position and moves the position to the last of them, together. A
// message redelivered after a crash (a durable consumer's ack floor can go
// back, see NOTES) is at or below the position and is skipped; messages
// are acknowledged only after the commit. One roller is active at a time
// (a PostgreSQL advisory lock); the position compare-and-swap in the
// transaction keeps even a roller that lost the lock mid-batch from
// applying anything twice.
package clickroll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/internal/retry"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Store is the part of the authority the roller uses.
type Store interface {
	// AcquireClickRoller takes the roller lock, which one roller holds at
	// a time, or answers ErrBusy.
	AcquireClickRoller(ctx context.Context) (Session, error)
	// ClickPosition returns the last stream sequence applied from stream
	// (0 if none).
	ClickPosition(ctx context.Context, stream string) (uint64, error)
	// ApplyClicks applies r and moves the position from r.Prev to r.Last
	// in one transaction: a rollup is applied entirely or not at all,
	// exactly once. If the stored position is not r.Prev it applies
	// nothing and returns an error wrapping ErrPositionMoved. Clicks on a
	// (domain, code) the authority has no link for count as unknown
	// clicks only (a code another domain has is no link of this one).
	// A link row's Tenant, when set, is taken as its link's tenant; on
	// success ApplyClicks sets the Tenant of every link row it looked up
	// and found (a link's tenant never changes, so a caller may remember
	// it).
	//
	// The same holds for the UTM parameters of a link row whose Tenant is
	// set: ApplyClicks sets UTM with Tenant when it looks a link up.
	ApplyClicks(ctx context.Context, r *Rollup) error
	// PruneClickHours deletes up to limit hourly rows of hours before
	// before, and returns how many it deleted.
	PruneClickHours(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Session is a roller's term: it holds the roller lock until Close. The
// position check in ApplyClicks keeps even a roller that lost it (its
// connection dropped while it worked) from applying anything twice.
type Session interface {
	// Alive checks that the lock is still held.
	Alive(ctx context.Context) error
	// Close releases the lock.
	Close()
}

// Errors of a Store.
var (
	// ErrPositionMoved means the stored stream position is not the one
	// the roller built its rollup on: another roller applied in between.
	// The rollup was not applied; the roller must re-read the position.
	ErrPositionMoved = errors.New("click stream position moved under the roller")
	// ErrBusy means another roller holds the lock.
	ErrBusy = errors.New("another click roller is active")
)

// Rollup is what the roller applies in one transaction: the messages of
// the stream after Prev up to Last, aggregated. Keys must be unique within
// each slice.
type Rollup struct {
	Stream     string
	Prev, Last uint64 // stream sequences: the stored position before and after
	// Lost counts stream messages between Prev and Last that the stream
	// had already discarded (its limits) when the roller got there.
	Lost      uint64
	Links     []LinkDay
	Breakdown []BreakdownDay
	Hours     []LinkHour
	Sources   []SourceReport
	Latency   []LatencyBucket
	// TopValues is the most values of a dimension that keep rows of their
	// own per link or tenant and day (0: DefaultTopValues); the rest are
	// summed as other. The choice depends only on what is stored and on
	// the rollup, so a rollup applied again where it failed gives the same
	// rows.
	TopValues int
}

// DefaultTopValues is the default of Config.TopValues.
const DefaultTopValues = 100

// LinkDay is one link's clicks on one day: the link of Code on Domain.
type LinkDay struct {
	Domain            link.DomainID
	Code              string
	Day               time.Time // UTC midnight
	Clicks, BotClicks int64
	// Tenant is the link's tenant if the caller knows it, and then UTM is
	// its target's UTM parameters; 0 has the store look both up.
	Tenant int64
	UTM    UTM
	// OwnClicks and OwnBots are the clicks served by the link's own
	// target (rule 0), the ones UTM describes. Clicks served by a rule's
	// target count everywhere else but in UTM: the rules' targets join
	// when issue 23 stores them (the store's utmRows is the place).
	OwnClicks, OwnBots int64
	// Visitors is a sketch of the day's human visitors among these clicks
	// (nil: none known); the store merges it into the day's.
	Visitors *hll.Sketch
}

// LinkHour is one link's clicks in one UTC hour.
type LinkHour struct {
	Domain            link.DomainID
	Code              string
	Hour              time.Time
	Clicks, BotClicks int64
}

// BreakdownDay is one link's clicks on one day with one value of a
// dimension (clickstats.Dim*).
type BreakdownDay struct {
	Domain                 link.DomainID
	Code, Dimension, Value string
	Day                    time.Time
	Clicks, BotClicks      int64
}

// SourceReport is what one edge process reported, and how many of its
// clicks this rollup applies.
type SourceReport struct {
	Edge, Boot       string
	Offered, Dropped uint64 // the highest the messages said
	Applied          int64
}

// LatencyBucket is a count of one histogram bucket on one day.
type LatencyBucket struct {
	Day    time.Time
	Bucket int
	Count  int64
}

// Config tunes the roller. Zero values take the defaults noted.
type Config struct {
	// Durable names the JetStream consumer (default "clickroll").
	Durable string
	// Batch is the most stream messages applied in one transaction
	// (default 256; an edge's message holds up to 1,024 clicks). A
	// transaction's cost in PostgreSQL grows with the rows it writes, not
	// the clicks, and the rows of a link and day are written once however
	// many clicks they sum: so the further the roller falls behind, the
	// larger and cheaper per click its transactions get.
	Batch int
	// MaxDelay is how long a transaction waits for more messages after its
	// first (default 1s): with clicks streaming in, it is the grain of the
	// rollups and how far they trail the stream at most, beyond the
	// transaction itself. A quarter of it without a message ends the wait.
	MaxDelay time.Duration
	// FetchWait bounds one wait for messages when none are coming
	// (default 1s).
	FetchWait time.Duration
	// AckWait is how long JetStream waits for an ack before redelivering
	// (default 30s); redeliveries are skipped by position anyway.
	AckWait time.Duration
	// Replicas is the CLICKS stream's replica count (default 1); control
	// sets it on every session start, so a stream an edge created first
	// takes the cluster's replication.
	Replicas int
	// TopValues is the most values of a dimension kept per link or tenant
	// and day (default DefaultTopValues); the rest are counted as other.
	TopValues int
	// HourRetention is how long hourly rollups are kept (default 7 days):
	// older clicks are not written per hour, and the active roller deletes
	// older hours, PruneBatch rows a statement, every PruneEvery (default
	// 1 minute), in a goroutine of its own that never holds up a rollup.
	HourRetention time.Duration
	PruneEvery    time.Duration
	PruneBatch    int // default 5,000
	// LinkRefresh is how long a link's tenant and UTM parameters are
	// remembered before they are read again (default 5 minutes): a
	// target changed since counts for its new UTM at most that late.
	LinkRefresh time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// DefaultHourRetention is the default of Config.HourRetention.
const DefaultHourRetention = 7 * 24 * time.Hour

// Roller consumes the CLICKS stream into the rollups. Build it with New.
type Roller struct {
	store Store
	js    jetstream.JetStream
	cfg   Config
	win   *window    // the transaction being gathered, reused; Run's own
	links *linkCache // the tenants and UTM parameters of links seen; Run's own

	applied, skipped, lost, bad, txs, position, pruned atomic.Uint64
}

// New returns a roller.
func New(store Store, js jetstream.JetStream, cfg Config) *Roller {
	if cfg.Durable == "" {
		cfg.Durable = "clickroll"
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Second
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = time.Second
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.TopValues <= 0 {
		cfg.TopValues = DefaultTopValues
	}
	if cfg.HourRetention <= 0 {
		cfg.HourRetention = DefaultHourRetention
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Minute
	}
	if cfg.PruneBatch <= 0 {
		cfg.PruneBatch = 5000
	}
	if cfg.LinkRefresh <= 0 {
		cfg.LinkRefresh = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Roller{store: store, js: js, cfg: cfg, win: newWindow(0, newValues()), links: newLinkCache(maxLinks)}
}

// Stats are the roller's counters since it started.
type Stats struct {
	Clicks   uint64 // clicks applied
	Skipped  uint64 // messages redelivered at or below the position, skipped
	Lost     uint64 // messages the stream had discarded before they were read
	Bad      uint64 // messages that did not decode (skipped, logged)
	Txs      uint64 // transactions committed
	Position uint64 // last stream sequence applied
	Pruned   uint64 // hourly rows deleted past HourRetention
}

// Stats returns the counters; safe to call concurrently with Run.
func (r *Roller) Stats() Stats {
	return Stats{Clicks: r.applied.Load(), Skipped: r.skipped.Load(), Lost: r.lost.Load(), Bad: r.bad.Load(),
		Txs: r.txs.Load(), Position: r.position.Load(), Pruned: r.pruned.Load()}
}

// Run consumes until ctx is done. It stands by while another roller is
// active and retries with backoff through database and NATS failures; it
// returns only when ctx ends.
func (r *Roller) Run(ctx context.Context) error {
	b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	retry.Run(ctx, r.session, func(err error) time.Duration {
		switch {
		case errors.Is(err, ErrBusy):
			r.cfg.Log.Debug("click roller standing by: another is active")
			b.Set(time.Second)
		case errors.Is(err, errReposition), errors.Is(err, ErrPositionMoved):
			r.cfg.Log.Info("click roller repositioning", "reason", err)
			b.Set(0)
		default:
			d := b.Next()
			r.cfg.Log.Warn("click roller interrupted", "err", err, "retry_in", d)
			return d
		}
		return b.Next()
	})
	return nil
}

// errReposition means the consumer delivered past a message the stream
// still has (a redelivery overtaken by newer messages): the session starts
// over from the stored position.
var errReposition = errors.New("consumer is out of order with the stored position")

// session is one term as the active roller.
func (r *Roller) session(ctx context.Context) error {
	sc := clicks.StreamConfig()
	sc.Replicas = max(r.cfg.Replicas, 1)
	if _, err := r.js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("ensure clicks stream: %w", err)
	}
	sess, err := r.store.AcquireClickRoller(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	pos, err := r.store.ClickPosition(ctx, clicks.Stream)
	if err != nil {
		return err
	}
	r.position.Store(pos)
	// The durable consumer is recreated at the stored position at every
	// takeover: the database, not the consumer's ack floor, says what was
	// applied, so the consumer never has to wait out AckWait for an
	// earlier roller's unacknowledged messages.
	if err := r.js.DeleteConsumer(ctx, clicks.Stream, r.cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("reset consumer: %w", err)
	}
	cons, err := r.js.CreateConsumer(ctx, clicks.Stream, jetstream.ConsumerConfig{
		Durable:   r.cfg.Durable,
		AckPolicy: jetstream.AckAllPolicy,
		AckWait:   r.cfg.AckWait,
		// A transaction's messages, the next one's prefetched while it
		// commits, and room for redeliveries.
		MaxAckPending: r.cfg.Batch * 4,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   pos + 1,
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	// Messages pulls continuously: the next transaction's messages arrive
	// while this one commits.
	iter, err := cons.Messages(jetstream.PullMaxMessages(r.cfg.Batch))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer iter.Stop()
	// Old hours are deleted beside the rollups, by the active roller only.
	pctx, stopPrune := context.WithCancel(ctx)
	pruned := make(chan struct{})
	go func() { defer close(pruned); r.prune(pctx) }()
	defer func() { stopPrune(); <-pruned }()
	r.cfg.Log.Info("click roller active", "position", pos)
	lastCheck := time.Now()
	for ctx.Err() == nil {
		w, err := r.gather(ctx, iter, pos)
		if err != nil {
			return err
		}
		if w.msgs == 0 {
			// Idle: make sure the lock is still ours now and then.
			if time.Since(lastCheck) > 10*time.Second {
				if err := sess.Alive(ctx); err != nil {
					return err
				}
				lastCheck = time.Now()
			}
			continue
		}
		if pos, err = r.commit(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// next waits up to d for the next message; nil when none came.
func next(ctx context.Context, iter jetstream.MessagesContext, d time.Duration) (jetstream.Msg, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m, err := iter.Next(jetstream.NextContext(wctx))
	switch {
	case err == nil:
		return m, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return nil, nil
	default:
		return nil, fmt.Errorf("fetch: %w", err)
	}
}

// gather rolls up the messages of one transaction after pos as they
// arrive: up to Batch messages, for at most MaxDelay after the first (at
// most FetchWait for the first), and no longer than a quarter of MaxDelay
// after the last: once the stream has nothing more, waiting only delays
// what is in hand.
func (r *Roller) gather(ctx context.Context, iter jetstream.MessagesContext, pos uint64) (*window, error) {
	w := r.win
	w.reset(pos)
	var deadline time.Time
	for w.msgs < r.cfg.Batch {
		wait := r.cfg.FetchWait
		if w.msgs > 0 {
			if wait = min(time.Until(deadline), r.cfg.MaxDelay/4); wait <= 0 {
				break
			}
		}
		m, err := next(ctx, iter, wait)
		if err != nil {
			return nil, err
		}
		if m == nil {
			break
		}
		if w.msgs == 0 {
			deadline = time.Now().Add(r.cfg.MaxDelay)
		}
		if err := r.take(ctx, w, m); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// take adds one delivered message to w, in delivery order.
func (r *Roller) take(ctx context.Context, w *window, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return fmt.Errorf("message metadata: %w", err)
	}
	seq := meta.Sequence.Stream
	w.msgs++
	w.ack = m
	if seq <= w.last {
		r.skipped.Add(1) // applied before: a redelivery
		return nil
	}
	if seq > w.last+1 {
		first, err := r.firstSeq(ctx)
		if err != nil {
			return err
		}
		if first < seq {
			// The stream still holds some of what comes between (a
			// redelivery overtaken by newer messages): never skip it.
			return fmt.Errorf("%w: at %d, delivered %d, stream starts at %d", errReposition, w.last, seq, first)
		}
		w.lost += seq - (w.last + 1)
		r.cfg.Log.Warn("click messages discarded by the stream before they were read", "messages", seq-(w.last+1))
	}
	w.last = seq
	if err := w.add(m.Data(), strings.TrimPrefix(m.Subject(), clicks.SubjectPrefix)); err != nil {
		r.bad.Add(1)
		r.cfg.Log.Error("undecodable click message skipped", "seq", seq, "subject", m.Subject(), "err", err)
	}
	return nil
}

// commit applies w in one transaction, then acknowledges its messages,
// and returns the new position.
func (r *Roller) commit(ctx context.Context, w *window) (uint64, error) {
	if w.last > w.prev {
		now := r.cfg.Now()
		rollup := w.rollup(hourOf(now.Add(-r.cfg.HourRetention).UnixMilli()))
		rollup.TopValues = r.cfg.TopValues
		fresh := now.Add(-r.cfg.LinkRefresh)
		asked := make([]bool, len(rollup.Links)) // the store looks these up
		for i := range rollup.Links {
			l := &rollup.Links[i]
			l.Tenant, l.UTM = r.links.get(linkKey{l.Domain, l.Code}, fresh)
			asked[i] = l.Tenant == 0
		}
		if err := r.store.ApplyClicks(ctx, rollup); err != nil {
			return w.prev, fmt.Errorf("apply clicks after %d: %w", w.prev, err)
		}
		for i, l := range rollup.Links {
			if asked[i] {
				r.links.put(linkKey{l.Domain, l.Code}, l.Tenant, l.UTM, now)
			}
		}
		r.txs.Add(1)
		r.applied.Add(uint64(w.clicks))
		r.lost.Add(w.lost)
		r.position.Store(w.last)
	}
	// Acknowledge only after the commit. AckAll: the last acks them all.
	// A lost ack means a redelivery, which the position skips.
	if err := w.ack.Ack(); err != nil {
		r.cfg.Log.Debug("ack after commit failed; the redelivery will be skipped", "err", err)
	}
	return w.last, nil
}

// apply rolls msgs (in delivery order) up into one transaction after pos,
// then acknowledges them, and returns the new position.
func (r *Roller) apply(ctx context.Context, pos uint64, msgs []jetstream.Msg) (uint64, error) {
	w := r.win
	w.reset(pos)
	for _, m := range msgs {
		if err := r.take(ctx, w, m); err != nil {
			return pos, err
		}
	}
	if w.msgs == 0 {
		return pos, nil
	}
	return r.commit(ctx, w)
}

func (r *Roller) firstSeq(ctx context.Context) (uint64, error) {
	s, err := r.js.Stream(ctx, clicks.Stream)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream info: %w", err)
	}
	return info.State.FirstSeq, nil
}

// prune deletes hourly rows past HourRetention until ctx ends: at once,
// then every PruneEvery, a batch at a time until none is left. An hour
// of margin keeps it off the hour the roller may still be writing.
func (r *Roller) prune(ctx context.Context) {
	t := time.NewTicker(r.cfg.PruneEvery)
	defer t.Stop()
	for {
		before := r.cfg.Now().Add(-r.cfg.HourRetention - time.Hour).Truncate(time.Hour)
		for ctx.Err() == nil {
			n, err := r.store.PruneClickHours(ctx, before, r.cfg.PruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					r.cfg.Log.Warn("pruning hourly click rollups", "err", err)
				}
				break
			}
			r.pruned.Add(uint64(n))
			if n == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxLinks bounds the links a roller remembers (some 100 MB of them).
const maxLinks = 1 << 20

// linkKey is a link: codes are unique per domain only.
type linkKey struct {
	domain link.DomainID
	code   string
}

// linkCache remembers the tenant and target's UTM parameters of each link
// the store found, so the store need not look a hot link up again (a
// million index lookups and heap reads a minute under a campaign). A
// link's tenant never changes, and codes are never reused on a domain;
// its target can change, so an entry is used only while it is fresh
// (Config.LinkRefresh). Links the authority does not have are not
// remembered. Two generations bound it: when the newer holds half the
// limit it becomes the older, and the older is forgotten. Not safe for
// concurrent use.
type linkCache struct {
	cur, old map[linkKey]linkInfo
	max      int
	utms     map[UTM]*UTM // interned: a campaign's links share theirs
}

type linkInfo struct {
	tenant int64
	utm    *UTM  // nil: none
	seen   int64 // Unix seconds of the lookup
}

func newLinkCache(max int) *linkCache {
	return &linkCache{cur: map[linkKey]linkInfo{}, old: map[linkKey]linkInfo{}, max: max, utms: map[UTM]*UTM{}}
}

// get is the link's tenant and UTM if remembered since fresh, else 0.
func (c *linkCache) get(k linkKey, fresh time.Time) (int64, UTM) {
	e, ok := c.cur[k]
	if !ok {
		if e, ok = c.old[k]; ok {
			c.cur[k] = e
		}
	}
	if !ok || e.seen < fresh.Unix() {
		return 0, UTM{}
	}
	if e.utm == nil {
		return e.tenant, UTM{}
	}
	return e.tenant, *e.utm
}

// put remembers a link found at now (tenant 0: not found, forgotten).
func (c *linkCache) put(k linkKey, tenant int64, utm UTM, now time.Time) {
	if tenant == 0 {
		return
	}
	if _, ok := c.cur[k]; !ok && len(c.cur) >= c.max/2 {
		c.old, c.cur = c.cur, make(map[linkKey]linkInfo, len(c.cur))
	}
	e := linkInfo{tenant: tenant, seen: now.Unix()}
	if !utm.Empty() {
		p := c.utms[utm]
		if p == nil {
			if len(c.utms) >= c.max/16 {
				clear(c.utms) // entries keep theirs
			}
			p = &utm
			c.utms[utm] = p
		}
		e.utm = p
	}
	c.cur[k] = e
}
