// Package edgebench measures the edge's request handler on the workload the
// suite replays (1,000,000 links, Zipf s=1.1, 10% unknown codes), beside a
// bare fasthttp handler answering a constant 302, in one `go test -bench`
// run. It isolates what the handler itself costs per request with a
// realistic working set (a 1M-link snapshot does not fit in the CPU caches),
// which the wrk suite cannot separate from the kernel's share.
//
//	go test ./bench/edge -run '^$' -bench . -benchtime 2000000x
package edgebench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/ratelimit"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/resolve"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

const links = 1_000_000

// workload is the edge's layers loaded as after a snapshot boot, and the
// request sample.
type workload struct {
	h       *redirect.Handler
	rec     *clickpub.Recorder
	reqs    []dataset.Request
	asked   *atomic.Uint64
	cleanup func()
}

// discard stands in for JetStream under the click publisher: publishing to
// a real server would add that server's CPU to the handler's figure.
type discard struct{}

func (discard) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}
func (discard) CreateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, nil
}

// notFound is an authority that knows no code and has promised the
// frontier's ceiling four segments above the allocated IDs, as control does:
// random unknown codes lie beyond it and are answered without asking.
type notFound struct{ asked *atomic.Uint64 }

func (a notFound) Ask(_ link.DomainID, code string) (authority.Reply, error) {
	a.asked.Add(1)
	return authority.Reply{Kind: authority.NotFound, Version: links}, nil
}

func (a notFound) Settle(id uint64) (bool, error) { return id >= links+1+4*100_000, nil }

func newWorkload(b *testing.B) *workload {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	codes, urls := make([]string, links), make([]string, links)
	ls := make([]snapshot.Link, links)
	for i := range ls {
		code, err := base62.Encode(uint64(i + 1))
		if err != nil {
			b.Fatal(err)
		}
		codes[i], urls[i] = code, dataset.Target(r)
		ls[i] = snapshot.Link{Code: codes[i], URL: urls[i], RedirectType: 302, Status: link.Active, Version: uint64(i + 1)}
	}
	// Every link's segment is sealed, as in the suite once the bulk load
	// is done; unknown codes above the allocated IDs can still be recent.
	data, err := snapshottest.Build(ls, snapshot.Header{ChangeVersion: links, StreamSeq: links},
		[]snapshot.Sealed{{Namespace: "default", Intervals: []snapshot.Interval{{Start: 1, End: links + 1}}}})
	if err != nil {
		b.Fatal(err)
	}
	l, err := store.Load("bench", data)
	if err != nil {
		b.Fatal(err)
	}
	applied := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(4_000_000, 0.01),
		Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
	applied.Install(l)
	cache, err := store.NewCache(1_000_000)
	if err != nil {
		b.Fatal(err)
	}
	asked := new(atomic.Uint64)
	res := &resolve.Resolver{Cache: cache, Hint: applied.Hint, Segments: applied.Segments,
		Authority: notFound{asked}, Complete: func() bool { return true }}
	rec := clickpub.New(discard{}, clickpub.Config{Edge: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rec.Run(ctx) }()
	// The edge's default budget of 404s; all requests come from one
	// address here, so past its burst the unknown codes are answered 429.
	h := &redirect.Handler{Store: applied, Miss: res, Clicks: rec, NotFoundLimit: ratelimit.New(50, 1000, 100_000, nil)}
	reqs := dataset.Sample(codes, urls, dataset.SampleConfig{Requests: 1 << 18, S: 1.1, Unknown: 0.10, Seed: 1})
	return &workload{h: h, rec: rec, reqs: reqs, asked: asked, cleanup: func() { cancel(); <-done; cache.Close() }}
}

var bareLocation = []byte("https://www.northwind-outfitters.com/campaigns/spring-sale?utm_source=newsletter&utm_medium=email")

// bare is the suite's bare-fasthttp baseline handler.
func bare(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetBytesV(fasthttp.HeaderLocation, bareLocation)
	ctx.SetStatusCode(fasthttp.StatusFound)
}

// BenchmarkWorkload replays the sample through each handler from parallel
// goroutines (one per P, as fasthttp's workers), each request on a reused
// context as fasthttp does; the URI is set per request in both, so the
// difference between the two is the edge's lookup, answer and click
// recording.
func BenchmarkWorkload(b *testing.B) {
	w := newWorkload(b)
	defer w.cleanup()
	check(b, w)
	runtime.GC() // the setup's garbage must not be collected on the clock
	for _, c := range []struct {
		name string
		h    fasthttp.RequestHandler
	}{
		{"bare", bare},
		{"edge", w.rec.Timed(w.h.Serve)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				var req fasthttp.Request
				req.Header.SetMethod("GET")
				ctx.Init(&req, nil, nil)
				i := next.Add(1 << 16) // each goroutine its own stretch of the sample
				for pb.Next() {
					i++
					ctx.Request.SetRequestURI(w.reqs[i&(1<<18-1)].Path)
					ctx.Response.Reset()
					c.h(&ctx)
				}
			})
		})
	}
}

// check asks the edge handler the first 3,000 requests of the sample: known
// codes must 302 to their URL; unknown ones must not redirect.
func check(b *testing.B, w *workload) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	ctx.Init(&req, nil, nil)
	for _, rq := range w.reqs[:3000] {
		ctx.Request.SetRequestURI(rq.Path)
		ctx.Response.Reset()
		w.h.Serve(&ctx)
		got, loc := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
		if rq.Status == 302 && (got != 302 || loc != rq.Location) || rq.Status != 302 && got/100 == 3 {
			b.Fatal(fmt.Sprintf("%s: %d %q, want %d %q", rq.Path, got, loc, rq.Status, rq.Location))
		}
	}
}
