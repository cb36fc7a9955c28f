package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/bench/dataset"
	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// The clicks scenario's processes, each a subcommand of this binary so its
// CPU is counted apart: `suite clickgen` records clicks through the edge's
// own recorder (edge/clickpub) at a fixed rate and publishes them to the
// suite's JetStream as an edge does; `suite clickroll` is control's click
// roller (control/clickroll) alone; `suite clickraw` replays the same
// stream range as the baselines: a bare consumer (fetch and ack) and a
// plain pgx upsert of the same aggregates. The scenario is in clicks.go.

// genEdge is the edge name the generator publishes as: its clicks are
// told apart from the real edge's by it (click_sources, the edge breakdown).
const genEdge = "clickgen"

// genProgress is a line `suite clickgen` prints every second and once at
// the end (Done), as JSON.
type genProgress struct {
	At        int64 `json:"at"` // Unix nanoseconds
	Offered   int64 `json:"offered"`
	Published int64 `json:"published"`
	Dropped   int64 `json:"dropped"`
	Done      bool  `json:"done,omitempty"`
	// Filled at the end: what the rollups must hold.
	Boot       string           `json:"boot,omitempty"`
	LastRecord int64            `json:"last_record,omitempty"` // Unix nanoseconds of the last click recorded
	Known      int64            `json:"known,omitempty"`
	Unknown    int64            `json:"unknown,omitempty"`
	Bots       int64            `json:"bots,omitempty"` // on known codes
	Breakdown  map[string]int64 `json:"breakdown,omitempty"`
}

// A visitor's browser as an edge sees it: the raw User-Agent, and how
// often it comes.
type weighted struct {
	value  string
	weight int
}

// userAgents are real-looking User-Agents of a marketing campaign's
// visitors: phones first (in-app browsers among them), desktops, a
// tablet, a TV, the link-preview bots of the networks a link is shared on,
// and the odd empty or library UA.
var userAgents = []weighted{
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", 26},
	{"Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36", 20},
	{"Mozilla/5.0 (Linux; Android 13; V2227A Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/107.0.5304.141 Mobile Safari/537.36 XWEB/5061 MMWEBSDK/20230504 MicroMessenger/8.0.37.2380(0x2800253D) WeChat/arm64 Weixin NetType/WIFI Language/zh_CN ABI/arm64", 9},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/458.0.0.31.98;FBBV/567183212;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/16.6;FBSS/3;FBCR/;FBID/phone;FBLC/en_US;FBOP/5]", 5},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36", 14},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15", 6},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0", 3},
	{"Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", 4},
	{"Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.5) AppleWebKit/537.36 (KHTML, like Gecko) 85.0.4183.93/6.5 TV Safari/537.36", 1},
	{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 2},
	{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", 3},
	{"Twitterbot/1.0", 1},
	{"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", 1},
	{"WhatsApp/2.23.20.0", 2},
	{"curl/8.5.0", 1},
	{"okhttp/4.12.0", 1},
	{"", 1},
}

// referers are what the campaign's links are clicked from: none (apps,
// mail clients, typed), search, social networks and messengers, webmail,
// and a long tail of blogs (tailReferrers distinct hosts).
var referers = []weighted{
	{"", 34},
	{"https://www.google.com/", 12},
	{"https://t.co/Xq2b9LmQ1z", 9},
	{"https://m.facebook.com/", 7},
	{"https://l.instagram.com/?u=https%3A%2F%2Fexample.com&e=AT0", 6},
	{"https://mail.google.com/mail/u/0/", 5},
	{"https://www.linkedin.com/feed/", 4},
	{"https://www.baidu.com/link?url=Zx81Kp", 4},
	{"https://weixin.qq.com/", 4},
	{"https://www.reddit.com/r/deals/comments/1abc/", 3},
	{"https://outlook.live.com/mail/0/inbox", 2},
	{"https://news.ycombinator.com/item?id=40123456", 1},
	{"tail", 9}, // one of tailReferrers blog hosts
}

const tailReferrers = 2000

// choice is one User-Agent or Referer the generator sends, with what the
// roller must count for it (classified once, as the recorder does).
type choice struct {
	raw []byte
	key string // the breakdown value it counts as: "device=…" or "referrer=…"
	bot bool
}

// picker draws a weighted choice in O(1): a table of indices, one per unit
// of weight.
type picker []int

func newPicker(ws []weighted) picker {
	var p picker
	for i, w := range ws {
		for range w.weight {
			p = append(p, i)
		}
	}
	return p
}

func (p picker) pick(r *rand.Rand) int { return p[r.IntN(len(p))] }

// choices are the User-Agents and Referers as the generator draws them;
// the referrer "tail" stands for tailReferrers blog hosts, appended after
// the named ones.
func choices() (uas, refs []choice) {
	for _, w := range userAgents {
		dev, bot := clicks.Classify([]byte(w.value))
		uas = append(uas, choice{raw: []byte(w.value), key: "device=" + dev.String(), bot: bot})
	}
	var host [clicks.MaxReferrerLen]byte
	add := func(raw string) {
		refs = append(refs, choice{raw: []byte(raw), key: "referrer=" + string(clicks.ReferrerHost(host[:], []byte(raw)))})
	}
	for _, w := range referers {
		add(w.value) // "tail" itself is never sent
	}
	for i := range tailReferrers {
		add(fmt.Sprintf("https://blog-%d.example-news.net/2026/11/campaign-review", i))
	}
	return uas, refs
}

// clickGen is `suite clickgen`: clicks at -rate for -duration through the
// edge's recorder, on codes drawn from the links file (Zipf, s=1.1, with
// -unknown of random codes that are no link).
func clickGen(args []string) error {
	fs := flag.NewFlagSet("clickgen", flag.ContinueOnError)
	natsURL := fs.String("nats", "", "NATS URL")
	links := fs.String("links", "", "links file: code TAB url per line")
	rate := fs.Int("rate", 50_000, "clicks per second")
	d := fs.Duration("duration", 60*time.Second, "how long")
	unknown := fs.Float64("unknown", 0.01, "share of clicks on codes that are no link")
	seed := fs.Uint64("seed", 1, "seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rate <= 0 || *d <= 0 || *unknown < 0 || *unknown >= 1 {
		return errors.New("clickgen: want -rate > 0, -duration > 0 and 0 <= -unknown < 1")
	}
	var codes, urls []string
	if err := readLinks(*links, func(c, u string) { codes, urls = append(codes, c), append(urls, u) }); err != nil {
		return err
	}
	if len(codes) < 2 {
		return errors.New("clickgen: want at least 2 links")
	}
	sample := dataset.Sample(codes, urls, dataset.SampleConfig{Requests: 1 << 20, S: 1.1, Unknown: *unknown, Seed: *seed})
	type draw struct {
		code   []byte
		status int
		known  bool
	}
	draws := make([]draw, len(sample))
	for i, q := range sample {
		c := []byte(q.Path[1:])
		// A link's redirect type is its own: most 302, some 301 and 307.
		h := fnv.New32a()
		h.Write(c)
		status := 302
		switch h.Sum32() % 100 {
		case 0, 1:
			status = 301
		case 2:
			status = 307
		}
		draws[i] = draw{code: c, status: status, known: q.Status != 404}
	}
	uas, refs := choices()
	uaPick, refPick, tail := newPicker(userAgents), newPicker(referers), len(referers)-1
	uaN, refN, statusN := make([]int64, len(uas)), make([]int64, len(refs)), map[int]int64{}

	nc, err := nats.Connect(*natsURL, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	rec := clickpub.New(js, clickpub.Config{Edge: genEdge})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- rec.Run(ctx) }()

	out := json.NewEncoder(os.Stdout)
	final := genProgress{Done: true, Boot: rec.Boot(), Breakdown: map[string]int64{}}
	r := rand.New(rand.NewPCG(*seed, 0xc11c))
	start := time.Now()
	next := start.Add(time.Second)
	var sent int64
	for {
		now := time.Now()
		el := now.Sub(start)
		if el >= *d {
			break
		}
		at := now.UnixMilli()
		for due := int64(el.Seconds() * float64(*rate)); sent < due; sent++ {
			q := &draws[int(sent)%len(draws)]
			ua, ref := uaPick.pick(r), refPick.pick(r)
			if ref == tail {
				ref = len(referers) + r.IntN(tailReferrers)
			}
			c := r.IntN(1 << 20) // a client of a million
			rec.Record(link.DefaultDomain, q.code, refs[ref].raw, uas[ua].raw, netip.AddrFrom4([4]byte{10, byte(c >> 16), byte(c >> 8), byte(c)}), q.status, 0, at)
			if !q.known {
				final.Unknown++
				continue
			}
			final.Known++
			uaN[ua]++
			refN[ref]++
			statusN[q.status]++
		}
		if now.After(next) {
			next = next.Add(time.Second)
			_ = out.Encode(genProgress{At: now.UnixNano(), Offered: sent, Published: int64(rec.Published.Load()), Dropped: int64(rec.Dropped.Load())})
		}
		time.Sleep(time.Millisecond)
	}
	final.LastRecord = time.Now().UnixNano()
	cancel() // Run publishes what is queued, then returns
	for i, n := range uaN {
		final.Breakdown[uas[i].key] += n
		if uas[i].bot {
			final.Bots += n
		}
	}
	for i, n := range refN {
		final.Breakdown[refs[i].key] += n
	}
	for st, n := range statusN {
		final.Breakdown[fmt.Sprint("status=", st)] += n
	}
	if err := <-ran; err != nil {
		return err
	}
	final.At, final.Offered = time.Now().UnixNano(), sent
	final.Published, final.Dropped = int64(rec.Published.Load()), int64(rec.Dropped.Load())
	return out.Encode(final)
}

// clickRoll is `suite clickroll`: control's click roller alone, until
// SIGTERM; it prints "ready" once connected and its counters as JSON when
// it stops.
func clickRoll(args []string) error {
	fs := flag.NewFlagSet("clickroll", flag.ContinueOnError)
	dsn := fs.String("database", "", "PostgreSQL URL")
	natsURL := fs.String("nats", "", "NATS URL")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the roller here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return err
	}
	nc, err := nats.Connect(*natsURL, nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	roller := clickroll.New(postgres.New(pool), js, clickroll.Config{})
	fmt.Println("ready")
	err = roller.Run(ctx)
	_ = json.NewEncoder(os.Stdout).Encode(roller.Stats())
	return err
}

// rawResult is what `suite clickraw` prints.
type rawResult struct {
	Messages, Clicks, Bytes, Rows, Txs int64
	Seconds                            float64
}

// clickRaw is `suite clickraw`: the baselines over stream sequences -from
// to -to. "consume" fetches and acknowledges them (the floor of consuming
// the stream); "upsert" also decodes each fetch, sums it per link and day
// and per link, day, dimension and value in Go maps, and upserts those
// rows with one plain unnest INSERT … ON CONFLICT per table, a
// transaction per fetch, into tables of the rollups' first layout: the
// same aggregates without the roller's link lookups, tenants, sources and
// position.
func clickRaw(args []string) error {
	fs := flag.NewFlagSet("clickraw", flag.ContinueOnError)
	mode := fs.String("mode", "consume", "consume or upsert")
	dsn := fs.String("database", "", "PostgreSQL URL (upsert)")
	natsURL := fs.String("nats", "", "NATS URL")
	from := fs.Uint64("from", 1, "first stream sequence")
	to := fs.Uint64("to", 0, "last stream sequence")
	batch := fs.Int("batch", 64, "messages per fetch (and per transaction)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to < *from || (*mode != "consume" && *mode != "upsert") {
		return errors.New("clickraw: want -mode consume|upsert and -from <= -to")
	}
	ctx := context.Background()
	nc, err := nats.Connect(*natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var w *rawWriter
	if *mode == "upsert" {
		pool, err := pgxpool.New(ctx, *dsn)
		if err != nil {
			return err
		}
		defer pool.Close()
		if w, err = newRawWriter(ctx, pool); err != nil {
			return err
		}
		defer w.drop(ctx)
	}
	// A pull consumer acknowledging all up to the last of each fetch, as
	// the roller's does.
	cons, err := js.CreateConsumer(ctx, clicks.Stream, jetstream.ConsumerConfig{Name: "clickraw-" + *mode,
		AckPolicy: jetstream.AckAllPolicy, MaxAckPending: *batch * 4, InactiveThreshold: time.Minute,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: *from})
	if err != nil {
		return err
	}
	defer func() { _ = js.DeleteConsumer(ctx, clicks.Stream, "clickraw-"+*mode) }()
	var res rawResult
	start := time.Now()
	for seq := *from - 1; seq < *to; {
		b, err := cons.Fetch(min(*batch, int(*to-seq)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return err
		}
		var msgs [][]byte
		var last jetstream.Msg
		for m := range b.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			seq, last = meta.Sequence.Stream, m
			msgs = append(msgs, m.Data())
			res.Messages++
			res.Bytes += int64(len(m.Data()))
		}
		if last == nil {
			return fmt.Errorf("clickraw: no messages after %d: %v", seq, b.Error())
		}
		if w != nil {
			n, rows, err := w.write(ctx, msgs)
			if err != nil {
				return err
			}
			res.Clicks, res.Rows, res.Txs = res.Clicks+n, res.Rows+rows, res.Txs+1
		}
		if err := last.Ack(); err != nil {
			return err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}

// lineWriter hands every complete line written to it to fn; for a child's
// stdout.
type lineWriter struct {
	buf []byte
	fn  func(line []byte)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.fn(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// rawWriter is the plain upsert baseline: the two rollup tables as schema
// 004 made them (same columns and keys, default storage), in a schema of
// their own, dropped at the end. They stay so when the roller's own tables
// change: the baseline is the obvious way to store the same aggregates.
type rawWriter struct{ pool *pgxpool.Pool }

func newRawWriter(ctx context.Context, pool *pgxpool.Pool) (*rawWriter, error) {
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS bench_raw CASCADE;
CREATE SCHEMA bench_raw;
CREATE TABLE bench_raw.link_clicks_daily (
    code text COLLATE "C" NOT NULL, day date NOT NULL, clicks bigint NOT NULL, bot_clicks bigint NOT NULL,
    PRIMARY KEY (code, day));
CREATE TABLE bench_raw.link_click_breakdown_daily (
    code text COLLATE "C" NOT NULL, day date NOT NULL, dimension text NOT NULL, value text NOT NULL,
    clicks bigint NOT NULL, bot_clicks bigint NOT NULL,
    PRIMARY KEY (code, day, dimension, value))`)
	if err != nil {
		return nil, fmt.Errorf("scratch tables: %w", err)
	}
	return &rawWriter{pool: pool}, nil
}

func (w *rawWriter) drop(ctx context.Context) {
	_, _ = w.pool.Exec(ctx, `DROP SCHEMA IF EXISTS bench_raw CASCADE`)
}

type rawKey struct {
	code, dim, value string
	day              time.Time
}

// write sums msgs and upserts the sums in one transaction; it returns the
// clicks and the rows written.
func (w *rawWriter) write(ctx context.Context, msgs [][]byte) (n, rows int64, err error) {
	links := map[rawKey]*[2]int64{}
	dims := map[rawKey]*[2]int64{}
	add := func(m map[rawKey]*[2]int64, k rawKey, bot bool) {
		c := m[k]
		if c == nil {
			c = new([2]int64)
			m[k] = c
		}
		c[0]++
		if bot {
			c[1]++
		}
	}
	for _, data := range msgs {
		b, err := clicks.Decode(data)
		if err != nil || b.Latency != nil {
			continue
		}
		for _, c := range b.Clicks {
			k := rawKey{code: c.Code, day: c.Day()}
			add(links, k, c.Bot)
			for _, dv := range [4][2]string{{"referrer", c.Referrer}, {"device", c.Device.String()},
				{"status", fmt.Sprint(c.Status)}, {"edge", b.Edge}} {
				k.dim, k.value = dv[0], dv[1]
				add(dims, k, c.Bot)
			}
			n++
		}
	}
	arrays := func(m map[rawKey]*[2]int64) (codes, ds, vs []string, days []time.Time, cs, bs []int64) {
		for k, c := range m {
			codes, ds, vs, days = append(codes, k.code), append(ds, k.dim), append(vs, k.value), append(days, k.day)
			cs, bs = append(cs, c[0]), append(bs, c[1])
		}
		return
	}
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback(ctx)
	codes, _, _, days, cs, bs := arrays(links)
	if _, err := tx.Exec(ctx, `INSERT INTO bench_raw.link_clicks_daily AS t (code, day, clicks, bot_clicks)
SELECT * FROM unnest($1::text[], $2::date[], $3::bigint[], $4::bigint[])
ON CONFLICT (code, day) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks`,
		codes, days, cs, bs); err != nil {
		return 0, 0, err
	}
	codes, ds, vs, days, cs, bs := arrays(dims)
	if _, err := tx.Exec(ctx, `INSERT INTO bench_raw.link_click_breakdown_daily AS t (code, day, dimension, value, clicks, bot_clicks)
SELECT * FROM unnest($1::text[], $2::date[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])
ON CONFLICT (code, day, dimension, value) DO UPDATE SET clicks = t.clicks + excluded.clicks, bot_clicks = t.bot_clicks + excluded.bot_clicks`,
		codes, days, ds, vs, cs, bs); err != nil {
		return 0, 0, err
	}
	return n, int64(len(links) + len(dims)), tx.Commit(ctx)
}

// clickCommand runs one of the clicks scenario's subcommands.
func clickCommand(name string, args []string) error {
	switch name {
	case "clickgen":
		return clickGen(args)
	case "clickroll":
		return clickRoll(args)
	default:
		return clickRaw(args)
	}
}
