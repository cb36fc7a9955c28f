package controlserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/control/webhooks/pgstore"
)

// WebhookConfig is how control sends webhooks (docs/webhooks.md); zero
// values take the defaults.
type WebhookConfig struct {
	// AllowHTTP accepts http:// endpoint URLs; AllowPrivate endpoints on
	// loopback, private and link-local addresses (both for development:
	// by default webhooks go to https on public addresses only).
	AllowHTTP, AllowPrivate bool
	// MaxEndpoints a tenant may have (default 10).
	MaxEndpoints int
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// StreamMaxAge is how long the WEBHOOKS stream keeps an event (default
	// 4 days: beyond the retry schedule's 3.2 at most); StreamMaxBytes
	// bounds it (default 1 GiB, oldest dropped first).
	StreamMaxAge   time.Duration
	StreamMaxBytes int64
	// LogRetention is how long delivery attempts are kept (default 7
	// days; never below StreamMaxAge).
	LogRetention time.Duration
	// Deliver: false leaves delivery to other control instances (this one
	// still serves the API and publishes events).
	NoDelivery bool
}

// webhookParts are control's webhook components: the service the API
// drives, and Run, which runs the publisher, the click aggregator and the
// dispatcher until ctx ends.
type webhookParts struct {
	Service *webhooks.Service
	Run     func(ctx context.Context) error
}

// newWebhooks builds the webhook components on store and registers their
// metrics.
func newWebhooks(store *pgstore.Store, js jetstream.JetStream, publicURL string, cfg WebhookConfig, replicas int,
	reg prometheus.Registerer, log *slog.Logger) (*webhookParts, error) {
	if cfg.StreamMaxAge <= 0 {
		cfg.StreamMaxAge = 4 * 24 * time.Hour
	}
	if cfg.StreamMaxBytes <= 0 {
		cfg.StreamMaxBytes = 1 << 30
	}
	if cfg.LogRetention <= 0 {
		cfg.LogRetention = 7 * 24 * time.Hour
	}
	if cfg.LogRetention < cfg.StreamMaxAge {
		return nil, fmt.Errorf("webhooks: the delivery log's retention %v is below the stream's %v: an event redelivered then could be sent twice", cfg.LogRetention, cfg.StreamMaxAge)
	}
	if h := webhooks.DefaultSchedule.Horizon(); cfg.StreamMaxAge < h {
		return nil, fmt.Errorf("webhooks: the stream keeps events %v, less than the retry schedule's %v", cfg.StreamMaxAge, h)
	}
	short, _ := links.NewShortURLs(publicURL) // as the API: a bad one gives paths
	policy := webhooks.TargetPolicy{AllowHTTP: cfg.AllowHTTP, AllowPrivate: cfg.AllowPrivate}
	stream := webhooks.StreamConfig(cfg.StreamMaxAge, cfg.StreamMaxBytes, 10*time.Minute, replicas)
	pub := webhooks.NewPublisher(store, js, webhooks.Renderer{Short: short}, webhooks.PublisherConfig{Log: log})
	agg := webhooks.NewClickAggregator(store, webhooks.ClickAggregatorConfig{Log: log})
	m := &webhooks.Metrics{Publisher: pub, Clicks: agg, Outbox: store}
	var disp *webhooks.Dispatcher
	changed := func() {}
	if !cfg.NoDelivery {
		disp = webhooks.NewDispatcher(store, js, webhooks.NewSender(webhooks.SenderConfig{Policy: policy, Timeout: cfg.Timeout}),
			webhooks.DispatcherConfig{Stream: stream, Retention: cfg.LogRetention, Log: log})
		m.Dispatcher = disp
		changed = disp.Changed
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, fmt.Errorf("webhook metrics: %w", err)
		}
	}
	run := func(ctx context.Context) error {
		var g errgroup.Group
		if disp != nil {
			g.Go(func() error { disp.Run(ctx); return nil })
		}
		g.Go(func() error {
			// The stream first: publishing needs it.
			for ctx.Err() == nil {
				err := webhooks.EnsureStream(ctx, js, stream)
				if err == nil {
					break
				}
				log.Warn("webhooks: ensure stream", "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			pub.Run(ctx)
			return nil
		})
		g.Go(func() error { agg.Run(ctx); return nil })
		return g.Wait()
	}
	svc := webhooks.NewService(store, js, webhooks.ServiceConfig{Policy: policy, MaxEndpoints: cfg.MaxEndpoints, Changed: changed})
	return &webhookParts{Service: svc, Run: run}, nil
}
