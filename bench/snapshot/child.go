package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/link"
)

// runChild loads one side and reports key=value lines. With a profile
// prefix the snapshot side writes a CPU profile of each handler loop to
// prefix-zipf.pprof and prefix-uniform.pprof.
func runChild(kind, file string, n int, profile string) error {
	if kind == "hog" {
		runtime.GOMAXPROCS(1)
		for x := 0; ; x++ {
			if x == -1 {
				return nil
			}
		}
	}
	if kind == "serve" {
		return serveChild(file)
	}
	if kind == "compare" {
		snapFile, mapFile, _ := strings.Cut(file, ",")
		return compare(snapFile, mapFile, n)
	}
	debug.SetGCPercent(100)
	heap0, rss0 := heapInUse(), rss("VmRSS")
	start := time.Now()
	var (
		lookup func(code []byte) bool
		h      *redirect.Handler
		l      *store.Loaded
		keep   any
	)
	switch kind {
	case "snapshot":
		var err error
		if l, err = store.LoadFile(filepath.Base(file), file); err != nil {
			return err
		}
		a := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
		a.Install(l)
		lookup = func(code []byte) bool { _, ok := a.Snapshots.Lookup(link.DefaultDomain, code); return ok }
		h = &redirect.Handler{Store: a}
		keep = a
	case "map":
		m, err := loadMap(file, n)
		if err != nil {
			return err
		}
		lookup = func(code []byte) bool { _, ok := m[string(code)]; return ok }
		keep = m
	default:
		return fmt.Errorf("unknown side %q", kind)
	}
	load := time.Since(start)
	fmt.Println("ready")
	fmt.Printf("load_ms=%.1f ready_rss_per_link=%.2f\n", float64(load.Microseconds())/1000, float64(rss("VmRSS")-rss0)/float64(n))
	if l != nil {
		// What an edge does next: verify in the background while it
		// serves. Here nothing else runs meanwhile.
		vstart := time.Now()
		if err := l.Verify(context.Background()); err != nil {
			return err
		}
		fmt.Printf("verify_ms=%.1f mapped=%d\n", float64(time.Since(vstart).Microseconds())/1000, map[bool]int{true: 1}[l.Snap.Mapped()])
	}
	heap1, rss1 := heapInUse(), rss("VmRSS")
	fmt.Printf("heap_per_link=%.2f rss_per_link=%.2f rss_file_per_link=%.2f huge_share=%.3f\n",
		float64(heap1-heap0)/float64(n), float64(rss1-rss0)/float64(n), float64(rss("RssFile"))/float64(n),
		float64(memLine("/proc/self/smaps_rollup", "FilePmdMapped"))/float64(max(1, rss("RssFile"))))

	runtime.LockOSThread() // thread CPU time below is this goroutine's
	faults0 := majorFaults()
	codes := newSample(n, 1<<20, nil)
	fmt.Printf("lookup_ns=%.1f\n", cpuPerOp(4_000_000, func(i int) {
		if !lookup(codes.at(i)) {
			panic("a known code missed")
		}
	}))
	if h != nil {
		zipf := dataset.NewZipf(rand.New(rand.NewPCG(3, 3)), 1.1, n)
		for name, s := range map[string]*sample{"zipf": newSample(n, 1<<20, zipf), "uniform": codes} {
			stop, err := startProfile(profile, name)
			if err != nil {
				return err
			}
			ns, allocs := serve(h.Serve, s, true)
			if err := stop(); err != nil {
				return err
			}
			fmt.Printf("%s_ns=%.1f serve_allocs=%.0f\n", name, ns, allocs)
		}
		ns, _ := serve(bare, codes, false)
		fmt.Printf("bare_ns=%.1f\n", ns)
	}
	// Pages the kernel reclaimed from the mapping under memory pressure
	// are read from the disk again: each such fault is milliseconds.
	fmt.Printf("major_faults=%d\n", majorFaults()-faults0)
	runtime.KeepAlive(keep)
	return nil
}

// startProfile starts a CPU profile to prefix-name.pprof; without a
// prefix it does nothing.
func startProfile(prefix, name string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + "-" + name + ".pprof")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

func majorFaults() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Majflt
}

func loadMap(file string, n int) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	for line := range strings.Lines(string(data)) {
		code, url, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		m[strings.Clone(code)] = strings.Clone(url) // not pinning the whole file
	}
	return m, nil
}

// compare loads both sides in one process and times their lookups in
// alternating rounds on the same codes, so that both see the same load on
// a shared machine; each side's figure is its least disturbed round.
func compare(snapFile, mapFile string, n int) error {
	l, err := store.LoadFile(filepath.Base(snapFile), snapFile)
	if err != nil {
		return err
	}
	if err := l.Verify(context.Background()); err != nil {
		return err
	}
	a := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
	a.Install(l)
	m, err := loadMap(mapFile, n)
	if err != nil {
		return err
	}
	runtime.GC()
	runtime.LockOSThread()
	codes := newSample(n, 1<<20, nil)
	snap := func(i int) {
		if _, ok := a.Snapshots.Lookup(link.DefaultDomain, codes.at(i)); !ok {
			panic("a known code missed")
		}
	}
	inMap := func(i int) {
		if _, ok := m[string(codes.at(i))]; !ok {
			panic("a known code missed")
		}
	}
	bestSnap, bestMap := math.Inf(1), math.Inf(1)
	for range 5 {
		bestSnap = min(bestSnap, cpuPerOp(1_000_000, snap))
		bestMap = min(bestMap, cpuPerOp(1_000_000, inMap))
	}
	fmt.Println("ready") // the parent times nothing here
	fmt.Printf("snapshot_ns=%.1f map_ns=%.1f\n", bestSnap, bestMap)
	runtime.KeepAlive(a)
	return nil
}

// sample is a sequence of known codes, laid out flat so that reading the
// next one costs nothing next to the lookup.
type sample struct {
	paths []byte   // "/" + code, one after the other
	offs  []uint32 // len+1 offsets
}

// newSample draws k links' codes: by Zipf rank (spread over the links by a
// fixed permutation, as hot links are spread over the ID space) or
// uniformly.
func newSample(n, k int, z *dataset.Zipf) *sample {
	r := rand.New(rand.NewPCG(2, 2))
	s := &sample{offs: make([]uint32, 1, k+1)}
	for range k {
		i := r.IntN(n)
		if z != nil {
			i = int((uint64(z.Rank())*0x9E3779B97F4A7C15)>>1) % n
		}
		s.paths = code(append(s.paths, '/'), i)
		s.offs = append(s.offs, uint32(len(s.paths)))
	}
	return s
}

func (s *sample) path(i int) []byte {
	i %= len(s.offs) - 1
	return s.paths[s.offs[i]:s.offs[i+1]]
}

func (s *sample) at(i int) []byte { return s.path(i)[1:] }

// cpuPerOp runs f n times, in five rounds, and returns this thread's CPU
// time per call in nanoseconds in the round that took least: on a shared
// machine, time spent off the CPU is not the lookup's, and the least
// disturbed round is the closest to it.
func cpuPerOp(n int, f func(i int)) float64 {
	const rounds = 5
	f(0) // touch
	best := time.Duration(1<<63 - 1)
	for r := range rounds {
		c0 := threadCPU()
		for i := r * n / rounds; i < (r+1)*n/rounds; i++ {
			f(i)
		}
		best = min(best, threadCPU()-c0)
	}
	return float64(best) / float64(n/rounds)
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var location = []byte("https://www.northwind-outfitters.com/campaigns/spring-sale?utm_source=newsletter&utm_medium=email")

// bare is the suite's bare-fasthttp baseline handler: a constant 302.
func bare(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetBytesV(fasthttp.HeaderLocation, location)
	ctx.SetStatusCode(fasthttp.StatusFound)
}

// serve runs handler over the sample on one reused context, as a fasthttp
// worker does, and returns its CPU time and allocations per request;
// checkHits requires every answer to be a redirect.
func serve(handler fasthttp.RequestHandler, s *sample, checkHits bool) (ns, allocs float64) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	ctx.Init(&req, nil, nil)
	one := func(i int) {
		ctx.Request.SetRequestURIBytes(s.path(i))
		ctx.Response.Reset()
		handler(&ctx)
		if checkHits && ctx.Response.StatusCode() != fasthttp.StatusFound {
			panic(fmt.Sprintf("%s answered %d", s.path(i), ctx.Response.StatusCode()))
		}
	}
	allocs = testing.AllocsPerRun(1000, func() { one(7) })
	return cpuPerOp(2_000_000, one), allocs
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// rss reads one of /proc/self/status's memory lines (VmRSS, RssFile) in
// bytes.
func rss(field string) uint64 { return memLine("/proc/self/status", field) }

// memLine reads a "Field: N kB" line of a /proc file in bytes.
func memLine(file, field string) uint64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
