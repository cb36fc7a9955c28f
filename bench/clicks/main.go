// Command clicks measures what click recording costs a redirect: the same
// edge handler with recording off (no recorder, no service-time histogram)
// and on (every redirect copied into the ring, its service time counted,
// and the publisher goroutine classifying and encoding them all, as in
// production, publishing to a discarding sink so NATS is not measured).
// Both configurations run in the same process, in alternating rounds, and
// the figure reported is the ratio on/off of the medians.
//
// Two measurements:
//
//   - handler: the fasthttp handler called from GOMAXPROCS goroutines at
//     once (testing.Benchmark with RunParallel) — the recording's cost
//     against the smallest possible redirect, the worst case for the ratio.
//
//   - http: a real fasthttp server on loopback driven by wrk (closed loop,
//     1 thread, 64 connections), requests per second — what an edge serves.
//
//     go run ./bench/clicks                      # both, 5 rounds
//     go run ./bench/clicks -http=false -rounds 3
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

const (
	userAgent = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	referer   = "https://t.co/AbCdEf?amp=1"
	links     = 10_000
)

func main() {
	rounds := flag.Int("rounds", 5, "alternating rounds per measurement")
	handler := flag.Bool("handler", true, "measure the handler in parallel")
	httpRun := flag.Bool("http", true, "measure over HTTP with wrk")
	duration := flag.Duration("duration", 5*time.Second, "wrk run per round")
	flag.Parse()
	if *handler {
		off, on := alternate(*rounds, handlerNsPerOp)
		// Lower is better for ns/op: throughput ratio = off/on.
		fmt.Printf("handler, %d goroutines: wall off %.1f on %.1f ns/op, ratio on/off %.3f; CPU off %.1f on %.1f ns/op, ratio on/off %.3f (medians of %d)\n",
			runtime.GOMAXPROCS(0), off[0], on[0], off[0]/on[0], off[1], on[1], off[1]/on[1], *rounds)
	}
	if *httpRun {
		if _, err := exec.LookPath("wrk"); err != nil {
			fmt.Fprintln(os.Stderr, "wrk not found: apt-get install -y wrk (bench/edge/run.sh does it)")
			os.Exit(1)
		}
		off, on := alternate(*rounds, func(rec bool) (float64, float64) { return httpRPS(rec, *duration) })
		fmt.Printf("http via wrk: off %.0f on %.0f req/s, ratio on/off %.3f; per server CPU-second off %.0f on %.0f, ratio on/off %.3f (medians of %d)\n",
			off[0], on[0], on[0]/off[0], off[1], on[1], on[1]/off[1], *rounds)
	}
}

// alternate runs measure with recording off then on, rounds times, and
// returns the medians: alternating spreads drift (thermal, neighbours)
// over both.
func alternate(rounds int, measure func(rec bool) (float64, float64)) (off, on [2]float64) {
	var offs, ons [2][]float64
	for i := range rounds {
		a1, a2 := measure(false)
		b1, b2 := measure(true)
		fmt.Fprintf(os.Stderr, "round %d: off %.1f / %.1f, on %.1f / %.1f\n", i+1, a1, a2, b1, b2)
		offs[0], offs[1] = append(offs[0], a1), append(offs[1], a2)
		ons[0], ons[1] = append(ons[0], b1), append(ons[1], b2)
	}
	return [2]float64{median(offs[0]), median(offs[1])}, [2]float64{median(ons[0]), median(ons[1])}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// setup returns the redirect handler over links links, and with recording
// on, the recorder's handler wrapper and its publisher running until stop.
func setup(rec bool) (h fasthttp.RequestHandler, stop func()) {
	s := store.NewOverlay()
	for i := range links {
		code := codeOf(uint64(1_000_000 + i))
		s.Apply(&store.Entry{Code: code, URL: "https://example.com/landing/page?utm_source=bench&i=" + strconv.Itoa(i),
			RedirectType: 302, Status: link.Active, Version: uint64(i + 1)})
	}
	rh := &redirect.Handler{Store: s}
	if !rec {
		return rh.Serve, func() {}
	}
	r := clickpub.New(discard{}, clickpub.Config{Edge: "bench"})
	rh.Clicks = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	return r.Timed(rh.Serve), func() {
		cancel()
		<-done
		if d := r.Dropped.Load(); d > 0 {
			fmt.Fprintf(os.Stderr, "  (recorder dropped %d clicks: the publisher fell behind)\n", d)
		}
	}
}

// cpuTime is the CPU this process has used (all threads, user and
// system). On a machine shared with other work, CPU per request separates
// the configurations where wall-clock rates mostly measure the neighbours.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func handlerNsPerOp(rec bool) (wall, cpu float64) {
	h, stop := setup(rec)
	c0 := cpuTime()
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			req.Header.SetMethod("GET")
			req.Header.SetUserAgent(userAgent)
			req.Header.SetReferer(referer)
			i := 0
			paths := make([][]byte, 64)
			for j := range paths {
				paths[j] = []byte("/" + codeOf(uint64(1_000_000+j*151%links)))
			}
			req.SetRequestURIBytes(paths[0])
			ctx.Init(&req, nil, nil)
			for pb.Next() {
				ctx.Request.SetRequestURIBytes(paths[i&63])
				i++
				ctx.Response.Reset()
				h(&ctx)
			}
		})
	})
	stop() // the publisher's share of the work is part of the cost
	used := cpuTime() - c0
	if res.AllocsPerOp() != 0 {
		fmt.Fprintf(os.Stderr, "  handler allocated %d times per request\n", res.AllocsPerOp())
	}
	// testing.Benchmark runs the function for growing N; the CPU covers
	// every run, so divide by all of them (N doubles: about 2N in all).
	return float64(res.T.Nanoseconds()) / float64(res.N), float64(used.Nanoseconds()) / float64(2*res.N)
}

var rpsLine = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

var requestsLine = regexp.MustCompile(`([0-9]+) requests in`)

// httpRPS returns wrk's requests per second and the requests served per
// CPU-second of this process (server and publisher; wrk excluded).
func httpRPS(rec bool, d time.Duration) (rps, perCPU float64) {
	h, stop := setup(rec)
	defer stop()
	c0 := cpuTime()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &fasthttp.Server{Handler: h, NoDefaultServerHeader: true, NoDefaultContentType: true}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()
	path := "/" + codeOf(1_000_042)
	cmd := exec.Command("wrk", "-t1", "-c64", "-d"+d.String(), "-H", "User-Agent: "+userAgent, "-H", "Referer: "+referer,
		"http://"+ln.Addr().String()+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	var n float64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := rpsLine.FindStringSubmatch(sc.Text()); m != nil {
			rps, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := requestsLine.FindStringSubmatch(sc.Text()); m != nil {
			n, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	if err := cmd.Wait(); err != nil {
		panic(err)
	}
	return rps, n / (cpuTime() - c0).Seconds()
}

// discard is a JetStream that stores nothing: the benchmark measures the
// edge, not NATS.
type discard struct{}

func (discard) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}

func (discard) CreateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, nil
}

// codeOf is the 6-character code of id (ids here are far inside the space).
func codeOf(id uint64) string {
	c, err := base62.Encode(id)
	if err != nil {
		panic(err)
	}
	return c
}
