package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgelink/edgelink/bench/report"
)

// bulkTrace follows the data set's bulk load on both sides: how many links
// the batch API had answered for, batch by batch, and which version the
// edge had applied, sampled from its metrics. Together they say whether the
// change stream keeps up with ingestion, which a marketing campaign's bulk
// create needs: its links redirect from every edge's memory soon after the
// last batch is answered, not minutes later.
type bulkTrace struct {
	start time.Time

	mu         sync.Mutex
	created    []bulkPoint // links answered, after each batch
	applied    []bulkPoint // the edge's applied version, sampled
	sampleErrs int

	// Filled once the load is over.
	versions   []uint64 // every link's version, sorted
	lastBatch  time.Duration
	allApplied time.Duration // when the edge had applied the last link
}

type bulkPoint struct {
	at time.Duration
	n  uint64
}

// bulkSampleEvery is how often the edge's position is read during the load:
// fine enough to time a 10 s target, light enough (one /-/metrics page) not
// to slow the edge it measures.
const bulkSampleEvery = 50 * time.Millisecond

func newBulkTrace() *bulkTrace { return &bulkTrace{start: time.Now()} }

// batchDone records a batch's answer: total links answered so far.
func (b *bulkTrace) batchDone(total uint64) {
	b.mu.Lock()
	b.created = append(b.created, bulkPoint{time.Since(b.start), total})
	b.mu.Unlock()
}

// sample reads the edge's applied version until ctx ends.
func (b *bulkTrace) sample(ctx context.Context, edgeURL string) {
	t := time.NewTicker(bulkSampleEvery)
	defer t.Stop()
	for {
		m, err := edgeMetrics(ctx, edgeURL)
		b.mu.Lock()
		if err != nil {
			b.sampleErrs++
		} else {
			b.applied = append(b.applied, bulkPoint{time.Since(b.start), uint64(m["edge_changefeed_applied_version"])})
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// appliedLinks is how many of the load's links have a version at or below
// v: the links an edge that applied v holds.
func (b *bulkTrace) appliedLinks(v uint64) uint64 {
	n, _ := slices.BinarySearch(b.versions, v+1)
	return uint64(n)
}

// finish takes the links' versions and settles the trace's figures.
func (b *bulkTrace) finish(versions []uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.versions = versions
	if len(b.created) > 0 {
		b.lastBatch = b.created[len(b.created)-1].at
	}
	maxV := versions[len(versions)-1]
	for _, p := range b.applied {
		if p.n >= maxV {
			b.allApplied = p.at
			break
		}
	}
}

// peakRate is the highest rate of pts (in links) over any window of w.
func peakRate(pts []bulkPoint, w time.Duration, count func(bulkPoint) uint64) float64 {
	best, j := 0.0, 0
	for i := range pts {
		for pts[i].at-pts[j].at > w {
			j++
		}
		if d := pts[i].at - pts[j].at; d >= w/2 {
			if r := float64(count(pts[i])-count(pts[j])) / d.Seconds(); r > best {
				best = r
			}
		}
	}
	return best
}

// bulkSection reports the load: ingestion against propagation, and a chart
// of both over time.
func (e *env) bulkSection(dir, stem string) error {
	b := e.res.bulk
	if b == nil || len(b.versions) == 0 || b.allApplied == 0 {
		return nil
	}
	n := len(b.versions)
	ingest := float64(n) / b.lastBatch.Seconds()
	endToEnd := float64(n) / b.allApplied.Seconds()
	lag := b.allApplied - b.lastBatch
	var s strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&s, format, args...) }
	p("The data set's load is itself the bulk-create benchmark: %d links through `POST /api/v1/links/batch` (1,000 per request, 4 clients), ", n)
	p("with the edge (started before the load) applying the change stream as it comes; the edge's applied version was read every %s from its metrics and turned into links applied through the links' versions. ", bulkSampleEvery)
	p("The baseline is the API's own ingest rate in the same run.\n\n")
	t := report.Table{Header: []string{"", ""}, Align: "lr"}
	t.Add("links", fmt.Sprint(n))
	t.Add("last batch answered", fmt.Sprintf("%.1f s", b.lastBatch.Seconds()))
	t.Add("API ingest rate", fmt.Sprintf("%.0f links/s", ingest))
	t.Add("peak ingest over 5 s", fmt.Sprintf("%.0f links/s", peakRate(b.created, 5*time.Second, func(p bulkPoint) uint64 { return p.n })))
	t.Add("edge had applied every link", fmt.Sprintf("%.1f s", b.allApplied.Seconds()))
	t.Add("**after the last batch's answer**", fmt.Sprintf("**%.1f s** (target < 10 s)", lag.Seconds()))
	t.Add("relay → stream → edge, whole load", fmt.Sprintf("%.0f changes/s (%.2f× ingest)", endToEnd, endToEnd/ingest))
	t.Add("peak apply over 5 s", fmt.Sprintf("%.0f changes/s", peakRate(b.applied, 5*time.Second, func(p bulkPoint) uint64 { return b.appliedLinks(p.n) })))
	if b.sampleErrs > 0 {
		t.Add("failed samples", fmt.Sprint(b.sampleErrs))
	}
	p("%s\n![bulk load](%s-bulk.png)\n", t.Markdown(), stem)
	e.res.sections = append(e.res.sections, section{title: "Bulk create: ingestion and propagation", body: s.String()})

	// Both curves on one grid, for the chart.
	step := 500 * time.Millisecond
	var xs, created, applied []float64
	ci, ai := 0, 0
	var c, a uint64
	for at := time.Duration(0); at <= b.allApplied+step; at += step {
		for ci < len(b.created) && b.created[ci].at <= at {
			c = b.created[ci].n
			ci++
		}
		for ai < len(b.applied) && b.applied[ai].at <= at {
			a = b.appliedLinks(b.applied[ai].n)
			ai++
		}
		xs = append(xs, at.Seconds())
		created = append(created, float64(c)/1000)
		applied = append(applied, float64(a)/1000)
	}
	return report.LineChart(filepath.Join(dir, stem+"-bulk.png"), fmt.Sprintf("Bulk create of %d links: answered by the API, applied by the edge", n),
		"seconds from the first batch", "thousands of links", xs,
		[]report.Series{{Name: "answered by the batch API", Values: created}, {Name: "applied on the edge", Values: applied}}, false)
}

// linkVersions reads every link's version, sorted.
func (s *benchStack) linkVersions(ctx context.Context) ([]uint64, error) {
	rows, err := s.pool.Query(ctx, `SELECT version FROM links ORDER BY version`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, uint64(v))
	}
	return out, rows.Err()
}
