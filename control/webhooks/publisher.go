package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/retry"
)

// OutboxStore is what the Publisher needs of the authority.
type OutboxStore interface {
	// ClaimOutbox locks up to limit of the oldest outbox events no other
	// publisher holds, calls publish with them, and deletes them if it
	// returns nil, in one transaction: an event leaves the outbox only
	// once JetStream has it. It returns how many it published.
	ClaimOutbox(ctx context.Context, limit int, publish func([]OutboxEvent) error) (int, error)
	// OutboxBacklog is how many events wait and when the oldest happened.
	OutboxBacklog(ctx context.Context) (int64, time.Time, error)
}

// PublisherConfig tunes a Publisher; zero values take the defaults.
type PublisherConfig struct {
	Batch int           // events per transaction (default 256)
	Poll  time.Duration // how often an empty outbox is read again (default 500ms)
	Log   *slog.Logger
}

// Publisher moves events from webhook_outbox to the WEBHOOKS stream, each
// with its event id as the message id: after a crash between the publish
// and the delete the event is published again and JetStream stores it
// once (within the stream's duplicate window; past it the delivery log
// keeps it from being delivered twice). Any number of control instances
// may run one: each takes the events the others have not locked.
type Publisher struct {
	store  OutboxStore
	js     jetstream.JetStream
	render Renderer
	cfg    PublisherConfig

	published, failed atomic.Uint64
}

// NewPublisher returns a Publisher; the stream must exist (Dispatcher.Run
// and EnsureStream make it).
func NewPublisher(store OutboxStore, js jetstream.JetStream, render Renderer, cfg PublisherConfig) *Publisher {
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{store: store, js: js, render: render, cfg: cfg}
}

// Published counts events this publisher put on the stream.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// Run publishes until ctx ends, retrying with backoff through database and
// NATS failures.
func (p *Publisher) Run(ctx context.Context) {
	b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
	retry.Run(ctx, p.session, func(err error) time.Duration {
		d := b.Next()
		p.cfg.Log.Warn("webhook publisher interrupted", "err", err, "retry_in", d)
		return d
	})
}

func (p *Publisher) session(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for {
			n, err := p.store.ClaimOutbox(ctx, p.cfg.Batch, func(evs []OutboxEvent) error { return p.publish(ctx, evs) })
			if err != nil {
				p.failed.Add(1)
				return fmt.Errorf("publish webhook events: %w", err)
			}
			if n < p.cfg.Batch {
				break
			}
		}
		t.Reset(p.cfg.Poll)
	}
}

// publish puts evs on the stream and waits for every ack.
func (p *Publisher) publish(ctx context.Context, evs []OutboxEvent) error {
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	for i := range evs {
		e := &evs[i]
		body, err := p.render.Body(e)
		if err != nil {
			// A row that cannot be rendered never will be: publishing
			// past it beats holding every later event behind it.
			p.failed.Add(1)
			p.cfg.Log.Error("webhook event dropped: it does not render", "event", e.ID, "err", err)
			continue
		}
		msg := &nats.Msg{Subject: EventSubject(e.TenantID, e.Type), Data: body, Header: nats.Header{}}
		msg.Header.Set(HeaderType, string(e.Type))
		msg.Header.Set(HeaderTenant, fmt.Sprint(e.TenantID))
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(e.ID))
		if err != nil {
			return fmt.Errorf("event %s: %w", e.ID, err)
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("event %s: %w", evs[i].ID, err)
		case <-timeout.C:
			return errors.New("no ack within 10s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.published.Add(uint64(len(evs)))
	return nil
}

// EnsureStream creates or updates the WEBHOOKS stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("ensure %s stream: %w", Stream, err)
	}
	return nil
}
