// Package changefeed applies the control plane's change stream to the edge's
// store, in order, resuming from the last applied position after any
// disconnect.
package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Applier takes entries from the feed.
type Applier interface {
	Apply(e *store.Entry) bool
}

// Feed consumes the change stream. Its counters are safe to read while Run
// runs.
type Feed struct {
	js    jetstream.JetStream
	store Applier
	log   *slog.Logger

	seq     atomic.Uint64 // last applied stream sequence
	version atomic.Uint64 // version of the last applied event
	pending atomic.Uint64 // messages on the stream after the last applied one
	gaps    atomic.Uint64 // events whose Prev did not match what was applied
	bad     atomic.Uint64 // undecodable events, skipped
	caught  atomic.Bool   // pending has reached 0 at least once
	lastAt  atomic.Int64  // Unix nanoseconds of the last applied event
}

// New returns a feed applying js's change stream to s.
func New(js jetstream.JetStream, s Applier, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{js: js, store: s, log: log}
}

// Position is the feed's progress.
type Position struct {
	Seq      uint64 // last applied stream sequence
	Version  uint64 // version of the last applied event
	Pending  uint64 // known messages not yet applied: the lag
	Gaps     uint64
	Bad      uint64
	CaughtUp bool
}

// Position returns the feed's progress.
func (f *Feed) Position() Position {
	return Position{
		Seq: f.seq.Load(), Version: f.version.Load(), Pending: f.pending.Load(),
		Gaps: f.gaps.Load(), Bad: f.bad.Load(), CaughtUp: f.caught.Load(),
	}
}

// Run applies the stream until ctx is done. When the stream is missing or
// NATS is down it retries with backoff; it returns only when ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.consume(ctx)
		if ctx.Err() != nil {
			break
		}
		f.log.Warn("change feed interrupted", "err", err, "seq", f.seq.Load(), "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

// consume runs one ordered consumer starting after the last applied
// sequence. An ordered consumer recreates itself across server restarts; it
// is only rebuilt here when that fails.
func (f *Feed) consume(ctx context.Context) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if seq := f.seq.Load(); seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := f.js.OrderedConsumer(ctx, linkevent.Stream, cfg)
	if err != nil {
		return fmt.Errorf("change feed consumer: %w", err)
	}
	if info, err := f.js.Stream(ctx, linkevent.Stream); err == nil {
		if st := info.CachedInfo().State; st.LastSeq <= f.seq.Load() {
			f.pending.Store(0)
			f.caught.Store(true)
		}
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return fmt.Errorf("change feed messages: %w", err)
	}
	defer iter.Stop()
	go func() { <-ctx.Done(); iter.Stop() }()
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return err
		}
		f.apply(msg)
	}
}

func (f *Feed) apply(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		f.bad.Add(1)
		return
	}
	var ev linkevent.Event
	if err := linkevent.Unmarshal(msg.Data(), &ev); err != nil {
		f.bad.Add(1)
		f.log.Error("undecodable change event skipped", "seq", meta.Sequence.Stream, "err", err)
	} else {
		if last := f.version.Load(); last != 0 && ev.Prev != last && ev.Version > last {
			// Something between what we applied and this event is missing
			// from the stream (purged or aged out): the overlay can no
			// longer prove it is complete.
			f.gaps.Add(1)
			f.log.Error("change feed gap", "applied_version", last, "event_prev", ev.Prev, "event_version", ev.Version)
		}
		if ev.Kind == linkevent.KindLink {
			f.store.Apply(store.EntryFromEvent(&ev))
		}
		if ev.Version > f.version.Load() {
			f.version.Store(ev.Version)
		}
	}
	f.seq.Store(meta.Sequence.Stream)
	f.pending.Store(meta.NumPending)
	f.lastAt.Store(time.Now().UnixNano())
	if meta.NumPending == 0 {
		f.caught.Store(true)
	}
}
