package relayfeedbench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgelink/edgelink/bench/measure"
	"github.com/edgelink/edgelink/bench/report"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

var (
	memLinks   = flag.Int("links", 1_000_000, "BenchmarkStreamFedMemory: links in the bulk load")
	memResults = flag.String("results", "", "BenchmarkStreamFedMemory: directory for the report and chart (none: the log only)")
)

func benchURL(id int) string {
	return "https://example.com/landing?utm_source=bench&utm_campaign=winter&n=" + strconv.Itoa(id)
}

// sample is one reading of a child's resident memory.
type sample struct {
	at  time.Duration
	rss int64
}

// child is one edge process of the benchmark.
type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
	start   time.Time
}

// startChild runs this test binary as the edge (child_test.go) in mode and
// samples its resident memory every 10 ms until stopped.
func startChild(b *testing.B, mode, natsURL, file string, links int) *child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "RELAYFEED_NATS="+natsURL,
		"RELAYFEED_FILE="+file, "RELAYFEED_LINKS="+strconv.Itoa(links))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16), stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.close() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() {
		defer close(c.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			_, rss := measure.Usage([]int{cmd.Process.Pid})
			c.mu.Lock()
			c.samples = append(c.samples, sample{time.Since(c.start), rss})
			c.mu.Unlock()
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	}()
	return c
}

// await returns the child's next line with prefix, failing after within.
func (c *child) await(b *testing.B, prefix string, within time.Duration) string {
	b.Helper()
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				b.Fatalf("the edge exited before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			b.Fatalf("the edge did not say %q within %v", prefix, within)
		}
	}
}

// mark is the time since start and the samples so far.
func (c *child) mark() (time.Duration, []sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.start), append([]sample(nil), c.samples...)
}

func (c *child) close() {
	select {
	case <-c.stop:
		return
	default:
	}
	close(c.stop)
	<-c.done
	c.stdin.Close()
	_ = c.cmd.Wait()
}

func peak(ss []sample) int64 {
	var p int64
	for _, s := range ss {
		p = max(p, s.rss)
	}
	return p
}

// BenchmarkStreamFedMemory is issue 19's first figure: an edge's resident
// memory after a bulk load of -links links arrives by the change stream
// (outbox → control's relay → JetStream → the edge's feed → its overlay),
// sampled every 10 ms during the load, against the same edge booted from a
// snapshot of the same links in the same run. Each edge is a process of
// its own (this binary, child_test.go), with the store, hint and feed an
// edge wires.
//
//	go test ./bench/relayfeed -run '^$' -bench StreamFedMemory -benchtime 1x -timeout 30m -results bench/results
func BenchmarkStreamFedMemory(b *testing.B) {
	n := *memLinks
	for b.Loop() {
		ctx := context.Background()
		pool := pgtest.Pool(b)
		srv := natstest.Start(b)
		_, js := srv.Connect(b)
		fill := time.Now()
		rows := make([][]any, n)
		for i := range rows {
			code, err := base62.Encode(uint64(i + 1))
			if err != nil {
				b.Fatal(err)
			}
			rows[i] = []any{int64(i + 1), "link", code, benchURL(i + 1), int16(302), "active"}
		}
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"outbox"}, []string{"version", "kind", "code", "url", "redirect_type", "status"},
			pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
		rows = nil
		if _, err := pool.Exec(ctx, `SELECT setval('change_version_seq', $1)`, n); err != nil {
			b.Fatal(err)
		}
		b.Logf("outbox filled with %d links in %v", n, time.Since(fill).Round(time.Millisecond))

		// Stream-fed: the edge is up and following the stream before the
		// relay publishes the load, as when a bulk create lands.
		stream := startChild(b, "stream", srv.ClientURL(), "", n)
		stream.await(b, "started", time.Minute)
		relay := outbox.New(postgres.New(pool), js, outbox.Config{})
		rctx, cancel := context.WithCancel(ctx)
		relayDone := make(chan error, 1)
		go func() { relayDone <- relay.Run(rctx) }()
		loadStart, _ := stream.mark()
		stream.await(b, "applied", 30*time.Minute)
		loadEnd, during := stream.mark()
		cancel()
		<-relayDone
		streamServed := stream.await(b, "served", 10*time.Minute)
		_, streamAll := stream.mark()
		stream.close()

		info, err := js.Stream(ctx, linkevent.Stream)
		if err != nil {
			b.Fatal(err)
		}
		st, err := info.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		links := make([]snapshot.Link, n)
		for i := range links {
			code, _ := base62.Encode(uint64(i + 1))
			links[i] = snapshot.Link{Code: code, URL: benchURL(i + 1), RedirectType: 302, Status: link.Active}
		}
		data, err := snapshottest.Build(links, snapshot.Header{ChangeVersion: uint64(n), StreamSeq: st.State.LastSeq}, nil)
		if err != nil {
			b.Fatal(err)
		}
		links = nil
		file := filepath.Join(b.TempDir(), "links.snap")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			b.Fatal(err)
		}
		fileBytes := len(data)
		data = nil

		snap := startChild(b, "snapshot", srv.ClientURL(), file, n)
		snap.await(b, "applied", 10*time.Minute)
		snap.await(b, "served", 10*time.Minute)
		_, snapAll := snap.mark()
		snap.close()

		streamEnd := streamAll[len(streamAll)-1].rss
		snapEnd := snapAll[len(snapAll)-1].rss
		var load []sample
		for _, s := range during {
			if s.at >= loadStart {
				load = append(load, s)
			}
		}
		res := memResult{
			links: n, fileBytes: fileBytes, load: loadEnd - loadStart,
			streamEnd: streamEnd, streamPeak: peak(load), streamAllPeak: peak(streamAll), snapEnd: snapEnd, snapPeak: peak(snapAll),
			served: strings.TrimPrefix(streamServed, "served "), streamSeries: streamAll, snapSeries: snapAll,
		}
		b.Log("\n" + res.markdown())
		b.ReportMetric(float64(streamEnd)/float64(snapEnd), "stream/snapshot-RSS")
		b.ReportMetric(float64(res.streamAllPeak)/float64(snapEnd), "peak/snapshot-RSS")
		if *memResults != "" {
			if err := res.write(*memResults); err != nil {
				b.Fatal(err)
			}
		}
	}
}

type memResult struct {
	links, fileBytes                                        int
	load                                                    time.Duration
	streamEnd, streamPeak, streamAllPeak, snapEnd, snapPeak int64
	served                                                  string
	streamSeries, snapSeries                                []sample
}

func (r memResult) markdown() string {
	mib := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }
	per := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/float64(r.links)) }
	ratio := func(b int64) string { return fmt.Sprintf("%.2f×", float64(b)/float64(r.snapEnd)) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "| edge, %d links | RSS MiB | B/link | × snapshot-booted |\n|---|--:|--:|--:|\n", r.links)
	fmt.Fprintf(&sb, "| booted from a snapshot, every link read | %s | %s | 1.00× |\n", mib(r.snapEnd), per(r.snapEnd))
	fmt.Fprintf(&sb, "| fed by the stream, every link read | %s | %s | %s |\n", mib(r.streamEnd), per(r.streamEnd), ratio(r.streamEnd))
	fmt.Fprintf(&sb, "| fed by the stream, highest during the load (%v) | %s | %s | %s |\n", r.load.Round(time.Millisecond), mib(r.streamPeak), per(r.streamPeak), ratio(r.streamPeak))
	fmt.Fprintf(&sb, "| fed by the stream, highest at any moment | %s | %s | %s |\n", mib(r.streamAllPeak), per(r.streamAllPeak), ratio(r.streamAllPeak))
	fmt.Fprintf(&sb, "\nThe snapshot file: %.1f B/link. The stream-fed edge's overlay: %s.\n", float64(r.fileBytes)/float64(r.links), r.served)
	return sb.String()
}

// write puts the report and a chart of both edges' memory over time into
// dir, named by date and commit.
func (r memResult) write(dir string) error {
	name := time.Now().UTC().Format("2006-01-02") + "-" + commit() + "-overlay"
	png := name + ".png"
	var xs []float64
	series := []report.Series{{Name: "fed by the stream"}, {Name: "booted from a snapshot"}}
	// One x axis for both: the stream-fed edge's samples, the snapshot
	// edge's value at the same time since its start (it is shorter:
	// held at its last value).
	for i, s := range r.streamSeries {
		xs = append(xs, s.at.Seconds())
		series[0].Values = append(series[0].Values, float64(s.rss)/(1<<20))
		j := min(i, len(r.snapSeries)-1)
		series[1].Values = append(series[1].Values, float64(r.snapSeries[j].rss)/(1<<20))
	}
	if err := report.LineChart(filepath.Join(dir, png), fmt.Sprintf("edge RSS, %d links", r.links), "seconds since the edge started", "RSS MiB", xs, series, false); err != nil {
		return err
	}
	md := fmt.Sprintf("# Stream-fed links against snapshot links (issue 19, item 1)\n\n"+
		"`go test ./bench/relayfeed -run '^$' -bench StreamFedMemory -benchtime 1x -links %d -results bench/results`"+
		" at %s. Two edge processes in one run, one after the other: one fed the links by the stream while control's relay"+
		" publishes them from the outbox, one booted from a snapshot of the same links; each then reads every link once."+
		" RSS sampled every 10 ms. Load average when written: %s (of %d CPUs): on a busy machine the figures are indicative.\n\n%s\n![RSS over time](%s)\n",
		r.links, commit(), loadAverage(), runtime.NumCPU(), r.markdown(), png)
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644)
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
