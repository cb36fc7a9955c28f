// Package clickroll is control's consumer of the CLICKS stream: it rolls
// clicks up per link per day (with referrer, device, status and edge
// breakdowns, bots apart), per tenant per day and per day overall, merges
// the edges' service-time histograms per day, and records what every edge
// process reported it offered and dropped.
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
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/retry"
	"github.com/edgelink/edgelink/shared/clicks"
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
	// nothing and returns an error wrapping ErrPositionMoved. Clicks on
	// codes the authority has no link for count as unknown clicks only.
	ApplyClicks(ctx context.Context, r *Rollup) error
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
	Sources   []SourceReport
	Latency   []LatencyBucket
}

// LinkDay is one link's clicks on one day.
type LinkDay struct {
	Code              string
	Day               time.Time // UTC midnight
	Clicks, BotClicks int64
}

// BreakdownDay is one link's clicks on one day with one value of a
// dimension: "referrer", "device", "status" or "edge".
type BreakdownDay struct {
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
	// (default 64; an edge's message holds up to 1,024 clicks).
	Batch int
	// FetchWait bounds one wait for messages (default 1s).
	FetchWait time.Duration
	// AckWait is how long JetStream waits for an ack before redelivering
	// (default 30s); redeliveries are skipped by position anyway.
	AckWait time.Duration
	// Replicas is the CLICKS stream's replica count (default 1); control
	// sets it on every session start, so a stream an edge created first
	// takes the cluster's replication.
	Replicas int
	Log      *slog.Logger
}

// Roller consumes the CLICKS stream into the rollups. Build it with New.
type Roller struct {
	store Store
	js    jetstream.JetStream
	cfg   Config

	applied, skipped, lost, bad, txs, position atomic.Uint64
}

// New returns a roller.
func New(store Store, js jetstream.JetStream, cfg Config) *Roller {
	if cfg.Durable == "" {
		cfg.Durable = "clickroll"
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = time.Second
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Roller{store: store, js: js, cfg: cfg}
}

// Stats are the roller's counters since it started.
type Stats struct {
	Clicks   uint64 // clicks applied
	Skipped  uint64 // messages redelivered at or below the position, skipped
	Lost     uint64 // messages the stream had discarded before they were read
	Bad      uint64 // messages that did not decode (skipped, logged)
	Txs      uint64 // transactions committed
	Position uint64 // last stream sequence applied
}

// Stats returns the counters; safe to call concurrently with Run.
func (r *Roller) Stats() Stats {
	return Stats{Clicks: r.applied.Load(), Skipped: r.skipped.Load(), Lost: r.lost.Load(), Bad: r.bad.Load(),
		Txs: r.txs.Load(), Position: r.position.Load()}
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
		Durable:       r.cfg.Durable,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       r.cfg.AckWait,
		MaxAckPending: r.cfg.Batch * 4,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   pos + 1,
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	r.cfg.Log.Info("click roller active", "position", pos)
	lastCheck := time.Now()
	for ctx.Err() == nil {
		batch, err := cons.Fetch(r.cfg.Batch, jetstream.FetchMaxWait(r.cfg.FetchWait))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("fetch: %w", err)
		}
		if len(msgs) == 0 {
			// Idle: make sure the lock is still ours now and then.
			if time.Since(lastCheck) > 10*time.Second {
				if err := sess.Alive(ctx); err != nil {
					return err
				}
				lastCheck = time.Now()
			}
			continue
		}
		next, err := r.apply(ctx, pos, msgs)
		if err != nil {
			return err
		}
		pos = next
	}
	return nil
}

// apply rolls msgs (in delivery order) up into one transaction after pos,
// then acknowledges them, and returns the new position.
func (r *Roller) apply(ctx context.Context, pos uint64, msgs []jetstream.Msg) (uint64, error) {
	agg := newAggregator(pos)
	var last jetstream.Msg
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return pos, fmt.Errorf("message metadata: %w", err)
		}
		seq := meta.Sequence.Stream
		last = m
		if seq <= agg.Last {
			r.skipped.Add(1) // applied before: a redelivery
			continue
		}
		if seq > agg.Last+1 {
			first, err := r.firstSeq(ctx)
			if err != nil {
				return pos, err
			}
			if first < seq {
				// The stream still holds some of what comes between (a
				// redelivery overtaken by newer messages): never skip it.
				return pos, fmt.Errorf("%w: at %d, delivered %d, stream starts at %d", errReposition, agg.Last, seq, first)
			}
			agg.Lost += seq - (agg.Last + 1)
			r.cfg.Log.Warn("click messages discarded by the stream before they were read", "messages", seq-(agg.Last+1))
		}
		agg.Last = seq
		b, err := clicks.Decode(m.Data())
		if err != nil {
			r.bad.Add(1)
			r.cfg.Log.Error("undecodable click message skipped", "seq", seq, "subject", m.Subject(), "err", err)
			continue
		}
		if b.Edge == "" {
			b.Edge = strings.TrimPrefix(m.Subject(), clicks.SubjectPrefix)
		}
		agg.add(b)
	}
	if agg.Last > pos {
		rollup := agg.rollup()
		if err := r.store.ApplyClicks(ctx, rollup); err != nil {
			return pos, fmt.Errorf("apply clicks after %d: %w", pos, err)
		}
		r.txs.Add(1)
		r.applied.Add(uint64(agg.clicks))
		r.lost.Add(agg.Lost)
		r.position.Store(agg.Last)
	}
	// Acknowledge only after the commit. AckAll: the last acks them all.
	// A lost ack means a redelivery, which the position skips.
	if err := last.Ack(); err != nil {
		r.cfg.Log.Debug("ack after commit failed; the redelivery will be skipped", "err", err)
	}
	return agg.Last, nil
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

// aggregator aggregates decoded messages into the rows of one transaction.
type aggregator struct {
	Rollup
	clicks   int
	links    map[linkKey]*counts
	dims     map[dimKey]*counts
	sources  map[[2]string]*SourceReport
	latency  map[latKey]int64
	statuses map[uint16]string
}

type linkKey struct {
	code string
	day  time.Time
}

type dimKey struct {
	linkKey
	dim, value string
}

type latKey struct {
	day    time.Time
	bucket int
}

type counts struct{ clicks, bots int64 }

func (c *counts) add(bot bool) {
	c.clicks++
	if bot {
		c.bots++
	}
}

func newAggregator(pos uint64) *aggregator {
	return &aggregator{
		Rollup: Rollup{Stream: clicks.Stream, Prev: pos, Last: pos},
		links:  make(map[linkKey]*counts), dims: make(map[dimKey]*counts),
		sources: make(map[[2]string]*SourceReport), latency: make(map[latKey]int64),
		statuses: make(map[uint16]string),
	}
}

func (a *aggregator) count(m map[dimKey]*counts, k dimKey, bot bool) {
	c := m[k]
	if c == nil {
		c = new(counts)
		m[k] = c
	}
	c.add(bot)
}

func (a *aggregator) add(b clicks.Batch) {
	src := a.sources[[2]string{b.Edge, b.Boot}]
	if src == nil {
		src = &SourceReport{Edge: b.Edge, Boot: b.Boot}
		a.sources[[2]string{b.Edge, b.Boot}] = src
	}
	src.Offered, src.Dropped = max(src.Offered, b.Offered), max(src.Dropped, b.Dropped)
	src.Applied += int64(len(b.Clicks))
	if b.Latency != nil {
		day := clicks.DayOf(b.At)
		for i, c := range b.Latency {
			if c != 0 {
				a.latency[latKey{day, i}] += int64(c)
			}
		}
		return
	}
	a.clicks += len(b.Clicks)
	for _, c := range b.Clicks {
		k := linkKey{c.Code, c.Day()}
		lc := a.links[k]
		if lc == nil {
			lc = new(counts)
			a.links[k] = lc
		}
		lc.add(c.Bot)
		status, ok := a.statuses[c.Status]
		if !ok {
			status = strconv.Itoa(int(c.Status))
			a.statuses[c.Status] = status
		}
		a.count(a.dims, dimKey{k, "referrer", c.Referrer}, c.Bot)
		a.count(a.dims, dimKey{k, "device", c.Device.String()}, c.Bot)
		a.count(a.dims, dimKey{k, "status", status}, c.Bot)
		a.count(a.dims, dimKey{k, "edge", b.Edge}, c.Bot)
	}
}

func (a *aggregator) rollup() *Rollup {
	r := a.Rollup
	for k, c := range a.links {
		r.Links = append(r.Links, LinkDay{Code: k.code, Day: k.day, Clicks: c.clicks, BotClicks: c.bots})
	}
	for k, c := range a.dims {
		r.Breakdown = append(r.Breakdown, BreakdownDay{Code: k.code, Day: k.day, Dimension: k.dim, Value: k.value,
			Clicks: c.clicks, BotClicks: c.bots})
	}
	for _, s := range a.sources {
		r.Sources = append(r.Sources, *s)
	}
	for k, n := range a.latency {
		r.Latency = append(r.Latency, LatencyBucket{Day: k.day, Bucket: k.bucket, Count: n})
	}
	return &r
}
