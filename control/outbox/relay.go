// Package outbox publishes the outbox table to the JetStream change stream.
//
// The relay publishes strictly in version order. Versions come from one
// sequence and are taken inside transactions, so they commit out of order and
// rolled-back transactions leave holes. A missing version is never skipped on
// a guess: the relay waits until every transaction that could hold it has
// ended (every transaction with an xid below one taken after the hole was
// seen: see Store.XactCeiling), then reads again; a version still
// missing then was never committed.
//
// A stream message carries a run of consecutive events (linkevent.Batch).
// Each publish expects the stream's previous sequence, so the stream holds
// exactly the relay's order even across failed publishes and competing
// relays, and carries a de-duplication id. After a crash between publish and
// mark, the relay resumes from the last message on the stream, not from the
// outbox's marks: nothing is lost and nothing is published twice. Marks are
// made off the publish path (see marks).
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/retry"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// Store is what the relay needs from the authority.
type Store interface {
	// ReadOutbox returns up to limit outbox rows with version >= from. A
	// hole in them is settled by XactCeiling and XactsEndedBelow, not by
	// the snapshot this read ran in.
	ReadOutbox(ctx context.Context, from uint64, limit int) (Page, error)
	// XactCeiling takes a transaction id in a transaction of its own and
	// returns it: every transaction that got its id before the call has a
	// smaller one. Once XactsEndedBelow(ceiling), a version missing from a
	// page read before the call either shows up in the next read or was
	// never committed (writers take their xid before their version).
	XactCeiling(ctx context.Context) (uint64, error)
	// XactsEndedBelow reports whether every transaction with an id below
	// ceiling has ended.
	XactsEndedBelow(ctx context.Context, ceiling uint64) (bool, error)
	// MinOutboxVersion is the smallest version not yet marked published,
	// if any: where a relay starts when the stream holds no event to
	// resume from.
	MinOutboxVersion(ctx context.Context) (uint64, bool, error)
	// MarkPublished records that every version below next is on the
	// stream.
	MarkPublished(ctx context.Context, next uint64) error
	// PurgePublished deletes up to limit outbox rows below the published
	// position written before before, oldest versions first, and returns
	// how many it deleted.
	PurgePublished(ctx context.Context, before time.Time, limit int) (int, error)
	// AcquireRelay takes the relay lock, which one relay holds at a time,
	// and starts listening for outbox notifications. It answers ErrBusy
	// while another relay holds the lock.
	AcquireRelay(ctx context.Context) (Session, error)
}

// Page is a run of outbox rows in version order.
type Page struct {
	Events []linkevent.Event
}

// Session is a relay's term: it holds the relay lock until Close.
type Session interface {
	// Wait blocks until an outbox notification arrives or ctx is done. A
	// returned error other than ctx's means the session (and so the lock)
	// is gone: the relay must stop publishing.
	Wait(ctx context.Context) error
	// Close releases the lock.
	Close()
}

// ErrBusy means another relay holds the outbox lock.
var ErrBusy = errors.New("another relay holds the outbox lock")

// Config tunes the relay; zero values take the defaults.
type Config struct {
	Batch int // rows per read; default 2,000
	// MessageEvents and MessageBytes bound one stream message: a run of
	// at most MessageEvents consecutive events (default 1,000) in at most
	// MessageBytes (default 256 KiB, and always below the server's
	// max_payload). A single event larger than MessageBytes goes alone.
	MessageEvents int
	MessageBytes  int
	PollInterval  time.Duration // fallback poll without notifications; default 1s
	GapRecheck    time.Duration // how often a hole is re-examined; default 5ms
	Retention     time.Duration // stream max age; default 7 days
	Replicas      int           // stream replicas; default 1
	// PurgeEvery is how often published outbox rows older than PurgeAfter
	// (default Retention: the stream no longer holds them either) are
	// deleted, while the relay is idle; default 1h, negative never.
	PurgeEvery, PurgeAfter time.Duration
	Log                    *slog.Logger
}

// Relay publishes outbox rows. Create it with New and run it with Run.
type Relay struct {
	store Store
	js    jetstream.JetStream
	cfg   Config
	marks *marks
	purge *purger

	// next is the next version to publish; lastSeq the stream sequence of the
	// last event published.
	next    uint64
	lastSeq uint64
	prev    uint64
	// ahead is the read of the page after the one being acknowledged, if
	// one was started (see publishAvailable); owned by Run's goroutine.
	ahead *readAhead

	published   atomic.Uint64
	readAheads  atomic.Uint64
	gapsWaits   atomic.Uint64
	gapRechecks atomic.Uint64
	skipped     atomic.Uint64
	purged      atomic.Uint64
	// For metrics: the last version on the stream, when it was published,
	// and whether this instance holds the relay lock. Edges' applied
	// versions against version give the change feed's end-to-end lag.
	version     atomic.Uint64
	publishedAt atomic.Int64 // Unix nanoseconds
	active      atomic.Bool
}

// New returns a relay publishing store's outbox to js.
func New(store Store, js jetstream.JetStream, cfg Config) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = 2000
	}
	if cfg.MessageEvents <= 0 {
		cfg.MessageEvents = 1000
	}
	if cfg.MessageBytes <= 0 {
		cfg.MessageBytes = 256 << 10
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.GapRecheck <= 0 {
		cfg.GapRecheck = 5 * time.Millisecond
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.PurgeEvery == 0 {
		cfg.PurgeEvery = time.Hour
	}
	if cfg.PurgeAfter <= 0 {
		cfg.PurgeAfter = cfg.Retention
	}
	return &Relay{store: store, js: js, cfg: cfg, marks: newMarks(store.MarkPublished, cfg.Log),
		purge: &purger{every: cfg.PurgeEvery, after: cfg.PurgeAfter, now: time.Now}}
}

// StreamConfig is the change stream's configuration.
func StreamConfig(retention time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       linkevent.Stream,
		Subjects:   []string{linkevent.Subject},
		Storage:    jetstream.FileStorage,
		Retention:  jetstream.LimitsPolicy,
		MaxAge:     retention,
		Replicas:   replicas,
		Duplicates: 2 * time.Minute,
		Discard:    jetstream.DiscardOld,
	}
}

// Stats are the relay's counters.
type Stats struct {
	Published, GapWaits, Skipped uint64
	// Purged counts outbox rows deleted once published and past PurgeAfter.
	Purged uint64
	// GapRechecks counts the times a hole's holders were asked whether
	// they had ended, so a test can tell many rechecks from few.
	GapRechecks uint64
	// ReadAheads counts pages read while the previous page's acks were
	// awaited and then published from.
	ReadAheads uint64
	// Version is the newest version on the change stream as this relay
	// last saw it; LastPublish when it last published (zero: not yet);
	// Active whether this instance is the publishing relay.
	Version     uint64
	LastPublish time.Time
	Active      bool
	// Marked is the newest position this relay recorded in the outbox
	// (Store.MarkPublished), which trails the stream: marks are made off
	// the publish path.
	Marked uint64
}

// Stats returns the relay's counters; safe to call concurrently with Run.
func (r *Relay) Stats() Stats {
	st := Stats{Published: r.published.Load(), GapWaits: r.gapsWaits.Load(), Skipped: r.skipped.Load(), Purged: r.purged.Load(),
		GapRechecks: r.gapRechecks.Load(), ReadAheads: r.readAheads.Load(), Version: r.version.Load(), Active: r.active.Load(),
		Marked: r.marks.marked.Load()}
	if ns := r.publishedAt.Load(); ns != 0 {
		st.LastPublish = time.Unix(0, ns)
	}
	return st
}

// Run publishes until ctx is done. It waits while another relay holds the
// lock and retries with backoff through database and NATS failures; it only
// returns when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	retry.Run(ctx, r.session, func(err error) time.Duration {
		d := b.Next()
		if errors.Is(err, ErrBusy) {
			r.cfg.Log.Debug("outbox relay standing by: another relay is active")
			b.Set(time.Second) // a standby asks again every second
		} else {
			r.cfg.Log.Warn("outbox relay interrupted", "err", err, "retry_in", d)
		}
		return d
	})
	return nil
}

// session is one term as the active relay.
func (r *Relay) session(ctx context.Context) error {
	if _, err := r.js.CreateOrUpdateStream(ctx, StreamConfig(r.cfg.Retention, r.cfg.Replicas)); err != nil {
		return fmt.Errorf("ensure stream: %w", err)
	}
	sess, err := r.store.AcquireRelay(ctx)
	if err != nil {
		return err
	}
	defer sess.Close()
	r.active.Store(true)
	defer r.active.Store(false)
	mctx, stopMarks := context.WithCancel(ctx)
	var marking sync.WaitGroup
	marking.Go(func() { r.marks.run(mctx) })
	defer func() {
		stopMarks()
		marking.Wait()
		// A last mark, so a relay that stops leaves the outbox's marks
		// where the stream is; bounded, as the database may be why.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = r.marks.flush(fctx)
	}()
	defer r.dropAhead()
	if err := r.resync(ctx); err != nil {
		return err
	}
	r.version.Store(r.prev)
	r.cfg.Log.Info("outbox relay active", "next_version", r.next, "stream_seq", r.lastSeq)
	for ctx.Err() == nil {
		n, err := r.publishAvailable(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			continue // more may be waiting behind a full page
		}
		r.purge.idle(ctx, r)
		if r.purge.busy {
			continue // publish what came meanwhile, then the next batch
		}
		wctx, cancel := context.WithTimeout(ctx, r.cfg.PollInterval)
		err = sess.Wait(wctx)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// resync sets next and lastSeq from the stream's last message (its version
// header names its last event): the stream is the record of what was
// published, the outbox's marks are only a hint.
func (r *Relay) resync(ctx context.Context) error {
	stream, err := r.js.Stream(ctx, linkevent.Stream)
	if err != nil {
		return fmt.Errorf("resync: %w", err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, linkevent.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		info, err := stream.Info(ctx)
		if err != nil {
			return fmt.Errorf("resync: %w", err)
		}
		r.lastSeq, r.prev = info.State.LastSeq, 0
		min, ok, err := r.store.MinOutboxVersion(ctx)
		if err != nil {
			return fmt.Errorf("resync: %w", err)
		}
		r.next = 1
		if ok {
			r.next = min
		}
		return nil
	case err != nil:
		return fmt.Errorf("resync: %w", err)
	}
	v, err := strconv.ParseUint(msg.Header.Get(linkevent.HeaderVersion), 10, 64)
	if err != nil {
		return fmt.Errorf("resync: last stream message %d has no version header", msg.Sequence)
	}
	r.lastSeq, r.prev, r.next = msg.Sequence, v, v+1
	r.marks.set(r.next)
	return nil
}

// publishAvailable publishes what can be published now, returning how many.
//
// While the acks of a full page's messages are awaited, the next page is
// read (a database round trip beside a NATS one); the next call takes it
// if the run was published whole. A read, however early, only ever misses
// rows committed after it, which a later read finds, and a hole in it is
// settled by a ceiling taken after it, as for any read.
func (r *Relay) publishAvailable(ctx context.Context) (int, error) {
	var (
		page Page
		err  error
	)
	if ra := r.ahead; ra != nil && ra.from == r.next {
		r.ahead = nil
		<-ra.done
		page, err = ra.page, ra.err
		r.readAheads.Add(1)
	} else {
		r.dropAhead()
		page, err = r.store.ReadOutbox(ctx, r.next, r.cfg.Batch)
	}
	if err != nil {
		return 0, err
	}
	if len(page.Events) == 0 {
		return 0, nil
	}
	if page.Events[0].Version != r.next {
		// A hole at r.next: wait for the transactions that may hold it.
		if err := r.waitSettled(ctx); err != nil {
			return 0, err
		}
		again, err := r.store.ReadOutbox(ctx, r.next, r.cfg.Batch)
		if err != nil {
			return 0, err
		}
		if len(again.Events) > 0 && again.Events[0].Version != r.next {
			// Settled and still missing: versions below the first row were
			// rolled back and can never commit.
			r.skipped.Add(again.Events[0].Version - r.next)
			r.next = again.Events[0].Version
		}
		page = again
	}
	// Publish the contiguous run; a later hole is handled on the next call.
	run := page.Events
	for i := 1; i < len(run); i++ {
		if run[i].Version != run[i-1].Version+1 {
			run = run[:i]
			break
		}
	}
	if len(run) == 0 {
		return 0, nil
	}
	readAhead := func() {}
	if len(run) == r.cfg.Batch { // more may be waiting behind a full page
		from := run[len(run)-1].Version + 1
		readAhead = func() { r.ahead = r.startRead(ctx, from) }
	}
	if err := r.publish(ctx, run, readAhead); err != nil {
		return 0, err
	}
	r.marks.set(r.next)
	return len(run), nil
}

// readAhead is one ReadOutbox running on its own goroutine.
type readAhead struct {
	from uint64
	done chan struct{} // closed when page and err are set
	page Page
	err  error
}

func (r *Relay) startRead(ctx context.Context, from uint64) *readAhead {
	ra := &readAhead{from: from, done: make(chan struct{})}
	go func() {
		defer close(ra.done)
		ra.page, ra.err = r.store.ReadOutbox(ctx, from, r.cfg.Batch)
	}()
	return ra
}

// dropAhead discards a read ahead that is not wanted, after it ends.
func (r *Relay) dropAhead() {
	if r.ahead != nil {
		<-r.ahead.done
		r.ahead = nil
	}
}

// waitSettled waits until no transaction that could hold a version missing
// from a page already read is still running. Every writer takes its xid
// before its version, so the holder of a missing version v got its xid
// before a later version was committed and read: before the ceiling taken
// here. (The read's own snapshot cannot tell: its xmax is one past the
// newest completed xid, so a holder whose xid is above that, still running,
// is in neither its in-progress list nor below its xmax. That lost a
// committed change once.)
func (r *Relay) waitSettled(ctx context.Context) error {
	r.gapsWaits.Add(1)
	ceiling, err := r.store.XactCeiling(ctx)
	if err != nil {
		return err
	}
	for {
		ok, err := r.store.XactsEndedBelow(ctx, ceiling)
		r.gapRechecks.Add(1)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.cfg.GapRecheck):
		}
	}
}

// publish sends events as a run of messages, pipelined, each a batch of
// consecutive events (linkevent.Batch) expecting its predecessor's
// sequence, with the de-duplication id of its first version and its last
// version in the header. If any fails, it resyncs from the stream, which
// then says exactly how far the run got. An event that does not encode
// ends the run before it: what precedes it is published, and the error
// names it.
//
// afterSend runs once every message is sent, before the acks are awaited.
func (r *Relay) publish(ctx context.Context, events []linkevent.Event, afterSend func()) error {
	type sent struct {
		f           jetstream.PubAckFuture
		first, last uint64
		n           int
	}
	var (
		msgs    []sent
		batch   linkevent.Batch
		prev    = r.prev
		bad     error
		maxSize = r.messageBytes()
	)
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		// Each message gets its own buffer: the client keeps it until
		// the ack, to send it again after a reconnect.
		msg := &nats.Msg{Subject: linkevent.Subject, Data: batch.Bytes(), Header: nats.Header{}}
		msg.Header.Set(linkevent.HeaderVersion, strconv.FormatUint(batch.Last(), 10))
		f, err := r.js.PublishMsgAsync(msg,
			jetstream.WithMsgID(linkevent.MsgID(batch.First())),
			jetstream.WithExpectLastSequence(r.lastSeq+uint64(len(msgs))))
		if err != nil {
			return fmt.Errorf("publish versions %d to %d: %w", batch.First(), batch.Last(), err)
		}
		msgs = append(msgs, sent{f: f, first: batch.First(), last: batch.Last(), n: batch.Len()})
		batch = linkevent.Batch{}
		return nil
	}
	for i := range events {
		e := &events[i]
		e.Prev = prev
		if batch.Len() >= r.cfg.MessageEvents || (batch.Len() > 0 && batch.Size()+linkevent.EncodedSize(e) > maxSize) {
			if err := flush(); err != nil {
				return r.failed(ctx, err)
			}
		}
		if err := batch.Add(e); err != nil {
			bad = fmt.Errorf("outbox row %d: %w", e.Version, err)
			break
		}
		prev = e.Version
	}
	if err := flush(); err != nil {
		return r.failed(ctx, err)
	}
	if bad == nil {
		afterSend()
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for _, m := range msgs {
		select {
		case ack := <-m.f.Ok():
			if ack.Duplicate || ack.Sequence != r.lastSeq+1 {
				return r.failed(ctx, fmt.Errorf("versions %d to %d stored at sequence %d (duplicate %v), expected %d", m.first, m.last, ack.Sequence, ack.Duplicate, r.lastSeq+1))
			}
			r.lastSeq, r.prev, r.next = ack.Sequence, m.last, m.last+1
			r.published.Add(uint64(m.n))
			r.version.Store(r.prev)
		case err := <-m.f.Err():
			return r.failed(ctx, fmt.Errorf("publish versions %d to %d: %w", m.first, m.last, err))
		case <-timeout.C:
			return r.failed(ctx, fmt.Errorf("publish versions %d to %d: no ack within 10s", m.first, m.last))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(msgs) > 0 {
		r.publishedAt.Store(time.Now().UnixNano())
	}
	return bad
}

// messageBytes is the byte budget of one message: the configured one, kept
// clear of the server's max_payload with room for the headers.
func (r *Relay) messageBytes() int {
	n := r.cfg.MessageBytes
	if max := int(r.js.Conn().MaxPayload()) - 4<<10; max > 0 && n > max {
		n = max
	}
	return n - linkevent.BatchOverhead
}

func (r *Relay) failed(ctx context.Context, err error) error {
	if rerr := r.resync(ctx); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}
