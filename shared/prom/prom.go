// Package prom is what control and edge agree on about their Prometheus
// metrics: each server's own registry, the text format the edge serves from
// fasthttp, and the rule that labels carry only low-cardinality values: never
// a code, a URL, an idempotency key or an API key (tests check every scrape
// against LabelNames with internal/scrape).
package prom

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// LabelNames are the only label names either binary exports. Each has a
// small, fixed set of values (le and quantile belong to histograms and
// summaries; version to the Go runtime's go_info).
var LabelNames = []string{"namespace", "layer", "class", "status", "op", "cause", "outcome", "state", "source", "part", "le", "quantile", "version"}

// NewRegistry returns a registry holding the Go runtime and process
// collectors. Each server builds its own, so several can run in one process
// (tests do).
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// WriteText writes what g gathers in the Prometheus text format (0.0.4).
func WriteText(w io.Writer, g prometheus.Gatherer) error {
	mfs, err := g.Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if e := enc.Encode(mf); e != nil {
			return e
		}
	}
	return err
}

// TextContentType is the content type of WriteText's output.
const TextContentType = "text/plain; version=0.0.4; charset=utf-8"
