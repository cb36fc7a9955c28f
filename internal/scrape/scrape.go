// Package scrape reads a server's /metrics back for tests and benchmarks:
// parse the text format, list the exported names, read a value, and check
// every label against prom.LabelNames.
package scrape

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgelink/edgelink/shared/prom"
)

// Parse reads a scrape in the text format into its families by name.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// Scrape GETs url and parses the answer.
func Scrape(url string) (map[string]*dto.MetricFamily, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Names lists the sample names a scrape exports: a family's name, and for
// histograms and summaries also its _bucket, _sum and _count series.
func Names(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range fams {
		out = append(out, name)
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out = append(out, name+"_bucket", name+"_sum", name+"_count")
		case dto.MetricType_SUMMARY:
			out = append(out, name+"_sum", name+"_count")
		}
	}
	sort.Strings(out)
	return out
}

// CheckLabels reports every label of fams whose name is not in prom.LabelNames or
// whose value contains one of forbidden (case-sensitively, the way codes
// compare).
func CheckLabels(fams map[string]*dto.MetricFamily, forbidden []string) []error {
	var errs []error
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(prom.LabelNames, lp.GetName()) {
					errs = append(errs, fmt.Errorf("%s has label %q, not one of %v", name, lp.GetName(), prom.LabelNames))
				}
				for _, f := range forbidden {
					if f != "" && strings.Contains(lp.GetValue(), f) {
						errs = append(errs, fmt.Errorf("%s{%s=%q} carries %q", name, lp.GetName(), lp.GetValue(), f))
					}
				}
			}
		}
	}
	return errs
}

// Value is the value of name's series whose labels include every pair of
// labels (name=value, ...), summed over the matching series; ok is false
// when none matches. Counters, gauges and untyped samples only.
func Value(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	mf := fams[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, ok
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
