package webhooks_test

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/shared/prom"
)

// The metrics register, gather, and carry only the labels shared/prom
// allows (no endpoint, URL or tenant).
func TestMetricsLabels(t *testing.T) {
	d := webhooks.NewDispatcher(nil, nil, webhooks.NewSender(webhooks.SenderConfig{}), webhooks.DispatcherConfig{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(&webhooks.Metrics{Dispatcher: d, Publisher: webhooks.NewPublisher(nil, nil, webhooks.Renderer{}, webhooks.PublisherConfig{}),
		Clicks: webhooks.NewClickAggregator(nil, webhooks.ClickAggregatorConfig{})})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		seen[mf.GetName()] = true
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(prom.LabelNames, l.GetName()) {
					t.Errorf("%s has label %q, which shared/prom does not allow", mf.GetName(), l.GetName())
				}
			}
		}
	}
	for _, name := range []string{"control_webhook_deliveries_total", "control_webhook_queue_messages", "control_webhook_attempt_duration_seconds",
		"control_webhook_endpoints_enabled", "control_webhook_events_published_total", "control_webhook_click_events_total"} {
		if !seen[name] {
			t.Errorf("%s is not exported", name)
		}
	}
}
