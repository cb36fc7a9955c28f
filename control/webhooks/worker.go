package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/retry"
)

// worker pulls one endpoint generation's consumer and makes its attempts,
// at most PerEndpoint at once.
type worker struct {
	d        *Dispatcher
	name     string
	ep       Endpoint // as it was when the worker started: ID, tenant, types, generation
	filter   []string
	consumer atomic.Pointer[jetstream.Consumer]
	cancel   context.CancelFunc
	done     chan struct{}
}

// start runs a worker for e's consumer name until stop.
func (d *Dispatcher) start(ctx context.Context, name string, e *Endpoint) *worker {
	wctx, cancel := context.WithCancel(ctx)
	w := &worker{d: d, name: name, ep: *e, filter: filters(e), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		b := retry.NewBackoff(100*time.Millisecond, 5*time.Second)
		retry.Run(wctx, w.session, func(err error) time.Duration {
			delay := b.Next()
			d.cfg.Log.Warn("webhook worker interrupted", "endpoint", e.ID, "err", err, "retry_in", delay)
			return delay
		})
	}()
	return w
}

// stop ends the worker after the attempts it has in flight.
func (w *worker) stop() {
	w.cancel()
	<-w.done
}

func (w *worker) session(ctx context.Context) error {
	d := w.d
	cons, err := d.js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:        w.name,
		Description:    "webhook deliveries to endpoint " + w.ep.ID,
		FilterSubjects: w.filter,
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &w.ep.ResumeFrom,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        d.cfg.AckWait,
		// The schedule's attempts, and a few for attempts a crash cut
		// short (each counts as a delivery).
		MaxDeliver:    d.cfg.Schedule.Attempts() + 3,
		MaxAckPending: d.cfg.MaxPending,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", w.name, err)
	}
	w.consumer.Store(&cons)
	per := d.cfg.PerEndpoint
	iter, err := cons.Messages(jetstream.PullMaxMessages(per))
	if err != nil {
		return fmt.Errorf("consume %s: %w", w.name, err)
	}
	defer iter.Stop()
	slots := make(chan struct{}, per)
	var attempts sync.WaitGroup
	defer attempts.Wait()
	for {
		msg, err := iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("next event for %s: %w", w.name, err)
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil // unacknowledged: handed out again after AckWait
		}
		select {
		case d.global <- struct{}{}:
		case <-ctx.Done():
			<-slots
			return nil
		}
		attempts.Go(func() {
			defer func() { <-d.global; <-slots }()
			// An attempt under way finishes even as the worker stops, so
			// its outcome is logged and acknowledged.
			w.deliver(context.WithoutCancel(ctx), msg)
		})
	}
}

// deliver makes one attempt of msg, logs it, then acknowledges it, or asks
// for it again after the schedule's delay, or terminates it.
func (w *worker) deliver(ctx context.Context, msg jetstream.Msg) {
	d := w.d
	meta, err := msg.Metadata()
	id := msg.Headers().Get(jetstream.MsgIDHeader)
	if err != nil || id == "" {
		d.cfg.Log.Error("webhook event without metadata or id; dropped", "endpoint", w.ep.ID, "subject", msg.Subject())
		_ = msg.Term()
		return
	}
	typ := EventType(msg.Headers().Get(HeaderType))
	attempt := int(meta.NumDelivered)
	ep, done, err := d.store.DeliveryTarget(ctx, w.ep.ID, id)
	switch {
	case err != nil:
		d.cfg.Log.Warn("webhook delivery: read endpoint", "endpoint", w.ep.ID, "err", err)
		_ = msg.NakWithDelay(5 * time.Second)
		return
	case ep == nil || !ep.Enabled || ep.Generation != w.ep.Generation || !ep.Subscribed(typ):
		d.count(OutcomeSkipped)
		_ = msg.Ack()
		d.Changed()
		return
	case done:
		d.count(OutcomeDuplicate)
		_ = msg.Ack()
		return
	}
	now := d.cfg.Now()
	res := d.sender.Post(ctx, ep.URL, id, now, msg.Data(), ep.SigningKeys(now))
	d.latency.Observe(res.Latency.Seconds())
	rec := &Delivery{EndpointID: ep.ID, EventID: id, EventType: string(typ), Attempt: attempt, Succeeded: res.OK(),
		StatusCode: res.StatusCode, Latency: res.Latency, Error: res.Err, ResponseBody: res.Body, AttemptedAt: now}
	var (
		delay time.Duration
		again bool
	)
	if !res.OK() {
		if delay, again = d.cfg.Schedule.Next(attempt, d.cfg.Rand); again {
			rec.NextAttemptAt = now.Add(delay)
		}
	}
	disabled, duplicate, err := w.record(ctx, rec)
	switch {
	case err != nil:
		// Not logged, so not acknowledged: a success is sent again (the
		// window the docs name), a failure retried as scheduled.
		d.count(OutcomeUnlogged)
		d.cfg.Log.Error("webhook delivery: log attempt", "endpoint", ep.ID, "err", err)
		_ = msg.NakWithDelay(max(delay, 5*time.Second))
	case res.OK() && duplicate:
		d.count(OutcomeDuplicate)
		_ = msg.Ack()
	case res.OK():
		d.count(OutcomeSucceeded)
		_ = msg.Ack()
	case disabled:
		d.count(OutcomeGaveUp)
		d.cfg.Log.Warn("webhook endpoint disabled after failing without a break", "endpoint", ep.ID,
			"failures", ep.ConsecutiveFailures+1)
		_ = msg.Term()
		d.Changed()
	case again:
		d.count(OutcomeRetrying)
		_ = msg.NakWithDelay(delay)
	default:
		d.count(OutcomeGaveUp)
		_ = msg.Term()
	}
}

// record logs an attempt, trying a few times: an attempt not logged is
// made again.
func (w *worker) record(ctx context.Context, rec *Delivery) (disabled, duplicate bool, err error) {
	for i := range 3 {
		if i > 0 {
			t := time.NewTimer(time.Duration(i) * 200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, false, errors.Join(ctx.Err(), err)
			case <-t.C:
			}
		}
		if disabled, duplicate, err = w.d.store.RecordAttempt(ctx, rec, w.d.cfg.Disable); err == nil {
			return disabled, duplicate, nil
		}
	}
	return false, false, err
}
