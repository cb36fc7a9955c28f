package grafana

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(http_requests_total[5m])`, []string{"http_requests_total"}},
		{`sum by (le, op) (rate(control_http_request_duration_seconds_bucket{op=~"POST /api/v1/links(/batch)?"}[$__rate_interval]))`,
			[]string{"control_http_request_duration_seconds_bucket"}},
		{`histogram_quantile(0.99, sum without (instance) (rate(a_bucket[1h30m])))`, []string{"a_bucket"}},
		{`sum(rate(x_total{outcome="redirect"}[5m])) / sum(rate(x_total[5m]))`, []string{"x_total"}},
		{`a + on (job) group_left (version) b * 1e3 - 0.5`, []string{"a", "b"}},
		{`max(a) - min by (instance) (b) > bool 2`, []string{"a", "b"}},
		{`time() - last_seen_seconds offset 5m`, []string{"last_seen_seconds"}},
		{`clamp_max(runway, 86400) and on() vector(1) unless absent(c)`, []string{"runway", "c"}},
		{`topk(3, sum by (layer) (hits)) or count_values("v", ver)`, []string{"hits", "ver"}},
		{`foo{label="bar{baz}", other='x"y'} @ start()`, []string{"foo"}},
		{`rate(m[5m:1m]) # a comment naming not_a_metric`, []string{"m"}},
		{`sum (rate (spaced_total [5m]))`, []string{"spaced_total"}},
		{`x:recorded:rate5m / ${divisor} * $scale`, []string{"x:recorded:rate5m"}},
		{`-inf < nan`, nil},
	}
	for _, tt := range tests {
		got, err := MetricNames(tt.expr)
		if err != nil {
			t.Errorf("MetricNames(%q): %v", tt.expr, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("MetricNames(%q) = %q; want %q", tt.expr, got, tt.want)
		}
	}
}

func TestMetricNamesRejectsBrokenExpressions(t *testing.T) {
	for _, expr := range []string{`rate(x[5m)`, `x{a="b}`, `sum(x{a="b"]`, `x{a=~"(}`} {
		if got, err := MetricNames(expr); err == nil {
			t.Errorf("MetricNames(%q) = %q, nil; want an error", expr, got)
		}
	}
}

// TestDashboardQueriesParse: every panel has queries and each names at
// least one metric (a typo'd function name would hide it).
func TestDashboardQueriesParse(t *testing.T) {
	qs, err := Queries(Dashboard())
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 20 {
		t.Fatalf("dashboard has %d queries; want the full set", len(qs))
	}
	for _, q := range qs {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
		} else if len(names) == 0 {
			t.Errorf("panel %q: query %q names no metric", q.Panel, q.Expr)
		}
	}
}
