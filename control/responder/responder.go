// Package responder answers edges' lookups of codes they do not know, over
// NATS request-reply (see shared/authority for the protocol and why it is
// not a database connection per edge).
package responder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/shared/authority"
)

// Lookup reads the authority's state of one code: the primary, or a
// replica only through ReplicaFirst, which never answers NotFound from it.
type Lookup interface {
	LookupForEdge(ctx context.Context, code string) (authority.Reply, error)
}

// Config bounds the responder.
type Config struct {
	// Concurrency is the most lookups running against the database at once
	// (default 8), so a burst of edge misses cannot take the pool from the
	// API.
	Concurrency int
	// Timeout bounds one lookup (default 1s). Edges give up sooner; a
	// lookup nobody waits for any more is wasted, not harmful.
	Timeout time.Duration
	// Backlog is how many requests may wait for a worker (default
	// 64×Concurrency). Past it NATS drops requests for this subscriber
	// (a slow consumer) and the edge answers 503 after its timeout.
	Backlog int
	Log     *slog.Logger
}

// Responder serves lookups. Its counters are safe to read while Run runs.
type Responder struct {
	nc     *nats.Conn
	lookup Lookup
	cfg    Config

	Answered, NotFound, Failed, Invalid atomic.Uint64
}

// New returns a responder answering on nc from lookup.
func New(nc *nats.Conn, lookup Lookup, cfg Config) *Responder {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 64 * cfg.Concurrency
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Responder{nc: nc, lookup: lookup, cfg: cfg}
}

// Run subscribes in the queue group and answers until ctx is done, then
// drains: requests already received are answered. A subscription made while
// NATS is down is kept by the client and sent when it reconnects.
func (r *Responder) Run(ctx context.Context) error {
	ch := make(chan *nats.Msg, r.cfg.Backlog)
	sub, err := r.nc.ChanQueueSubscribe(authority.Subject, authority.QueueGroup, ch)
	if err != nil {
		return fmt.Errorf("authority: subscribe: %w", err)
	}
	_ = sub.SetPendingLimits(r.cfg.Backlog, -1)
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for msg := range ch {
				r.answer(ctx, msg)
			}
		}()
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	close(ch)
	wg.Wait()
	return nil
}

func (r *Responder) answer(ctx context.Context, msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	var rep authority.Reply
	if !authority.ValidRequest(msg.Data) {
		// Edges validate codes before asking; an invalid one cannot name a
		// link, and saying NotFound is the truth.
		r.Invalid.Add(1)
		rep = authority.Reply{Kind: authority.NotFound}
	} else {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
		var err error
		rep, err = r.lookup.LookupForEdge(lctx, string(msg.Data))
		cancel()
		if err != nil {
			r.Failed.Add(1)
			r.cfg.Log.Warn("authority lookup failed", "err", err)
			rep = authority.Reply{Kind: authority.Unavailable}
		}
	}
	b, err := authority.Marshal(make([]byte, 0, 64+len(rep.URL)), &rep)
	if err != nil {
		r.Failed.Add(1)
		r.cfg.Log.Error("authority reply does not encode", "err", err)
		b, _ = authority.Marshal(nil, &authority.Reply{Kind: authority.Unavailable})
	}
	switch rep.Kind {
	case authority.Found:
		r.Answered.Add(1)
	case authority.NotFound:
		r.NotFound.Add(1)
	}
	_ = msg.Respond(b)
}
