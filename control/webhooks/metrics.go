package webhooks

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports webhook delivery as Prometheus metrics, read from the
// components at scrape time. Labels are outcome and state only: never an
// endpoint, a URL or a tenant.
type Metrics struct {
	Dispatcher *Dispatcher
	Publisher  *Publisher
	Clicks     *ClickAggregator
	Outbox     OutboxStore // backlog, read at scrape (bounded by a second)
	Now        func() time.Time
}

var (
	mDeliveries = prometheus.NewDesc("control_webhook_deliveries_total",
		"Webhook delivery attempts and decisions by outcome: succeeded, retrying (failed, retry scheduled), gave_up (failed, last attempt or endpoint disabled), duplicate (already delivered: not sent), skipped (endpoint gone, disabled or unsubscribed: not sent), log_failed (sent, not logged: retried).",
		[]string{"outcome"}, nil)
	mQueue = prometheus.NewDesc("control_webhook_queue_messages",
		"Events on the WEBHOOKS stream for enabled endpoints, by state: queued (not yet attempted) and in_flight (handed out: in flight or waiting for a retry), summed over the endpoints' consumers.",
		[]string{"state"}, nil)
	mEnabled   = prometheus.NewDesc("control_webhook_endpoints_enabled", "Enabled webhook endpoints (each has a consumer).", nil, nil)
	mPublished = prometheus.NewDesc("control_webhook_events_published_total", "Events this instance moved from webhook_outbox to the WEBHOOKS stream.", nil, nil)
	mClicks    = prometheus.NewDesc("control_webhook_click_events_total", "clicks.aggregated events this instance wrote.", nil, nil)
	mBacklog   = prometheus.NewDesc("control_webhook_outbox_events", "Events waiting in webhook_outbox to be published.", nil, nil)
	mLag       = prometheus.NewDesc("control_webhook_outbox_lag_seconds", "Age of the oldest event waiting in webhook_outbox (0 when none).", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mDeliveries, mQueue, mEnabled, mPublished, mClicks, mBacklog, mLag} {
		ch <- d
	}
	if m.Dispatcher != nil {
		m.Dispatcher.latency.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	if d := m.Dispatcher; d != nil {
		s := d.Stats()
		for _, o := range outcomeNames {
			counter(mDeliveries, s.Outcomes[o], o)
		}
		gauge(mQueue, float64(s.Queued), "queued")
		gauge(mQueue, float64(s.InFlight), "in_flight")
		gauge(mEnabled, float64(s.Enabled))
		d.latency.Collect(ch)
	}
	if m.Publisher != nil {
		counter(mPublished, m.Publisher.Published())
	}
	if m.Clicks != nil {
		counter(mClicks, m.Clicks.Events())
	}
	if m.Outbox != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if n, oldest, err := m.Outbox.OutboxBacklog(ctx); err == nil {
			gauge(mBacklog, float64(n))
			lag := 0.0
			if n > 0 {
				now := time.Now
				if m.Now != nil {
					now = m.Now
				}
				lag = max(now().Sub(oldest).Seconds(), 0)
			}
			gauge(mLag, lag)
		}
	}
}
