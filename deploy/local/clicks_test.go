package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/internal/stack/allinone"
	"github.com/edgelink/edgelink/shared/clicks"
)

// childEnv makes the test binary, re-executed, run one component in a
// process of its own: "roller|<database url>|<nats url>" or
// "edge|<nats url>|<snapshot dir>".
const childEnv = "EDGELINK_CLICKS_CHILD"

// TestClicksChild is not a test of its own: the tests below re-execute the
// test binary to run a click roller or an edge that they kill with
// SIGKILL. Without the environment variable it does nothing.
func TestClicksChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	parts := strings.Split(spec, "|")
	ctx := context.Background()
	var err error
	switch parts[0] {
	case "roller":
		var pool *pgxpool.Pool
		if pool, err = pgxpool.New(ctx, parts[1]); err == nil {
			var nc *nats.Conn
			if nc, err = nats.Connect(parts[2], nats.MaxReconnects(-1)); err == nil {
				js, _ := jetstream.New(nc)
				// Small transactions, so a kill is likely to land in one.
				err = clickroll.New(postgres.New(pool), js, clickroll.Config{Batch: 4, FetchWait: 50 * time.Millisecond}).Run(ctx)
			}
		}
	case "edge":
		cfg := edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: parts[1], Name: "edge-killed", SnapshotDir: parts[2],
			// Only full batches are published (a flush is due in an hour),
			// so clicks sit in the buffer; the counters go out every 100ms.
			ClickBuffer: 4096, ClickFlushEvery: time.Hour, ClickReportEvery: 100 * time.Millisecond,
			OnListen: func(a net.Addr) { fmt.Printf("listening %s\n", a) }}
		err = edgeserver.Run(ctx, cfg)
	}
	t.Fatalf("child %s stopped: %v", parts[0], err)
}

// listening is what an edge child prints once it listens.
var listening = regexp.MustCompile(`listening (\S+)`)

// startChild re-executes the test binary to run spec's component in a
// process of its own (stack.Process: its own group, killed with us); for an
// edge it returns once it listens, with its address. It is SIGKILLed when
// the test ends.
func startChild(t *testing.T, spec string) (*stack.Process, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClicksChild$")
	cmd.Env = append(os.Environ(), childEnv+"="+spec)
	p, err := stack.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.CleanupWith(t, strings.SplitN(spec, "|", 2)[0])
	if !strings.HasPrefix(spec, "edge|") {
		return p, ""
	}
	m, err := p.WaitFor(context.Background(), listening, 2*time.Minute)
	if err != nil {
		t.Fatalf("edge child: %v", err)
	}
	return p, m[1]
}

// request kinds the load cycles through: a Referer and a User-Agent each,
// and what the edge should make of them.
var kinds = []struct {
	referer, ua, host, device string
	bot                       bool
}{
	{"https://t.co/AbC", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", "t.co", "mobile", false},
	{"https://www.Google.com/search?q=secret", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", "www.google.com", "desktop", false},
	{"", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "", "unknown", true},
	{"android-app://com.slack/", "Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", "com.slack", "tablet", false},
	{"https://user:pw@news.example:8443/p?id=1", "curl/8.5.0", "news.example", "unknown", true},
}

// tally is what the load sent, per code and per breakdown value.
type tally struct {
	mu                 sync.Mutex
	sent               atomic.Int64
	perCode, botsCode  map[string]int64
	referrers, devices map[string]int64
}

func newTally() *tally {
	return &tally{perCode: map[string]int64{}, botsCode: map[string]int64{}, referrers: map[string]int64{}, devices: map[string]int64{}}
}

// load sends n redirects to edgeURL over conc connections, cycling through
// codes and kinds, and tallies every 3xx answered.
func load(t *testing.T, edgeURL string, codes []string, n, conc int, tl *tally) {
	t.Helper()
	client := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: conc},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				code, k := codes[i%len(codes)], kinds[(i/len(codes))%len(kinds)]
				req, _ := http.NewRequest("GET", edgeURL+"/"+code, nil)
				req.Header.Set("User-Agent", k.ua)
				if k.referer != "" {
					req.Header.Set("Referer", k.referer)
				}
				res, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusFound {
					errs <- fmt.Errorf("GET /%s answered %d", code, res.StatusCode)
					return
				}
				tl.sent.Add(1)
				tl.mu.Lock()
				tl.perCode[code]++
				if k.bot {
					tl.botsCode[code]++
				}
				tl.referrers[k.host]++
				tl.devices[k.device]++
				tl.mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

type clickDB struct {
	pool *pgxpool.Pool
	st   *postgres.Store
	js   jetstream.JetStream
}

func (d *clickDB) query(t *testing.T, sql string, args ...any) map[string]int64 {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

// caughtUp waits until the stored position reaches the stream's last
// message, within a bound.
func (d *clickDB) caughtUp(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var pos, last uint64
	if err := stack.Poll(ctx, "click roller caught up", 60*time.Second, func() bool {
		_, info := streamInfo(t, d.js, clicks.Stream)
		var err error
		if pos, err = d.st.ClickPosition(ctx, clicks.Stream); err != nil {
			t.Fatal(err)
		}
		last = info.State.LastSeq
		return pos >= last
	}); err != nil {
		t.Fatalf("roller at %d, stream at %d: %v", pos, last, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	stack.Eventually(t, what, 60*time.Second, cond)
}

// TestClicksExactlyOnceThroughKills is issue 9's proof on real PostgreSQL
// and NATS JetStream: 100,000 redirects through an edge while the click
// roller, in a process of its own, is SIGKILLed and restarted twice; then
// an edge killed with clicks in its buffer.
//
// The roller runs as a re-executed child killed with SIGKILL rather than a
// goroutine stopped early: a kill is the crash it must survive. Its
// PostgreSQL connection drops mid-transaction (the server rolls back), its
// NATS connection drops with messages delivered and not acknowledged, and
// nothing of it gets to run a deferred cleanup, which no in-process stop
// can imitate.
func TestClicksExactlyOnceThroughKills(t *testing.T) {
	var edge *edgeserver.Edge
	r := allinone.New(t, allinone.Options{
		Control: func(c *controlserver.Config) { c.NoClickRollup = true },
		Edge:    func(c *edgeserver.Config) { c.OnStart = func(e *edgeserver.Edge) { edge = e } },
	}).Ready
	ctx := context.Background()
	pool := dbPool(t, r)
	_, js := stack.External(r.NATSURL).Client(t)
	db := &clickDB{pool: pool, st: postgres.New(pool), js: js}

	var codes []string
	for i := range 20 {
		status, body := create(t, r, fmt.Sprintf(`{"url": "https://example.com/%d"}`, i))
		if status != http.StatusCreated {
			t.Fatalf("create: %d %v", status, body)
		}
		codes = append(codes, body["code"].(string))
	}
	for _, c := range codes {
		if status, _ := waitRedirect(t, r, c); status != http.StatusFound {
			t.Fatalf("%s answered %d", c, status)
		}
	}

	rollerSpec := "roller|" + r.DatabaseURL + "|" + r.NATSURL
	roller, _ := startChild(t, rollerSpec)
	// The redirects above were clicks too: start from what they left.
	waitFor(t, "edge buffer drained", func() bool { return edge.Clicks.Buffered() == 0 })
	db.caughtUp(t)
	rollups := func(sql string, args ...any) map[string]int64 {
		m := db.query(t, sql, args...)
		for k, v := range db.query(t, strings.Replace(sql, "FROM ", "FROM base_", 1), args...) {
			m[k] -= v
		}
		return m
	}
	for _, tbl := range []string{"link_clicks_daily", "link_click_breakdown_daily"} {
		if _, err := pool.Exec(ctx, "CREATE TABLE base_"+tbl+" AS SELECT * FROM "+tbl); err != nil {
			t.Fatal(err)
		}
	}
	baseRecorded, basePublished := edge.Clicks.Recorded.Load(), edge.Clicks.Published.Load()
	const total = 100_000
	tl := newTally()
	loaded := make(chan struct{})
	go func() { defer close(loaded); load(t, r.EdgeURL, codes, total, 8, tl) }()
	for _, at := range []int64{30_000, 65_000} {
		// The load's pace is the machine's: on a busy one (the gate beside
		// the suite, under -race) 35,000 redirects can take minutes.
		stack.Eventually(t, "load progress", 10*time.Minute, func() bool { return tl.sent.Load() >= at })
		before, _ := db.st.ClickPosition(ctx, clicks.Stream)
		roller.Kill()
		after, _ := db.st.ClickPosition(ctx, clicks.Stream)
		t.Logf("roller SIGKILLed after %d redirects at stream position %d (then %d); restarting", tl.sent.Load(), before, after)
		roller, _ = startChild(t, rollerSpec)
	}
	<-loaded
	if t.Failed() {
		return
	}
	// The edge publishes what it holds within FlushEvery.
	waitFor(t, "edge buffer drained", func() bool {
		return edge.Clicks.Buffered() == 0 && edge.Clicks.Recorded.Load()-baseRecorded == total
	})
	db.caughtUp(t)

	published, dropped := edge.Clicks.Published.Load()-basePublished, edge.Clicks.Dropped.Load()
	got := rollups(`SELECT code, sum(clicks)::bigint FROM link_clicks_daily GROUP BY code`)
	var sum int64
	for _, n := range got {
		sum += n
	}
	t.Logf("sent %d redirects; edge published %d clicks, dropped %d; rollups hold %d", tl.sent.Load(), published, dropped, sum)
	if sum != total-int64(dropped) || int64(published) != sum {
		t.Fatalf("rollups hold %d clicks; edges sent %d and counted %d dropped: want exactly %d", sum, total, dropped, total-int64(dropped))
	}
	if dropped == 0 {
		bots := rollups(`SELECT code, sum(bot_clicks)::bigint FROM link_clicks_daily GROUP BY code`)
		for _, c := range codes {
			if got[c] != tl.perCode[c] || bots[c] != tl.botsCode[c] {
				t.Errorf("%s: %d clicks (%d bots) rolled up; %d (%d) sent", c, got[c], bots[c], tl.perCode[c], tl.botsCode[c])
			}
		}
		for dim, want := range map[string]map[string]int64{"referrer": tl.referrers, "device": tl.devices} {
			have := rollups(`SELECT value, sum(clicks)::bigint FROM link_click_breakdown_daily WHERE dimension = $1 GROUP BY value`, dim)
			for k, v := range have {
				if v == 0 {
					delete(have, k)
				}
			}
			if fmt.Sprint(have) != fmt.Sprint(want) {
				t.Errorf("%s breakdown %v; sent %v", dim, have, want)
			}
		}
	}

	// An edge killed with clicks in its buffer.
	edgeChild, edgeAddr := startChild(t, "edge|"+r.NATSURL+"|"+t.TempDir())
	killedURL := "http://" + edgeAddr
	waitFor(t, "killed-to-be edge serving", func() bool {
		status, _, err := stack.Follow(killedURL, codes[0])
		return err == nil && status == http.StatusFound
	})
	sources := func() map[string]int64 {
		return db.query(t, `SELECT k, v FROM click_sources, LATERAL (VALUES ('offered', offered), ('dropped', dropped), ('applied', applied)) x (k, v) WHERE edge = 'edge-killed'`)
	}
	// The probe above was a redirect too: count it in.
	var probes int64
	waitFor(t, "probe clicks reported", func() bool { probes = sources()["offered"]; return probes > 0 })
	killedTally := newTally()
	const sentToKilled = 5000
	load(t, killedURL, codes, sentToKilled-int(probes), 1, killedTally)
	// Every 1,024th click triggers a flush of what is buffered then; what
	// comes after the last one waits for a flush an hour away. The
	// counters report every 100ms.
	waitFor(t, "killed edge's counters reported", func() bool { return sources()["offered"] == sentToKilled })
	db.caughtUp(t)
	if s := sources(); s["applied"] < 4096 || s["applied"] >= sentToKilled {
		t.Fatalf("before the kill: %v; want at least 4096 applied and some clicks still buffered", s)
	}
	edgeChild.Kill()
	db.caughtUp(t)
	s := sources()
	lost := sentToKilled - s["applied"]
	t.Logf("edge SIGKILLed after %d redirects: %d clicks applied, %d lost with its buffer (4096 slots), %d counted dropped", sentToKilled, s["applied"], lost, s["dropped"])
	if lost <= 0 || lost > 4096 {
		t.Errorf("lost %d clicks; want some (they were buffered), at most the buffer, 4096", lost)
	}
	// The loss is visible in control: offered − dropped − applied.
	a := client(r).Do(ctx, "GET", "/api/v1/stats", "")
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	var stats struct {
		Totals  map[string]int64 `json:"totals"`
		Service map[string]any   `json:"service"`
	}
	if err := json.Unmarshal(a.Body, &stats); err != nil {
		t.Fatalf("stats: %v: %s", err, a)
	}
	if u := stats.Service["unaccounted_clicks"].(float64); int64(u) != lost {
		t.Errorf("stats API: unaccounted_clicks %v; want the %d the killed edge lost", u, lost)
	}
	var inDB int64
	if err := pool.QueryRow(ctx, `SELECT sum(clicks)::bigint FROM link_clicks_daily`).Scan(&inDB); err != nil {
		t.Fatal(err)
	}
	if h := stats.Totals["human_clicks"] + stats.Totals["bot_clicks"]; h != inDB {
		t.Errorf("stats API: %d clicks in all; the rollups hold %d", h, inDB)
	}
	if lat := stats.Service["latency"].(map[string]any); lat["samples"].(float64) == 0 {
		t.Errorf("stats API: no latency samples from the edges: %v", lat)
	} else {
		t.Logf("redirect service time on the edges: %v", lat)
	}
}
