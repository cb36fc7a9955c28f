// Package changefeed applies the control plane's change stream to the edge's
// store, in order, resuming from the last applied position after any
// disconnect.
package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/retry"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Applier takes entries from the feed.
type Applier interface {
	Apply(e *store.Entry) bool
}

// SegmentSealer takes sealed-segment events; an Applier may implement it.
type SegmentSealer interface {
	Seal(start, end uint64)
}

// DomainApplier takes domain events, a domain's whole configuration each;
// an Applier may implement it (store.Layers does). They are applied in
// stream order with the link events, so a link on a new domain never
// arrives before its domain.
type DomainApplier interface {
	ApplyDomain(c link.Domain) error
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
	bad     atomic.Uint64 // undecodable messages, skipped whole
	// badDomains counts domain events the store refused (an invalid
	// configuration): the domain keeps its previous state.
	badDomains atomic.Uint64
	caught     atomic.Bool  // pending has reached 0 at least once
	lastAt     atomic.Int64 // Unix nanoseconds of the last applied event

	pauseMu sync.Mutex
	paused  chan struct{} // non-nil while paused; closed on Resume

	// mu serializes applying a message with Restart, so no message of a
	// consumer started before a Restart is applied after it.
	mu     sync.Mutex
	gen    uint64             // incremented by Restart
	cancel context.CancelFunc // stops the current consumer
	events []linkevent.Event  // decoded message, reused; guarded by mu
}

// errRestarted ends a consumer that Restart replaced.
var errRestarted = errors.New("change feed repositioned")

// New returns a feed applying js's change stream to s.
func New(js jetstream.JetStream, s Applier, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{js: js, store: s, log: log}
}

// Position is the feed's progress.
type Position struct {
	Seq     uint64 // last applied stream sequence
	Version uint64 // version of the last applied event
	Pending uint64 // known messages not yet applied (a message carries a run of changes): the lag
	Gaps    uint64
	Bad     uint64
	// BadDomains counts domain events refused as invalid.
	BadDomains uint64
	CaughtUp   bool
	// LastApplied is when the last event was applied (zero before any).
	LastApplied time.Time
}

// Position returns the feed's progress.
func (f *Feed) Position() Position {
	return Position{
		Seq: f.seq.Load(), Version: f.version.Load(), Pending: f.pending.Load(),
		Gaps: f.gaps.Load(), Bad: f.bad.Load(), BadDomains: f.badDomains.Load(), CaughtUp: f.caught.Load(),
		LastApplied: lastApplied(f.lastAt.Load()),
	}
}

func lastApplied(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Complete reports whether the feed can prove it applied every change up
// to its version: no gap was ever seen. After a gap the edge must not answer
// a miss from what it has applied (it would need a re-sync from a snapshot).
func (f *Feed) Complete() bool { return f.gaps.Load() == 0 }

// Restart repositions the feed after stream sequence seq, whose event had
// version (a snapshot's position), forgets any gap and waits to catch up
// again. It may be called before Run (to start after a snapshot) or while
// Run runs (a re-sync from a newer snapshot): the running consumer is
// stopped and no message it received is applied afterwards.
func (f *Feed) Restart(seq, version uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	f.seq.Store(seq)
	f.version.Store(version)
	f.gaps.Store(0)
	f.caught.Store(false)
	if f.cancel != nil {
		f.cancel()
	}
}

// Pause stops applying events until Resume; received events wait in the
// consumer. It exists so tests can prove that the edge answers correctly
// while its view lags.
func (f *Feed) Pause() {
	f.pauseMu.Lock()
	if f.paused == nil {
		f.paused = make(chan struct{})
	}
	f.pauseMu.Unlock()
}

// Resume undoes Pause.
func (f *Feed) Resume() {
	f.pauseMu.Lock()
	if f.paused != nil {
		close(f.paused)
		f.paused = nil
	}
	f.pauseMu.Unlock()
}

func (f *Feed) waitResumed(ctx context.Context) {
	f.pauseMu.Lock()
	ch := f.paused
	f.pauseMu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// streamWait is how often the feed looks for a change stream that does not
// exist yet.
const streamWait = 100 * time.Millisecond

// Run applies the stream until ctx is done. When the stream is missing or
// NATS is down it retries with backoff; it returns only when ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	retry.Run(ctx, f.consume, func(err error) time.Duration {
		switch {
		case errors.Is(err, errRestarted):
			return 0
		case errors.Is(err, jetstream.ErrStreamNotFound):
			// Normal while control has not created the stream yet (a fresh
			// cluster, or the local stack starting the edge first). Asking
			// is cheap and the stream comes with control's first start, so
			// the wait does not grow: a fresh edge is ready within a beat
			// of control.
			f.log.Debug("change feed waiting for the change stream", "retry_in", streamWait)
			return streamWait
		}
		d := b.Next()
		f.log.Warn("change feed interrupted", "err", err, "seq", f.seq.Load(), "retry_in", d)
		return d
	})
	return nil
}

// consume runs one ordered consumer starting after the last applied
// sequence. An ordered consumer recreates itself across server restarts; it
// is only rebuilt here when that fails.
func (f *Feed) consume(ctx context.Context) error {
	f.mu.Lock()
	gen := f.gen
	cctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	f.mu.Unlock()
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if seq := f.seq.Load(); seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := f.js.OrderedConsumer(ctx, linkevent.Stream, cfg)
	if err != nil {
		return fmt.Errorf("change feed consumer: %w", err)
	}
	if info, err := f.js.Stream(ctx, linkevent.Stream); err == nil {
		st := info.CachedInfo().State
		f.mu.Lock()
		stale := f.gen != gen
		f.mu.Unlock()
		if stale {
			return errRestarted
		}
		if st.FirstSeq > f.seq.Load()+1 && st.Msgs > 0 {
			// Events we never applied are gone from the stream (limits or
			// a purge); whatever we apply next, we cannot prove
			// completeness.
			f.gaps.Add(1)
			f.log.Error("change feed gap: stream starts after our position", "first_seq", st.FirstSeq, "applied_seq", f.seq.Load())
		}
		if st.LastSeq <= f.seq.Load() {
			f.pending.Store(0)
			f.caught.Store(true)
		}
	}
	// A bulk load's messages carry up to 1,000 changes and 256 KiB each
	// (outbox.Config): a thousand of them buffered in the client would cost
	// more than the links they carry once applied. 32 keep 32,000 changes
	// in flight in at most 8 MiB. (PullMaxBytes would bound the bytes, but
	// allocates a channel of a million messages, 8 MB, to do it.)
	iter, err := cons.Messages(jetstream.PullMaxMessages(feedBufferMessages))
	if err != nil {
		return fmt.Errorf("change feed messages: %w", err)
	}
	defer iter.Stop()
	go func() { <-cctx.Done(); iter.Stop() }()
	for {
		msg, err := iter.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				if ctx.Err() == nil && cctx.Err() != nil {
					return errRestarted
				}
				return ctx.Err()
			}
			return err
		}
		f.waitResumed(cctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.mu.Lock()
		if f.gen != gen {
			f.mu.Unlock()
			return errRestarted
		}
		f.apply(msg)
		f.mu.Unlock()
	}
}

// apply applies one message: a run of events (a batch) or one JSON event
// from a control before batching, in order, each exactly as a message of its
// own would be. The caller holds mu.
func (f *Feed) apply(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		f.bad.Add(1)
		return
	}
	f.events, err = linkevent.Decode(msg.Data(), f.events)
	if err != nil {
		// Counted as one bad message; none of its events is applied, and
		// the next message's Prev reports the gap it leaves.
		f.bad.Add(1)
		f.log.Error("undecodable change message skipped", "seq", meta.Sequence.Stream, "err", err)
	}
	for i := range f.events {
		f.applyEvent(&f.events[i])
	}
	if cap(f.events) > maxKeptEvents {
		f.events = nil // one huge message does not pin its array for good
	}
	f.seq.Store(meta.Sequence.Stream)
	f.pending.Store(meta.NumPending)
	f.lastAt.Store(time.Now().UnixNano())
	if meta.NumPending == 0 {
		f.caught.Store(true)
	}
}

// feedBufferMessages bounds the stream messages the client buffers ahead
// of the feed.
const feedBufferMessages = 32

// maxKeptEvents bounds the decoded events kept for the next message.
const maxKeptEvents = 4096

func (f *Feed) applyEvent(ev *linkevent.Event) {
	if last := f.version.Load(); last != 0 && ev.Prev != last && ev.Version > last {
		// Something between what we applied and this event is missing
		// from the stream (purged or aged out): the overlay can no
		// longer prove it is complete.
		f.gaps.Add(1)
		f.log.Error("change feed gap", "applied_version", last, "event_prev", ev.Prev, "event_version", ev.Version)
	}
	switch ev.Kind {
	case linkevent.KindLink:
		f.store.Apply(store.EntryFromEvent(ev))
	case linkevent.KindSegment:
		if s, ok := f.store.(SegmentSealer); ok && ev.SegState == linkevent.SegmentSealed {
			s.Seal(ev.SegStart, ev.SegEnd)
		}
	case linkevent.KindDomain:
		f.applyDomain(ev)
	}
	if ev.Version > f.version.Load() {
		f.version.Store(ev.Version)
	}
}

// applyDomain hands a domain event's configuration to the store. The
// configuration's own Version orders it against the snapshot's table; an
// event whose configuration lacks one is as new as the event.
func (f *Feed) applyDomain(ev *linkevent.Event) {
	d, ok := f.store.(DomainApplier)
	if !ok {
		return
	}
	if ev.Conf == nil {
		f.badDomains.Add(1)
		f.log.Error("domain event without a configuration skipped", "version", ev.Version)
		return
	}
	c := *ev.Conf
	if c.Version == 0 {
		c.Version = ev.Version
	}
	if err := d.ApplyDomain(c); err != nil {
		f.badDomains.Add(1)
		f.log.Error("domain event refused", "domain", c.ID, "version", ev.Version, "err", err)
	}
}
