package main

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/shared/base62"
)

// request is one drawn request: a link's index, or -1 for an unknown code.
type request struct {
	index int32
	code  string
}

// sample draws n requests: Zipf(s) over the links, with a share of random
// codes that are no link (the suite's mix: 10%).
func sample(p *population, s, unknown float64, n int, seed uint64) []request {
	r := rand.New(rand.NewPCG(seed, 0x5a3b1e))
	z := dataset.NewZipf(r, s, p.n)
	out := make([]request, n)
	for i := range out {
		if r.Float64() < unknown {
			for {
				c := dataset.RandomCode(r)
				if id, err := base62.Digits([]byte(c)); err == nil && id > uint64(p.n) {
					out[i] = request{index: -1, code: c}
					break
				}
			}
			continue
		}
		k := p.byRank[z.Rank()]
		out[i] = request{index: k, code: code(int(k))}
	}
	return out
}

// result is one pass of requests against one edge.
type result struct {
	latencies []time.Duration // from each request's due time (open loop)
	wrong     atomic.Int64    // answers unlike the authority's
	failed    atomic.Int64    // transport errors and 503s
	took      time.Duration
}

func (r *result) percentile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(q*float64(len(r.latencies))))]
}

// drive sends reqs to the edge at rate per second, open loop: request i is
// due at start + i/rate and its latency counts from then, however long it
// waited for a free worker, so a slow answer delays no later measurement.
// Every answer is checked against what the authority holds.
func drive(ctx context.Context, edgeURL string, p *population, reqs []request, rate, workers int) *result {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res := &result{latencies: make([]time.Duration, len(reqs))}
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				due := start.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					time.Sleep(d) // pacing the open loop, not waiting for a state
				}
				q := reqs[i]
				resp, err := client.Get(edgeURL + "/" + q.code)
				res.latencies[i] = time.Since(due)
				if err != nil {
					res.failed.Add(1)
					continue
				}
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusServiceUnavailable:
					res.failed.Add(1)
				case q.index < 0 && resp.StatusCode != http.StatusNotFound,
					q.index >= 0 && (resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != p.urls[q.index]):
					res.wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res.took = time.Since(start)
	slices.Sort(res.latencies)
	return res
}
