package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// DeliveryStore is what the Dispatcher needs of the authority.
type DeliveryStore interface {
	// EnabledEndpoints are every tenant's enabled endpoints.
	EnabledEndpoints(ctx context.Context) ([]*Endpoint, error)
	// DeliveryTarget reads endpoint id for an attempt of eventID: the
	// endpoint (nil when it is gone) and whether the delivery log holds a
	// succeeded delivery of the event to it.
	DeliveryTarget(ctx context.Context, id, eventID string) (*Endpoint, bool, error)
	// RecordAttempt logs d, and moves its endpoint's run of failures: a
	// success ends it, a failure extends it (policy.Fail) and disables the
	// endpoint when the policy says so, in the same transaction. A second
	// success of the same event (the unique index decides) writes nothing
	// and reports duplicate.
	RecordAttempt(ctx context.Context, d *Delivery, policy DisablePolicy) (disabled, duplicate bool, err error)
	// PurgeDeliveries deletes up to limit log rows attempted before before
	// and returns how many.
	PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}

// DispatcherConfig tunes a Dispatcher; zero values take the defaults.
type DispatcherConfig struct {
	Schedule Schedule      // default DefaultSchedule
	Disable  DisablePolicy // default DefaultDisablePolicy
	// PerEndpoint bounds the attempts in flight to one endpoint from this
	// instance (default 4), MaxInFlight those to all (default 128).
	PerEndpoint, MaxInFlight int
	// MaxPending bounds an endpoint's events out at once: in flight or
	// waiting for a retry (default 1,000). Past it that endpoint's newer
	// events wait on the stream; other endpoints are not affected.
	MaxPending int
	// AckWait is how long an attempt may take before JetStream hands the
	// event out again (default 60s; keep it well above the sender's
	// timeout).
	AckWait time.Duration
	// Reconcile is how often the consumers are matched to the endpoints
	// (default 5s; a change made through this instance is seen at once).
	Reconcile time.Duration
	// Retention is how long the delivery log keeps an attempt (default 7
	// days). Keep it above the stream's MaxAge: a succeeded row is what
	// stops a redelivered event from being sent again.
	Retention time.Duration
	// Stream is the WEBHOOKS stream's configuration, applied at start.
	Stream jetstream.StreamConfig
	Now    func() time.Time
	Rand   func() float64 // [0, 1), for jitter
	Log    *slog.Logger
}

// Dispatcher delivers events to endpoints: one durable JetStream consumer
// per enabled endpoint (and generation), filtered to the endpoint's
// tenant and event types, pulled by every control instance. Build it with
// NewDispatcher and run it with Run.
type Dispatcher struct {
	store  DeliveryStore
	js     jetstream.JetStream
	sender *Sender
	cfg    DispatcherConfig
	poke   chan struct{}
	global chan struct{} // MaxInFlight slots

	mu      sync.Mutex
	workers map[string]*worker // by consumer name

	outcomes map[string]*atomic.Uint64
	latency  prometheus.Histogram
	queued   atomic.Int64 // messages waiting across the consumers, as last seen
	inFlight atomic.Int64 // their messages handed out and not yet acknowledged
	enabled  atomic.Int64
}

// Delivery outcomes, the values of the metrics' outcome label.
const (
	OutcomeSucceeded = "succeeded"  // the endpoint answered 2xx
	OutcomeRetrying  = "retrying"   // it did not; a retry is scheduled
	OutcomeGaveUp    = "gave_up"    // it did not, on the last attempt
	OutcomeDuplicate = "duplicate"  // the log says it succeeded already: not sent
	OutcomeSkipped   = "skipped"    // the endpoint is gone, disabled or unsubscribed: not sent
	OutcomeUnlogged  = "log_failed" // sent, but the log could not be written: retried
)

var outcomeNames = []string{OutcomeSucceeded, OutcomeRetrying, OutcomeGaveUp, OutcomeDuplicate, OutcomeSkipped, OutcomeUnlogged}

// NewDispatcher returns a Dispatcher sending with sender.
func NewDispatcher(store DeliveryStore, js jetstream.JetStream, sender *Sender, cfg DispatcherConfig) *Dispatcher {
	if len(cfg.Schedule.Delays) == 0 {
		cfg.Schedule = DefaultSchedule
	}
	cfg.Disable = cfg.Disable.orDefault()
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 4
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 128
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1000
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = time.Minute
	}
	if cfg.Reconcile <= 0 {
		cfg.Reconcile = 5 * time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Stream.Name == "" {
		cfg.Stream = StreamConfig(4*24*time.Hour, 1<<30, 10*time.Minute, 1)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{store: store, js: js, sender: sender, cfg: cfg, poke: make(chan struct{}, 1),
		global: make(chan struct{}, cfg.MaxInFlight), workers: map[string]*worker{}, outcomes: map[string]*atomic.Uint64{},
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "control_webhook_attempt_duration_seconds",
			Help:    "Webhook delivery attempts, from the request to the answer's end (or the failure).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		})}
	for _, o := range outcomeNames {
		d.outcomes[o] = new(atomic.Uint64)
	}
	return d
}

// Changed tells the dispatcher that endpoints changed, so it reconciles
// now rather than at its next round. It never blocks.
func (d *Dispatcher) Changed() {
	select {
	case d.poke <- struct{}{}:
	default:
	}
}

// Run keeps a worker on each enabled endpoint's consumer, deletes the
// consumers of endpoints that are gone or disabled, and purges the
// delivery log, until ctx ends; then it stops the workers, each after its
// attempts in flight.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.stopAll()
	var lastPurge time.Time
	for {
		if err := d.reconcile(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("webhook dispatcher reconcile", "err", err)
		}
		if now := d.cfg.Now(); now.Sub(lastPurge) > time.Hour {
			lastPurge = now
			d.purge(ctx)
		}
		t := time.NewTimer(d.cfg.Reconcile)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-d.poke:
		case <-t.C:
		}
		t.Stop()
	}
}

// consumerName is the durable consumer of an endpoint's generation.
func consumerName(e *Endpoint) string { return "wh_" + e.ID + "_" + strconv.Itoa(e.Generation) }

func filters(e *Endpoint) []string {
	f := []string{TestSubject(e.ID)}
	for _, t := range e.EventTypes {
		f = append(f, EventSubject(e.TenantID, EventType(t)))
	}
	slices.Sort(f)
	return f
}

func (d *Dispatcher) reconcile(ctx context.Context) error {
	if err := EnsureStream(ctx, d.js, d.cfg.Stream); err != nil {
		return err
	}
	stream, err := d.js.Stream(ctx, Stream)
	if err != nil {
		return fmt.Errorf("webhook stream: %w", err)
	}
	// Consumers first, endpoints second: a consumer listed here belongs
	// to an endpoint committed before, which the read below sees.
	var existing []string
	names := stream.ConsumerNames(ctx)
	for n := range names.Name() {
		existing = append(existing, n)
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list webhook consumers: %w", err)
	}
	eps, err := d.store.EnabledEndpoints(ctx)
	if err != nil {
		return fmt.Errorf("webhook endpoints: %w", err)
	}
	d.enabled.Store(int64(len(eps)))
	want := make(map[string]*Endpoint, len(eps))
	for _, e := range eps {
		want[consumerName(e)] = e
	}
	d.mu.Lock()
	for name, w := range d.workers {
		if e, ok := want[name]; !ok {
			w.stop()
			delete(d.workers, name)
		} else if !slices.Equal(w.filter, filters(e)) {
			w.stop() // started again below with the new filter
			delete(d.workers, name)
		}
	}
	for name, e := range want {
		if d.workers[name] == nil && ctx.Err() == nil {
			d.workers[name] = d.start(ctx, name, e)
		}
	}
	var queued, inFlight int64
	ws := make([]*worker, 0, len(d.workers))
	for _, w := range d.workers {
		ws = append(ws, w)
	}
	d.mu.Unlock()
	for _, name := range existing {
		if strings.HasPrefix(name, "wh_") && want[name] == nil {
			if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				d.cfg.Log.Warn("delete webhook consumer", "consumer", name, "err", err)
			}
		}
	}
	for _, w := range ws {
		if c := w.consumer.Load(); c != nil {
			if info, err := (*c).Info(ctx); err == nil {
				queued += int64(info.NumPending)
				inFlight += int64(info.NumAckPending)
			}
		}
	}
	d.queued.Store(queued)
	d.inFlight.Store(inFlight)
	return nil
}

func (d *Dispatcher) purge(ctx context.Context) {
	before := d.cfg.Now().Add(-d.cfg.Retention)
	for ctx.Err() == nil {
		n, err := d.store.PurgeDeliveries(ctx, before, 10_000)
		if err != nil {
			d.cfg.Log.Warn("purge webhook delivery log", "err", err)
			return
		}
		if n < 10_000 {
			return
		}
	}
}

func (d *Dispatcher) stopAll() {
	d.mu.Lock()
	ws := d.workers
	d.workers = map[string]*worker{}
	d.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
}

// count adds one to an outcome's counter.
func (d *Dispatcher) count(outcome string) { d.outcomes[outcome].Add(1) }

// DispatchStats are the dispatcher's counters.
type DispatchStats struct {
	Outcomes map[string]uint64 // by outcome (the Outcome* names)
	// Queued are events on the stream no attempt has taken yet, InFlight
	// those handed out and not acknowledged (in flight or waiting for a
	// retry), over the enabled endpoints' consumers as last reconciled.
	Queued, InFlight int64
	Enabled          int64 // enabled endpoints
}

// Stats returns the counters; safe to call concurrently with Run.
func (d *Dispatcher) Stats() DispatchStats {
	s := DispatchStats{Outcomes: map[string]uint64{}, Queued: d.queued.Load(), InFlight: d.inFlight.Load(), Enabled: d.enabled.Load()}
	for o, c := range d.outcomes {
		s.Outcomes[o] = c.Load()
	}
	return s
}
