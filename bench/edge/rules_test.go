package edgebench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// ruleClients are the User-Agents of the rules benchmark, in the shares
// they are drawn (a mobile-heavy audience): an iPhone and an Android phone
// match their rules, the desktops match neither device rule and are looked
// up for the country rule.
var ruleClients = []struct {
	ua    string
	share int // of 100
}{
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", 45},
	{"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36", 30},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", 15},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", 10},
}

// threeRules are the rules every rule link of the benchmark has: iOS,
// Android, and a country list (the edge's geo data decides it).
var threeRules = []link.Rule{
	{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
	{Devices: []link.Device{link.DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=com.example"},
	{Countries: []string{"AT", "CH", "DE"}, URL: "https://www.example.de/aktion"},
}

// rulesWorkload is one handler over a snapshot of 1,000,000 links, one in
// a hundred with threeRules, and the clients the requests come from.
type rulesWorkload struct {
	h              *redirect.Handler
	rec            *clickpub.Recorder
	plain, ruled   []dataset.Request // Zipf over 10,000 plain links, and over the 10,000 rule links
	uas            [][]byte
	addrs          []net.Addr
	geoSource      string
	cleanup        func()
	plainN, ruledN int
}

func newRulesWorkload(b *testing.B) *rulesWorkload {
	b.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	extras, err := link.AppendExtras(nil, &link.Extras{Rules: threeRules})
	if err != nil {
		b.Fatal(err)
	}
	ls := make([]snapshot.Link, links)
	var plainCodes, plainURLs, ruledCodes, ruledURLs []string
	for i := range ls {
		code, err := base62.Encode(uint64(i + 1))
		if err != nil {
			b.Fatal(err)
		}
		u := dataset.Target(r)
		ls[i] = snapshot.Link{Code: code, URL: u, RedirectType: 302, Status: link.Active, Version: uint64(i + 1)}
		switch i % 100 {
		case 0:
			ls[i].Extras = extras
			ruledCodes, ruledURLs = append(ruledCodes, code), append(ruledURLs, u)
		case 1:
			plainCodes, plainURLs = append(plainCodes, code), append(plainURLs, u)
		}
	}
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
	// The shipped IPFire data when `go tool task geoip` fetched it, else
	// edge/geo's fixture cut from it.
	source := "../../.data/geoip"
	if _, err := os.Stat(source + "/geoip"); err != nil {
		source = "../../edge/geo/testdata"
	}
	table, err := geo.LoadTor(source)
	if err != nil {
		b.Fatal(err)
	}
	rec := clickpub.New(discard{}, clickpub.Config{Edge: "bench"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rec.Run(ctx) }()
	h := &redirect.Handler{Store: applied, Clicks: rec, Countries: table}
	w := &rulesWorkload{h: h, rec: rec, geoSource: source, cleanup: func() { cancel(); <-done },
		plainN: len(plainCodes), ruledN: len(ruledCodes)}
	cfg := dataset.SampleConfig{Requests: 1 << 16, S: 1.1, Seed: 5}
	w.plain = dataset.Sample(plainCodes, plainURLs, cfg)
	w.ruled = dataset.Sample(ruledCodes, ruledURLs, cfg)
	// Clients: the User-Agents in their shares, and public addresses, a
	// quarter of them in the rule's countries.
	for _, c := range ruleClients {
		for range c.share {
			w.uas = append(w.uas, []byte(c.ua))
		}
	}
	rand.New(rand.NewPCG(6, 7)).Shuffle(len(w.uas), func(i, j int) { w.uas[i], w.uas[j] = w.uas[j], w.uas[i] })
	for len(w.addrs) < 1024 {
		a := net.IPv4(byte(1+r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)))
		cc, ok := table.Lookup(netipOf(a))
		inRule := ok && (cc == [2]byte{'D', 'E'} || cc == [2]byte{'A', 'T'} || cc == [2]byte{'C', 'H'})
		if ok && (inRule == (len(w.addrs)%4 == 0)) {
			w.addrs = append(w.addrs, &net.TCPAddr{IP: a, Port: 40000})
		}
	}
	return w
}

// processCPU is the CPU time this process has used (user and system), in
// nanoseconds: on a machine other work keeps busy, a request's CPU time
// says what it costs where its wall time says how long it waited.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRules serves, on one handler, requests for 10,000 plain links
// and for 10,000 links with three rules (iOS, Android, a country list)
// from the same clients: the same User-Agents and addresses in the same
// order, so the difference is the rules' evaluation (the User-Agent's
// device, the country looked up for clients no device rule took, the
// routing) and nothing else. Both sets are in one 1M-link snapshot, drawn
// by Zipf s=1.1; clicks are recorded as on the edge (the publisher's CPU,
// off the response path, is in cpu-ns/op).
//
//	go test ./bench/edge -run '^$' -bench Rules -benchtime 2000000x -count 8
func BenchmarkRules(b *testing.B) {
	w := newRulesWorkload(b)
	defer w.cleanup()
	w.check(b)
	b.Logf("country data: %s; %d plain and %d rule links of %d", w.geoSource, w.plainN, w.ruledN, links)
	runtime.GC()
	for _, c := range []struct {
		name string
		reqs []dataset.Request
	}{{"plain", w.plain}, {"rules", w.ruled}} {
		b.Run(c.name, func(b *testing.B) {
			var next atomic.Uint64
			b.ReportAllocs()
			cpu0 := processCPU(b)
			defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				var req fasthttp.Request
				req.Header.SetMethod("GET")
				ctx.Init(&req, nil, nil)
				i := next.Add(1 << 12)
				for pb.Next() {
					i++
					ctx.Request.SetRequestURI(c.reqs[i&(1<<16-1)].Path)
					ctx.Request.Header.SetUserAgentBytes(w.uas[i%uint64(len(w.uas))])
					ctx.SetRemoteAddr(w.addrs[i&1023])
					ctx.Response.Reset()
					w.h.Serve(&ctx)
				}
			})
		})
	}
}

// check asks every client of the first 2,000 requests of each sample:
// plain links 302 to their target, rule links to their rule's.
func (w *rulesWorkload) check(b *testing.B) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	ctx.Init(&req, nil, nil)
	table := w.h.Countries
	for s, reqs := range [][]dataset.Request{w.plain, w.ruled} {
		for i, rq := range reqs[:2000] {
			ua, addr := w.uas[i%len(w.uas)], w.addrs[i&1023]
			ctx.Request.SetRequestURI(rq.Path)
			ctx.Request.Header.SetUserAgentBytes(ua)
			ctx.SetRemoteAddr(addr)
			ctx.Response.Reset()
			w.h.Serve(&ctx)
			want := rq.Location
			if s == 1 {
				cc, _ := table.Lookup(netipOf(addr.(*net.TCPAddr).IP))
				switch redirect.RuleDevice(ua) {
				case link.DeviceIOS:
					want = threeRules[0].URL
				case link.DeviceAndroid:
					want = threeRules[1].URL
				default:
					if cc == [2]byte{'D', 'E'} || cc == [2]byte{'A', 'T'} || cc == [2]byte{'C', 'H'} {
						want = threeRules[2].URL
					}
				}
			}
			if got, loc := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location")); got != 302 || loc != want {
				b.Fatal(fmt.Sprintf("%s from %v: %d %q, want 302 %q", rq.Path, addr, got, loc, want))
			}
		}
	}
}

func netipOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
