// Command snapshot measures the edge's snapshot layer against a plain Go map
// holding the same links, in one run on one machine: build time and file
// size, time from process start to serving, resident memory per link, the
// cost of one lookup, and redirects per CPU-second of the edge's handler.
//
//	go run ./bench/snapshot -links 1000000
//	go run ./bench/snapshot -links 10000000 -busy
//	go run ./bench/snapshot -links 100000000 -json out.json
//	go run ./bench/snapshot -scale 1000000,10000000,100000000 -dir D -reuse
//	go run ./bench/snapshot -server 1000000,100000000 -dir D
//
// -scale measures the snapshot side at each size and writes a results
// table and chart (scale.go); -server measures whole fasthttp servers over
// the snapshot layer in redirects per server CPU-second (server.go).
//
// Each side loads in its own fresh child process, so one side's garbage
// never counts against the other. The snapshot side does what an edge does
// at boot from its local copy: open the file in place (store.LoadFile),
// put it in service, say it is ready, then verify it in the background.
// -busy runs a process spinning on one core (of two here) while both sides
// start, as when the machine is busy. The file is dropped from the page
// cache once written, as an edge does with a download before verifying it,
// so the child reads it from the disk under the mapping's huge-page hint;
// -warm leaves the writer's small pages in the cache instead. Above 20,000,000 links the Go map is
// left out (it would need about 35 GB at 100M); -map forces it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func main() {
	n := flag.Int("links", 1_000_000, "links in the snapshot")
	dir := flag.String("dir", "", "folder for the files (default: a temporary one, removed)")
	reuse := flag.Bool("reuse", false, "with -dir: measure a snapshot file an earlier run left there instead of building it again (the 100M build takes 7–16 minutes)")
	busy := flag.Bool("busy", false, "spin a process on one core while the children start")
	warm := flag.Bool("warm", false, "leave the written file in the page cache (small pages) instead of dropping it as an edge does a download")
	withMap := flag.String("map", "auto", "measure the Go map baseline too: true, false, or auto (up to 20,000,000 links)")
	jsonOut := flag.String("json", "", "also write the figures to this file as JSON")
	scale := flag.String("scale", "", "measure the snapshot side at each of these sizes (e.g. 1000000,10000000,100000000) and write the table and chart to -out")
	out := flag.String("out", "bench/results", "with -scale: folder of the results file and chart")
	budgetShare := flag.Float64("budget-share", 0.1, "with -scale: the memory budget as a share of the links, for the ideal budgeted hit ratio")
	budgetFile := flag.String("budget", "", "with -scale: bench/budget's figures, a JSON array of {links, budget, hit_ratio, projected}")
	from := flag.String("from", "", "render the results of an earlier run (its .json beside the .md) again, with -budget merged, instead of measuring")
	commit := flag.String("commit", "", "with -scale: the commit the results name (default: git rev-parse HEAD, -dirty when bench/snapshot, shared/snapshot or edge have changes)")
	servers := flag.String("server", "", "measure redirects per server CPU-second of a whole fasthttp server at each of these sizes (e.g. 1000000,100000000), loaded in turn over loopback; needs -dir, reuses or builds the files there")
	rounds := flag.Int("rounds", 3, "with -server: rounds of loading every server")
	duration := flag.Duration("duration", 5*time.Second, "with -server: load per server per round")
	conns := flag.Int("conns", 16, "with -server: keep-alive connections of the load")
	profile := flag.String("profile", "", "write CPU profiles of the snapshot side's handler loops to PREFIX-zipf.pprof and PREFIX-uniform.pprof")
	extrasEvery := flag.Int("extras-every", 0, "give every Nth link extras (two app-store rules, a password hash and a click limit; shared/link Extras), as a file of links with rules and passwords holds them (0: none)")
	child := flag.String("child", "", "internal: run one side (snapshot|map|hog) on -file and report")
	file := flag.String("file", "", "internal: the file a child loads")
	flag.Parse()
	var err error
	switch {
	case *child != "":
		err = runChild(*child, *file, *n, *profile)
	case *servers != "":
		var sizes []int
		switch sizes, err = parseSizes(*servers); {
		case err != nil:
		case *dir == "":
			err = errors.New("-server needs -dir: the files are kept there for the servers to map")
		case *rounds < 1 || *duration <= 0 || *conns < 1:
			err = fmt.Errorf("-server: -rounds %d, -duration %v, -conns %d: want all positive", *rounds, *duration, *conns)
		default:
			err = runServers(serverConfig{sizes: sizes, dir: *dir, rounds: *rounds, duration: *duration, conns: *conns})
		}
	case *scale != "" || *from != "":
		var sizes []int
		if *from == "" {
			sizes, err = parseSizes(*scale)
		}
		if err == nil {
			if *budgetShare <= 0 || *budgetShare > 1 {
				err = fmt.Errorf("-budget-share %v: want a share in (0, 1]", *budgetShare)
			} else if *reuse && *dir == "" {
				err = errors.New("-reuse needs -dir: a temporary folder holds nothing to reuse")
			} else {
				err = runScale(scaleConfig{sizes: sizes, dir: *dir, out: *out, busy: *busy, warm: *warm, reuse: *reuse,
					budgetShare: *budgetShare, budgetFile: *budgetFile, from: *from, commit: *commit, profile: *profile})
			}
		}
	default:
		m := *n <= 20_000_000
		if *withMap != "auto" {
			m, err = strconv.ParseBool(*withMap)
		}
		if err == nil {
			err = run(*n, *dir, *busy, m, *warm, *reuse, *jsonOut, *profile, *extrasEvery)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/snapshot:", err)
		os.Exit(1)
	}
}

// firstID spreads generated codes over the 6-character space the way a
// long-running allocator does.
const firstID = 1_000_000_000

// code is link i's code: 2% custom codes, the rest generated IDs in a run
// with gaps, as segments of several allocators interleave.
func code(dst []byte, i int) []byte {
	if i%50 == 49 {
		return fmt.Appendf(dst, "campaign-%07d", i)
	}
	var b [base62.Length]byte
	_ = base62.Put(b[:], uint64(firstID+i*3))
	return append(dst, b[:]...)
}

// results are one run's figures: the build's, and each side's by name.
type results struct {
	Links     int                           `json:"links"`
	Busy      bool                          `json:"busy"`
	Warm      bool                          `json:"warm"`
	Load      string                        `json:"load_average"`
	BuildSecs float64                       `json:"build_seconds"`
	Reused    bool                          `json:"reused,omitempty"`
	FileBytes int64                         `json:"file_bytes"`
	URLBytes  float64                       `json:"url_bytes_per_link"`
	Sides     map[string]map[string]float64 `json:"sides"`

	// ExtrasEvery: every Nth link has extras (0: none), ExtrasBytes each.
	ExtrasEvery int `json:"extras_every,omitempty"`
	ExtrasBytes int `json:"extras_bytes,omitempty"`
}

func run(n int, dir string, busy, withMap, warm, reuse bool, jsonOut, profile string, extrasEvery int) error {
	if reuse && dir == "" {
		return errors.New("-reuse needs -dir: a temporary folder holds nothing to reuse")
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "edgelink-snapbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := results{Links: n, Busy: busy, Warm: warm, Sides: map[string]map[string]float64{}, ExtrasEvery: extrasEvery}
	// The writer's garbage (a URL string per link) would otherwise grow
	// the heap to twice the 7.5 GB the writer holds at 100M links.
	debug.SetGCPercent(20)
	snapFile, mapFile, err := generate(n, dir, withMap, warm, reuse, &res)
	if err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory() // the writer's memory, before the children load
	fmt.Printf("  build %.1f s, file %.1f MiB (%.1f B/link); raw code+target %.1f B/link\n",
		res.BuildSecs, float64(res.FileBytes)/(1<<20), float64(res.FileBytes)/float64(n), res.URLBytes+6)
	if res.ExtrasEvery > 0 {
		fmt.Printf("  every %d links one with %d bytes of extras (format 4)\n", res.ExtrasEvery, res.ExtrasBytes)
	}
	fmt.Println()

	var hog *exec.Cmd
	if busy {
		if hog, err = startHog(); err != nil {
			return err
		}
		defer func() { _ = hog.Process.Kill(); _ = hog.Wait() }()
	}
	res.Load = loadAverage()
	if res.Sides["snapshot"], err = measureChild("snapshot", snapFile, n, profile); err != nil {
		return err
	}
	if withMap {
		if res.Sides["map"], err = measureChild("map", mapFile, n, ""); err != nil {
			return err
		}
		if res.Sides["compare"], err = measureChild("compare", snapFile+","+mapFile, n, ""); err != nil {
			return err
		}
	}
	printRun(os.Stdout, &res)
	if jsonOut != "" {
		b, _ := json.MarshalIndent(&res, "", "  ")
		return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// generate writes the snapshot file with the project's writer, as
// control's builder does, and the baseline's code<TAB>url file, without
// holding the links themselves.
func generate(n int, dir string, withMap, warm, reuse bool, res *results) (snapFile, mapFile string, err error) {
	snapFile = filepath.Join(dir, snapshot.ObjectName(uint64(n)))
	if reuse && !withMap {
		if ok, err := reused(snapFile, n, warm, res); ok || err != nil {
			return snapFile, "", err
		}
	}
	fmt.Printf("generating %d links with realistic targets...\n", n)
	start := time.Now()
	rng := rand.New(rand.NewPCG(1, 1))
	var w snapshot.Writer
	w.Grow(n)
	f := bloom.NewWithEstimates(uint(n), 0.01)
	var tsv *bufio.Writer
	if withMap {
		mapFile = filepath.Join(dir, "links.tsv")
		tf, err := os.Create(mapFile)
		if err != nil {
			return "", "", err
		}
		defer tf.Close()
		tsv = bufio.NewWriterSize(tf, 1<<20)
	}
	var urlBytes int
	var buf []byte
	extras, err := sampleExtras()
	if err != nil {
		return "", "", err
	}
	res.ExtrasBytes = len(extras)
	for i := range n {
		buf = code(buf[:0], i)
		l := snapshot.Link{Code: string(buf), URL: dataset.Target(rng), RedirectType: link.DefaultRedirect, Status: link.Active}
		if res.ExtrasEvery > 0 && i%res.ExtrasEvery == 0 {
			l.Extras = extras
		}
		if err := w.Add(l); err != nil {
			return "", "", err
		}
		f.Add(buf)
		urlBytes += len(l.URL)
		if tsv != nil {
			tsv.WriteString(l.Code)
			tsv.WriteByte('\t')
			tsv.WriteString(l.URL)
			tsv.WriteByte('\n')
		}
	}
	if tsv != nil {
		if err := tsv.Flush(); err != nil {
			return "", "", err
		}
	}
	var bb bytes.Buffer
	if _, err := f.WriteTo(&bb); err != nil {
		return "", "", err
	}
	f = nil
	out, err := os.Create(snapFile)
	if err != nil {
		return "", "", err
	}
	defer out.Close()
	h := snapshot.Header{ChangeVersion: uint64(n), StreamSeq: uint64(n), BloomCount: uint64(n), CreatedMillis: time.Now().UnixMilli()}
	platform := []link.Domain{{ID: link.DefaultDomain, Host: "platform.invalid", CodeMode: link.CodesSequential, Status: link.DomainActive}}
	if err := w.Write(out, h, nil, platform, func(link.DomainID) ([]byte, uint64) { return bb.Bytes(), uint64(n) }); err != nil {
		return "", "", err
	}
	if err := out.Sync(); err != nil {
		return "", "", err
	}
	if !warm {
		// As an edge does with a download before verifying it: the file
		// is read back from the disk under the huge-page hint.
		if err := snapshot.DropPageCache(out); err != nil {
			return "", "", err
		}
	}
	st, err := out.Stat()
	if err != nil {
		return "", "", err
	}
	res.BuildSecs = time.Since(start).Seconds()
	res.FileBytes = st.Size()
	res.URLBytes = float64(urlBytes) / float64(n)
	return snapFile, mapFile, nil
}

// sampleExtras are the extras -extras-every gives links: an app link's
// two store rules, a password hash and a click limit.
func sampleExtras() ([]byte, error) {
	return link.AppendExtras(nil, &link.Extras{
		Rules: []link.Rule{
			{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/us/app/example/id1234567890"},
			{Devices: []link.Device{link.DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=com.example.app"},
		},
		PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs",
		MaxClicks:    100_000,
	})
}

// reused reports whether path holds a snapshot of n links that an
// earlier run wrote (its header checked, its entries left to the child's
// verification) and fills res from it; a file of another size is built
// again. The URL figure is not known without reading every target.
func reused(path string, n int, warm bool, res *results) (bool, error) {
	s, err := snapshot.OpenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reuse %s: %w", path, err)
	}
	if s.Header.Entries != uint64(n) {
		fmt.Printf("%s holds %d links, not %d: building it again\n", path, s.Header.Entries, n)
		return false, nil
	}
	res.FileBytes, res.Reused = int64(s.Size()), true
	s = nil
	runtime.GC() // unmaps it before the child maps it again
	if !warm {
		f, err := os.Open(path)
		if err != nil {
			return false, err
		}
		defer f.Close()
		if err := snapshot.DropPageCache(f); err != nil {
			return false, err
		}
	}
	fmt.Printf("reusing %s (%d links)\n", path, n)
	return true, nil
}

// startHog starts a child that spins on one core until killed.
func startHog() (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-child", "hog")
	cmd.Stderr = os.Stderr
	return cmd, cmd.Start()
}

// measureChild runs one side in a fresh process and parses its key=value
// report; "ready_ms" is measured here, from exec to the child's ready line.
func measureChild(kind, file string, n int, profile string) (map[string]float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-child", kind, "-file", file, "-links", strconv.Itoa(n), "-profile", profile)
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

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func printRun(w *os.File, res *results) {
	s, m := res.Sides["snapshot"], res.Sides["map"]
	fmt.Fprintf(w, "%d links, load average %s%s%s\n\n", res.Links, res.Load, map[bool]string{true: ", one core spinning (-busy)"}[res.Busy],
		map[bool]string{true: ", file left in the page cache (-warm)", false: ", file read from the disk"}[res.Warm])
	fmt.Fprintf(w, "| | snapshot | Go map | ratio |\n|---|---|---|---|\n")
	row := func(name, unit string, key string, scale float64) {
		a := s[key] * scale
		if m == nil {
			fmt.Fprintf(w, "| %s | %.1f %s | | |\n", name, a, unit)
			return
		}
		b := m[key] * scale
		fmt.Fprintf(w, "| %s | %.1f %s | %.1f %s | %.3g× |\n", name, a, unit, b, unit, a/b)
	}
	row("process start to ready", "ms", "ready_ms", 1)
	row("RSS per link, all pages touched", "B", "rss_per_link", 1)
	row("heap per link", "B", "heap_per_link", 1)
	row("lookup, uniform over all links (CPU)", "ns", "lookup_ns", 1)
	if c := res.Sides["compare"]; c != nil {
		fmt.Fprintf(w, "| lookup, both in one process, alternating | %.1f ns | %.1f ns | %.3g× |\n",
			c["snapshot_ns"], c["map_ns"], c["snapshot_ns"]/c["map_ns"])
	}
	fmt.Fprintf(w, "\nsnapshot side: RSS at ready %.1f B/link; background verification %.0f ms; %.0f%% of the file in huge pages; "+
		"handler %.0f ns CPU per hit (Zipf 1.1), %.0f ns (uniform), bare fasthttp %.0f ns; "+
		"%.0f hits per CPU-second (Zipf 1.1), %.0f (uniform); 0 allocs: %v; %.0f major page faults while measuring\n",
		s["ready_rss_per_link"], s["verify_ms"], 100*s["huge_share"], s["zipf_ns"], s["uniform_ns"], s["bare_ns"],
		1e9/s["zipf_ns"], 1e9/s["uniform_ns"], s["serve_allocs"] == 0, s["major_faults"])
}
