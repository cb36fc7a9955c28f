package edgebench

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

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
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// hosted is a request with the Host it carries.
type hosted struct {
	dataset.Request
	Host string
}

// domainWorkload is the same 1,000,000 links and request shape as
// workload, on an edge with a domain table: spread over n domains (n = 1:
// the platform's sequential domain alone; n > 1: FF1 domains, the
// default for new ones), every request carrying its link's Host.
type domainWorkload struct {
	h       *redirect.Handler
	rec     *clickpub.Recorder
	reqs    []hosted
	asked   *atomic.Uint64
	cleanup func()
}

// perDomainNotFound is notFound with a frontier per domain: each domain's
// links take its first IDs, and the ceiling is 400,000 IDs above them.
type perDomainNotFound struct {
	asked     *atomic.Uint64
	perDomain uint64
}

func (a perDomainNotFound) Ask(link.DomainID, string) (authority.Reply, error) {
	a.asked.Add(1)
	return authority.Reply{Kind: authority.NotFound, Version: links}, nil
}

func (a perDomainNotFound) Settle(id uint64) (bool, error) {
	_, local := link.SplitID(id)
	return local >= a.perDomain+1+4*100_000, nil
}

func newDomainWorkload(b *testing.B, n int) *domainWorkload {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	key := base64.StdEncoding.EncodeToString([]byte("edgelink bench key, not a secret"))
	keys, err := ff1.ParseKeys(strings.NewReader("bench " + key + "\n"))
	if err != nil {
		b.Fatal(err)
	}
	var confs []link.Domain
	var codecs []*ff1.Codes
	if n == 1 {
		confs = []link.Domain{{ID: link.DefaultDomain, Host: "go.example.com", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1}}
	} else {
		confs = []link.Domain{{ID: link.DefaultDomain, Host: "platform.example.com", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1}}
		for i := range n {
			d := link.Domain{ID: link.DomainID(i + 1), Host: fmt.Sprintf("go%d.brand%d.example", i, i), TenantID: int64(i + 1),
				CodeMode: link.CodesFF1, KeyIDs: []string{"bench"}, Status: link.DomainActive, Version: 1}
			c, err := keys.Codes("bench", d.Host)
			if err != nil {
				b.Fatal(err)
			}
			confs, codecs = append(confs, d), append(codecs, c)
		}
	}
	perDomain := uint64(links / n)
	codes, urls, hosts := make([]string, links), make([]string, links), make([]string, links)
	ls := make([]snapshot.Link, links)
	for i := range ls {
		d, local := i%n, uint64(i/n+1)
		conf := confs[len(confs)-n+d]
		var code string
		if n == 1 {
			code, err = base62.Encode(local)
		} else {
			var c [6]byte
			c, err = codecs[d].Encode(local)
			code = string(c[:])
		}
		if err != nil {
			b.Fatal(err)
		}
		codes[i], urls[i], hosts[i] = code, dataset.Target(r), conf.Host
		ls[i] = snapshot.Link{Domain: conf.ID, Code: code, URL: urls[i], RedirectType: 302, Status: link.Active, Version: uint64(i + 1)}
	}
	var sealed []snapshot.Sealed
	for _, c := range confs[len(confs)-n:] {
		start, _ := link.IDRange(c.ID)
		sealed = append(sealed, snapshot.Sealed{Namespace: link.NamespaceOf(c.ID), Intervals: []snapshot.Interval{{Start: start, End: start + perDomain}}})
	}
	data, err := snapshottest.BuildDomains(ls, confs, snapshot.Header{ChangeVersion: links, StreamSeq: links}, sealed)
	if err != nil {
		b.Fatal(err)
	}
	l, err := store.Load("bench", data)
	if err != nil {
		b.Fatal(err)
	}
	domains := store.NewDomains(keys)
	applied := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(4_000_000, 0.01),
		Segments: new(store.Segments), Snapshots: new(store.Snapshots), Domains: domains}
	applied.Install(l)
	cache, err := store.NewCache(1_000_000)
	if err != nil {
		b.Fatal(err)
	}
	asked := new(atomic.Uint64)
	res := &resolve.Resolver{Cache: cache, Hint: applied.Hint, Segments: applied.Segments,
		Authority: perDomainNotFound{asked, perDomain}, Complete: func() bool { return true }}
	rec := clickpub.New(discard{}, clickpub.Config{Edge: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rec.Run(ctx) }()
	h := &redirect.Handler{Domains: domains, Store: applied, Miss: res, Clicks: rec, NotFoundLimit: ratelimit.New(50, 1000, 100_000, nil)}
	// The sample's codes may repeat across domains; each request is given
	// the host of the link it was drawn for, and an unknown code a random
	// domain's host.
	byCode := make(map[string]int, links)
	for i, c := range codes {
		byCode[c] = i
	}
	sample := dataset.Sample(codes, urls, dataset.SampleConfig{Requests: 1 << 18, S: 1.1, Unknown: 0.10, Seed: 1})
	reqs := make([]hosted, len(sample))
	for i, rq := range sample {
		reqs[i].Request = rq
		if j, ok := byCode[rq.Path[1:]]; ok && rq.Status == 302 {
			reqs[i].Host = hosts[j]
			reqs[i].Location = urls[j]
		} else {
			reqs[i].Host = confs[len(confs)-n+r.IntN(n)].Host
		}
	}
	return &domainWorkload{h: h, rec: rec, reqs: reqs, asked: asked, cleanup: func() { cancel(); <-done; cache.Close() }}
}

// BenchmarkDomains is BenchmarkWorkload's edge with a domain table, each
// request carrying its Host: one domain (the single-domain figure) and
// eight FF1 domains with the hosts mixed. The Host is set per request in
// both, as every HTTP/1.1 request carries one. Unknown codes report how
// many the authority was asked, per 1,000 requests.
func BenchmarkDomains(b *testing.B) {
	for _, n := range []int{1, 8} {
		w := newDomainWorkload(b, n)
		checkHosted(b, w)
		runtime.GC()
		b.Run(fmt.Sprintf("domains=%d", n), func(b *testing.B) {
			var next atomic.Uint64
			before := w.asked.Load()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				var req fasthttp.Request
				req.Header.SetMethod("GET")
				ctx.Init(&req, nil, nil)
				i := next.Add(1 << 16)
				for pb.Next() {
					i++
					rq := &w.reqs[i&(1<<18-1)]
					ctx.Request.SetRequestURI(rq.Path)
					ctx.Request.Header.SetHost(rq.Host)
					ctx.Response.Reset()
					w.h.Serve(&ctx)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(w.asked.Load()-before)*1000/float64(b.N), "asked/1000req")
		})
		w.cleanup()
	}
}

// checkHosted asks the first 3,000 requests: known codes 302 to their URL
// on their host, unknown ones do not redirect; and a known code on another
// domain's host or an unknown host does not answer with its target.
func checkHosted(b *testing.B, w *domainWorkload) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	ctx.Init(&req, nil, nil)
	ask := func(host, path string) (int, string) {
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.SetHost(host)
		ctx.Response.Reset()
		w.h.Serve(&ctx)
		return ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
	}
	for _, rq := range w.reqs[:3000] {
		got, loc := ask(rq.Host, rq.Path)
		if rq.Status == 302 && (got != 302 || loc != rq.Location) || rq.Status != 302 && got/100 == 3 {
			b.Fatalf("%s%s: %d %q, want %d %q", rq.Host, rq.Path, got, loc, rq.Status, rq.Location)
		}
		if rq.Status == 302 {
			// 429 once the one client's budget of 404s is spent.
			if got, loc := ask("unknown.example", rq.Path); got != 404 && got != 429 || loc != "" {
				b.Fatalf("unknown.example%s: %d %q, want 404", rq.Path, got, loc)
			}
		}
	}
}
