// Package clicks records a click per redirect off the response path and
// publishes them in batches to the CLICKS stream.
package clicks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Publisher is the part of JetStream the recorder uses.
type Publisher interface {
	Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// Config sizes the recorder.
type Config struct {
	Edge string // the edge's name: the subject suffix
	// Buffer is how many clicks may wait for publishing (default 65536);
	// past it clicks are dropped and counted.
	Buffer int
	// Batch is the most clicks in one message (default 1024).
	Batch int
	// FlushEvery bounds how long a click waits (default 200ms).
	FlushEvery time.Duration
	// PublishTimeout bounds one publish (default 2s).
	PublishTimeout time.Duration
	Log            *slog.Logger
}

type rec struct {
	at   int64
	n    uint8
	code [link.MaxCodeLen]byte
}

// Recorder is a fixed ring of small structs: Record copies the code in and
// never allocates or blocks on I/O. Safe for concurrent use.
type Recorder struct {
	cfg   Config
	pub   Publisher
	boot  string
	mu    sync.Mutex
	ring  []rec
	head  int // next to publish
	n     int // queued
	kick  chan struct{}
	batch uint64

	// Recorded, Published and Dropped count clicks.
	Recorded, Published, Dropped atomic.Uint64
}

// New returns a recorder publishing with pub.
func New(pub Publisher, cfg Config) *Recorder {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 16
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1024
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Recorder{cfg: cfg, pub: pub, boot: hex.EncodeToString(b[:]), ring: make([]rec, cfg.Buffer), kick: make(chan struct{}, 1)}
}

// Record queues a click on code at atMillis, or counts it dropped when the
// buffer is full.
func (r *Recorder) Record(code []byte, atMillis int64) {
	if len(code) > link.MaxCodeLen {
		return
	}
	r.mu.Lock()
	if r.n == len(r.ring) {
		r.mu.Unlock()
		r.Dropped.Add(1)
		return
	}
	p := &r.ring[(r.head+r.n)%len(r.ring)]
	p.at, p.n = atMillis, uint8(copy(p.code[:], code))
	r.n++
	full := r.n >= r.cfg.Batch
	r.mu.Unlock()
	r.Recorded.Add(1)
	if full {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// Run publishes batches until ctx is done, then flushes what is queued
// (bounded by PublishTimeout per batch).
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.FlushEvery)
	defer t.Stop()
	buf := make([]byte, 0, 64<<10)
	ensured := false
	for {
		select {
		case <-ctx.Done():
			for r.flush(context.WithoutCancel(ctx), &buf, &ensured) {
			}
			return nil
		case <-t.C:
		case <-r.kick:
		}
		for r.flush(ctx, &buf, &ensured) {
		}
	}
}

// flush publishes one batch, reporting whether it published a full one
// (more may be queued).
func (r *Recorder) flush(ctx context.Context, buf *[]byte, ensured *bool) bool {
	r.mu.Lock()
	n := min(r.n, r.cfg.Batch)
	if n == 0 {
		r.mu.Unlock()
		return false
	}
	b := clicks.AppendHeader((*buf)[:0], n)
	for i := range n {
		p := &r.ring[(r.head+i)%len(r.ring)]
		b = clicks.AppendClick(b, p.code[:p.n], p.at)
	}
	r.head = (r.head + n) % len(r.ring)
	r.n -= n
	r.mu.Unlock()
	*buf = b

	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	if !*ensured {
		if _, err := r.pub.CreateOrUpdateStream(pctx, StreamConfig()); err != nil {
			r.Dropped.Add(uint64(n))
			r.cfg.Log.Warn("clicks stream unavailable; batch dropped", "clicks", n, "err", err)
			return false
		}
		*ensured = true
	}
	r.batch++
	// The message id makes a retried batch count once; the boot id keeps
	// a restarted edge from colliding with its earlier life.
	id := r.cfg.Edge + "-" + r.boot + "-" + strconv.FormatUint(r.batch, 10)
	if _, err := r.pub.Publish(pctx, clicks.Subject(r.cfg.Edge), b, jetstream.WithMsgID(id)); err != nil {
		// At-most-once: a publish that timed out may still be stored, so
		// the drop count can overstate the loss, never understate it.
		r.Dropped.Add(uint64(n))
		r.cfg.Log.Warn("click batch not published; dropped", "clicks", n, "err", err)
		return false
	}
	r.Published.Add(uint64(n))
	return n == r.cfg.Batch
}

// StreamConfig is the CLICKS stream as edges create it when missing. The
// rollup consumer (a later issue) reads it; a week's retention lets it
// recover from a long outage.
func StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       clicks.Stream,
		Subjects:   []string{clicks.Subjects},
		Storage:    jetstream.FileStorage,
		MaxAge:     7 * 24 * time.Hour,
		Duplicates: 2 * time.Minute,
		Discard:    jetstream.DiscardOld,
	}
}
