package main

import (
	"fmt"
	"time"
)

// pairs measures the edge against bare fasthttp, pinned, in back-to-back
// pairs whose order alternates (edge first, then bare first): the machine's
// speed drifts by tens of percent over seconds on a shared host, and a
// ratio of two runs taken right after each other, many times over, is the
// least disturbed figure of the edge's efficiency target.
func (e *env) pairs(mixLua string) error {
	var edge, bare *server
	for _, s := range e.servers {
		switch s.name {
		case "edgelink-edge":
			edge = s
		case base:
			bare = s
		}
	}
	if edge == nil || bare == nil || e.o.pairs <= 0 {
		return nil
	}
	if err := e.pin("pinned"); err != nil {
		return err
	}
	d := max(2*time.Second, e.o.duration*3/4)
	for i := 1; i <= e.o.pairs; i++ {
		order := []*server{edge, bare}
		if i%2 == 0 {
			order = []*server{bare, edge}
		}
		for _, s := range order {
			r, err := e.wrk(s, "pairs", "pinned", i, mixLua, d)
			if err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
		}
		a, b := e.res.runs[len(e.res.runs)-2], e.res.runs[len(e.res.runs)-1]
		if a.server != edge.name {
			a, b = b, a
		}
		fmt.Printf("   pair %2d  edge %9.0f req/CPU-s  bare %9.0f req/CPU-s  edge/bare %.2f\n", i, a.perCPU, b.perCPU, a.perCPU/b.perCPU)
	}
	return nil
}

func (e *env) redirect() error {
	mixLua := e.mixFile + ".lua"
	// Warm every server (page in its data, grow buffers) outside the
	// measurement.
	for _, s := range e.servers {
		if _, err := e.wrk(s, "warmup", "unpinned", 0, mixLua, time.Second); err != nil {
			return err
		}
	}
	for _, variant := range []string{"pinned", "unpinned"} {
		if err := e.pin(variant); err != nil {
			return err
		}
		for round := 1; round <= e.o.rounds; round++ {
			for _, s := range e.order(round) {
				r, err := e.wrk(s, "redirect", variant, round, mixLua, e.o.duration)
				if err != nil {
					return err
				}
				e.res.runs = append(e.res.runs, r)
				fmt.Printf("   %-8s round %d %-15s %9.0f req/s %9.0f req/CPU-s  other CPU %.2f cores\n", variant, round, s.name, r.rps, r.perCPU, r.otherCPU/r.wall)
			}
		}
	}
	if err := e.pairs(mixLua); err != nil {
		return err
	}
	// Latency without coordinated omission: the paced generator at one
	// fixed rate for every server, pinned; then the edge and the servers
	// that can take it at half the edge's own peak, the load its latency
	// target is set at.
	if err := e.pin("pinned"); err != nil {
		return err
	}
	rate := e.o.rate
	if rate == 0 {
		slowest := 0.0
		for _, s := range e.servers {
			m := median(e.res.pick("redirect", "pinned", s.name, func(r runRec) float64 { return r.rps }))
			if slowest == 0 || m < slowest {
				slowest = m
			}
		}
		rate = min(20000, max(500, int(slowest/2/100)*100))
	}
	e.res.rate = rate
	for round := 1; round <= e.o.rounds; round++ {
		for _, s := range e.order(round) {
			r, a, err := e.paced(s, "latency", "pinned", round, e.mixFile, rate, e.o.conns, e.o.latDuration)
			if err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
			fmt.Printf("   latency  round %d %-15s sent %6.0f/s p50 %8s p99 %8s p99.9 %8s wrong %d refused %d\n", round, s.name, a.Rate, a.P50, a.P99, a.P999, a.Wrong, r.refused)
		}
	}
	edgePeak := median(e.res.pick("redirect", "pinned", "edgelink-edge", func(r runRec) float64 { return r.rps }))
	// Capped like the shared rate: above about 20,000 requests/s the
	// generator's own core, shared with the edge's back end, runs out
	// first here, and its queue would be measured instead of the server's.
	half := min(20000, int(edgePeak/2/100)*100)
	e.res.halfRate, e.res.edgePeak = half, edgePeak
	if half > 0 {
		for round := 1; round <= e.o.rounds; round++ {
			for _, s := range e.order(round) {
				// Only servers whose own median peak is at least 1.5 times
				// the rate: an overloaded server's queue says nothing.
				if peak := median(e.res.pick("redirect", "pinned", s.name, func(r runRec) float64 { return r.rps })); peak < 1.5*float64(half) {
					continue
				}
				r, a, err := e.pacedCounted(s, "latency-half", round, e.mixFile, half, e.o.conns)
				if err != nil {
					return err
				}
				e.res.runs = append(e.res.runs, r)
				fmt.Printf("   latency at the edge's half peak round %d %-15s sent %6.0f/s p50 %8s p99 %8s p99.9 %8s\n", round, s.name, a.Rate, a.P50, a.P99, a.P999)
			}
		}
	}
	return e.pin("")
}

// scan is 90% random codes. From one address, closed loop with wrk: what a
// scanner gets through, the edge's budget of 404s at work. Then from many
// addresses, paced, against the edge and bare fasthttp: the share of the
// unknown codes answered 404 and the authority's round trips per miss.
func (e *env) scan() error {
	if err := e.pin("pinned"); err != nil {
		return err
	}
	defer e.pin("")
	lua := e.scanFile + ".lua"
	for round := 1; round <= e.o.rounds; round++ {
		for _, s := range e.order(round) {
			var before map[string]float64
			if s.name == "edgelink-edge" {
				before, _ = edgeMetrics(e.ctx, s.url)
			}
			r, err := e.wrk(s, "scan", "pinned", round, lua, e.o.duration)
			if err != nil {
				return err
			}
			if before != nil {
				if err := e.edgeDelta(&r, s, before); err != nil {
					return err
				}
			} else if s.name == "fasthttp+redis" {
				r.authority = r.requests // one Redis GET per request, found or not
			}
			e.res.runs = append(e.res.runs, r)
			fmt.Printf("   scan     round %d %-15s %9.0f req/s %9.0f req/CPU-s authority/Redis calls %.0f\n", round, s.name, r.rps, r.perCPU, r.authority)
		}
	}
	return e.scanMany()
}

// scanAddresses is how many client addresses the paced scan comes from: at
// its rate each stays within the edge's default budget of 404s.
const scanAddresses = 1024

func (e *env) scanMany() error {
	rate := e.res.halfRate
	if rate == 0 {
		rate = min(20000, max(1000, e.o.rate))
	}
	for round := 1; round <= e.o.rounds; round++ {
		for _, s := range e.order(round) {
			if s.name != "edgelink-edge" && s.name != base {
				continue
			}
			r, a, err := e.pacedCounted(s, "scan-many", round, e.scanFile, rate, scanAddresses)
			if err != nil {
				return err
			}
			e.res.runs = append(e.res.runs, r)
			fmt.Printf("   scan from %d addresses round %d %-15s sent %6.0f/s p99 %8s unknown %d answered %v authority %.0f\n",
				scanAddresses, round, s.name, a.Rate, a.P99, a.Unknown, a.UnknownBy, r.authority)
		}
	}
	return nil
}

// pacedCounted is a pinned paced run that, on the edge, records what its
// counters moved by.
func (e *env) pacedCounted(s *server, scenario string, round int, file string, rate, conns int) (runRec, attackResult, error) {
	var before map[string]float64
	if s.name == "edgelink-edge" {
		before, _ = edgeMetrics(e.ctx, s.url)
	}
	r, a, err := e.paced(s, scenario, "pinned", round, file, rate, conns, e.o.latDuration)
	if err == nil && before != nil {
		err = e.edgeDelta(&r, s, before)
	}
	return r, a, err
}

// edgeDelta records in r what the edge's counters moved by since before,
// and its authority round trips.
func (e *env) edgeDelta(r *runRec, s *server, before map[string]float64) error {
	after, err := edgeMetrics(e.ctx, s.url)
	if err != nil {
		return err
	}
	r.edge = map[string]float64{}
	for k, v := range after {
		r.edge[k] = v - before[k]
	}
	r.authority = r.edge["edge_authority_requests_total"]
	return nil
}
