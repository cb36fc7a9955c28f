// Command snapshot measures the edge's snapshot layer against a plain Go map
// holding the same links, in one run on one machine: build time and file
// size, heap and resident memory per link once loaded, time from process
// start to serving, and the cost of one lookup and one redirect.
//
//	go run ./bench/snapshot -links 1000000
//
// Each side loads in its own fresh child process, so one side's garbage
// never counts against the other.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func main() {
	n := flag.Int("links", 1_000_000, "links in the snapshot")
	dir := flag.String("dir", "", "folder for the files (default: a temporary one, removed)")
	child := flag.String("child", "", "internal: load one side (snapshot|map) from -file and report")
	file := flag.String("file", "", "internal: the file a child loads")
	flag.Parse()
	var err error
	if *child != "" {
		err = runChild(*child, *file, *n)
	} else {
		err = run(*n, *dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/snapshot:", err)
		os.Exit(1)
	}
}

// firstID spreads generated codes over the 6-character space the way a
// long-running allocator does.
const firstID = 1_000_000_000

func run(n int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "edgelink-snapbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rng := rand.New(rand.NewPCG(1, 1))
	fmt.Printf("generating %d links with realistic targets...\n", n)
	links := make([]snapshot.Link, n)
	var urlBytes int
	for i := range links {
		l := snapshot.Link{URL: dataset.Target(rng), RedirectType: link.DefaultRedirect, Status: link.Active}
		if i%50 == 49 { // 2% custom codes
			l.Code = fmt.Sprintf("campaign-%07d", i)
		} else {
			l.Code, _ = base62.Encode(uint64(firstID + i*3))
		}
		urlBytes += len(l.URL)
		links[i] = l
	}

	// The snapshot file, built as control's builder does.
	start := time.Now()
	var w snapshot.Writer
	f := bloom.NewWithEstimates(uint(n), 0.01)
	for _, l := range links {
		if err := w.Add(l); err != nil {
			return err
		}
		f.AddString(l.Code)
	}
	var bb, out bytes.Buffer
	if _, err := f.WriteTo(&bb); err != nil {
		return err
	}
	h := snapshot.Header{ChangeVersion: uint64(n), StreamSeq: uint64(n), BloomCount: uint64(n), CreatedMillis: time.Now().UnixMilli()}
	if err := w.Write(&out, h, nil, bb.Bytes()); err != nil {
		return err
	}
	build := time.Since(start)
	snapFile := filepath.Join(dir, snapshot.ObjectName(uint64(n)))
	if err := os.WriteFile(snapFile, out.Bytes(), 0o644); err != nil {
		return err
	}
	fileSize := out.Len()

	// The baseline's file: code TAB url lines.
	mapFile := filepath.Join(dir, "links.tsv")
	tf, err := os.Create(mapFile)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tf, 1<<20)
	for _, l := range links {
		bw.WriteString(l.Code)
		bw.WriteByte('\t')
		bw.WriteString(l.URL)
		bw.WriteByte('\n')
	}
	if err := errorsJoin(bw.Flush(), tf.Close()); err != nil {
		return err
	}
	links, out, bb = nil, bytes.Buffer{}, bytes.Buffer{}
	runtime.GC()

	fmt.Printf("  build %v, file %.1f MiB (%.1f B/link); raw code+target %.1f B/link\n\n",
		build.Round(time.Millisecond), float64(fileSize)/(1<<20), float64(fileSize)/float64(n),
		float64(urlBytes)/float64(n)+6)

	snap, err := measureChild("snapshot", snapFile, n)
	if err != nil {
		return err
	}
	base, err := measureChild("map", mapFile, n)
	if err != nil {
		return err
	}
	fmt.Printf("%-28s %14s %14s %8s\n", "per run", "snapshot", "Go map", "ratio")
	row := func(name string, a, b float64, unit string) {
		fmt.Printf("%-28s %11.1f %-2s %11.1f %-2s %7.2fx\n", name, a, unit, b, unit, a/b)
	}
	row("heap per link", snap["heap_per_link"], base["heap_per_link"], "B")
	row("RSS per link", snap["rss_per_link"], base["rss_per_link"], "B")
	row("process start to ready", snap["ready_ms"], base["ready_ms"], "ms")
	row("load (in process)", snap["load_ms"], base["load_ms"], "ms")
	row("lookup", snap["lookup_ns"], base["lookup_ns"], "ns")
	fmt.Printf("%-28s %11.1f ns %11s    allocs/op %.0f\n", "redirect (handler, hit)", snap["serve_ns"], "", snap["serve_allocs"])
	fmt.Printf("\nRedis, at ~150 B/link (a 20 B key, an 80 B URL, 50 B of object overhead): the snapshot is %.2fx that.\n", snap["heap_per_link"]/150)
	return nil
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// measureChild runs one side in a fresh process and parses its key=value
// report; "ready_ms" is measured here, from exec to the child's ready line.
func measureChild(kind, file string, n int) (map[string]float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-child", kind, "-file", file, "-links", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := map[string]float64{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			res["ready_ms"] = float64(time.Since(start).Microseconds()) / 1000
			continue
		}
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				res[k] = f
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s child: %w", kind, err)
	}
	return res, nil
}

func heapInUse() (heap uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runChild loads one side and reports. The snapshot side does what an edge
// does at boot: read the local copy, validate every checksum, decode the
// bloom and put it in service under an (empty) overlay.
func runChild(kind, file string, n int) error {
	debug.SetGCPercent(100)
	heap0, rss0 := heapInUse(), rssBytes()
	start := time.Now()
	var (
		lookup func(code []byte) bool
		h      *redirect.Handler
		keep   any
	)
	switch kind {
	case "snapshot":
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		l, err := store.Load(filepath.Base(file), data)
		if err != nil {
			return err
		}
		a := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments), Snapshots: new(store.Snapshots)}
		a.Install(l)
		lookup = func(code []byte) bool { _, ok := a.Snapshots.Lookup(code); return ok }
		h = &redirect.Handler{Store: a}
		keep = a
	case "map":
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		m := make(map[string]string, n)
		for line := range strings.Lines(string(data)) {
			code, url, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
			m[strings.Clone(code)] = strings.Clone(url) // not pinning the whole file
		}
		data = nil
		lookup = func(code []byte) bool { _, ok := m[string(code)]; return ok }
		keep = m
	default:
		return fmt.Errorf("unknown side %q", kind)
	}
	load := time.Since(start)
	fmt.Println("ready")
	heap1, rss1 := heapInUse(), rssBytes()
	fmt.Printf("heap_per_link=%.2f rss_per_link=%.2f load_ms=%.1f\n",
		float64(heap1-heap0)/float64(n), float64(rss1-rss0)/float64(n), float64(load.Microseconds())/1000)

	codes := make([][]byte, 4096)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range codes {
		j := r.IntN(n)
		if j%50 == 49 {
			codes[i] = fmt.Appendf(nil, "campaign-%07d", j)
		} else {
			c, _ := base62.Encode(uint64(firstID + j*3))
			codes[i] = []byte(c)
		}
	}
	lr := testing.Benchmark(func(b *testing.B) {
		i := 0
		for b.Loop() {
			if !lookup(codes[i&4095]) {
				b.Fatal("miss")
			}
			i++
		}
	})
	fmt.Printf("lookup_ns=%.1f\n", float64(lr.NsPerOp()))
	if h != nil {
		reqs := make([]fasthttp.RequestCtx, len(codes))
		for i := range reqs {
			var req fasthttp.Request
			req.Header.SetMethod("GET")
			req.SetRequestURI("/" + string(codes[i]))
			reqs[i].Init(&req, nil, nil)
		}
		sr := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ctx := &reqs[i&4095]
				ctx.Response.Reset()
				h.Serve(ctx)
				i++
			}
		})
		fmt.Printf("serve_ns=%.1f serve_allocs=%d\n", float64(sr.NsPerOp()), sr.AllocsPerOp())
	}
	runtime.KeepAlive(keep)
	return nil
}
