// Package clickpub records a click per redirect, and the redirect's service
// time, off the response path, and publishes both to the CLICKS stream:
// clicks in batches, service times as a histogram delta every ReportEvery.
//
// The request handler only copies bytes into a fixed, lock-free ring (and
// adds one to a histogram bucket); classifying the User-Agent, cutting the
// referrer down to its host, looking the client's country up (Config.Geo)
// and hashing the visitor (Config.Visitors) happen in the publisher
// goroutine, so neither the time nor an allocation of it lands on a
// redirect.
//
// The client's address is in the ring only until its click is encoded
// (then zeroed): it is never published, logged or kept. What a click
// carries is shared/clicks' format.
package clickpub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// Publisher is the part of JetStream the recorder uses.
type Publisher interface {
	Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// Geo gives the country of a client address: ISO 3166-1 alpha-2, upper
// case, and whether it knows one. It must not allocate or block (a table
// in memory: edge/geo); the publisher asks it once per click.
type Geo interface {
	Lookup(netip.Addr) ([2]byte, bool)
}

// Visitors gives a click's visitor hash (edge/visitorsalt: keyed by the
// salt of the click's UTC day) in two steps, so the publisher can keep the
// first, a User-Agent's digest, beside the User-Agent's classes: UserAgent
// digests userAgent under the key of the day holding atMillis (false: no
// salt for that day); Visitor hashes client with a digest UserAgent gave
// with tag (false: none, or the tag is not the key of this click's day,
// and UserAgent must be asked again). Neither may allocate or block.
type Visitors interface {
	UserAgent(atMillis int64, userAgent []byte) (tag, digest uint64, ok bool)
	Visitor(tag, digest uint64, atMillis int64, client netip.Addr) (uint64, bool)
}

// Config sizes the recorder. Zero values take the defaults noted.
type Config struct {
	Edge string // the edge's name: the subject suffix
	// Geo (optional) gives clicks their country; without it every click's
	// is unknown.
	Geo Geo
	// Visitors (optional) gives clicks their visitor hash; without it
	// every click's is unknown.
	Visitors Visitors
	// Buffer is how many clicks may wait for publishing, rounded up to a
	// power of two (default 65,536, about 29 MiB: a click keeps up to 128
	// bytes of Referer, 256 of User-Agent and the client's address); past
	// it clicks are dropped and counted.
	Buffer int
	// Batch is the most clicks in one message (default 1024).
	Batch int
	// FlushEvery bounds how long a click waits (default 200ms).
	FlushEvery time.Duration
	// ReportEvery is how often the service-time histogram and the click
	// counters are published (default 10s); they are also published on
	// shutdown.
	ReportEvery time.Duration
	// PublishTimeout bounds one publish (default 2s).
	PublishTimeout time.Duration
	Log            *slog.Logger
}

// rawReferrerLen is how much of a Referer a click keeps: enough for a
// scheme, credentials and a 64-byte host, which is all that is published.
const rawReferrerLen = 128

// slot is one click in the ring. seq is the ring's turn protocol (Vyukov's
// bounded queue): a producer owns the slot when seq equals its position,
// and hands it to the publisher by storing position+1.
type slot struct {
	seq    atomic.Uint64
	at     int64
	domain link.DomainID
	status uint16
	rule   uint8 // which target served: 0 the link's own, i its i-th rule
	nCode  uint8
	nRef   uint8
	nUA    uint16
	client [16]byte // IPv4 as IPv4-mapped; zero: none (never a real client)
	code   [link.MaxCodeLen]byte
	ref    [rawReferrerLen]byte
	ua     [clicks.MaxUserAgentLen]byte
}

// Recorder is a fixed ring of clicks and a histogram of service times.
// Record and Timed never block, allocate or do I/O; Run publishes. Safe for
// concurrent use; one Run at a time.
type Recorder struct {
	cfg  Config
	pub  Publisher
	boot string
	ring []slot
	mask uint64
	tail atomic.Uint64 // next position a producer takes: clicks accepted so far
	head uint64        // next position to publish; Run's own
	kick chan struct{}
	full atomic.Uint64 // clicks refused because the ring was full

	latency [clicks.Buckets]atomic.Uint64

	batch, reports uint64 // message counters for ids; Run's own
	seed           maphash.Seed
	uaCache        []uaClass // Run's own
	pending        []byte    // a histogram message not yet published
	pendingID      string

	// Recorded counts clicks accepted into the ring (refreshed by Run at
	// every flush, so it may trail by FlushEvery); Published, clicks
	// stored in the stream; Dropped, clicks lost on the edge: refused by
	// a full ring or in a batch whose publish failed.
	Recorded, Published, Dropped atomic.Uint64
	// Clicks encoded without a country or a visitor hash, by why: NoClient
	// (the handler gave no usable address: neither), NoGeo (no Geo
	// configured), NoCountry (Geo knows no country for the address, or
	// gave an invalid one), NoSalt (Visitors holds no salt for the
	// click's day, or none is configured).
	NoClient, NoGeo, NoCountry, NoSalt atomic.Uint64
}

// New returns a recorder publishing with pub.
func New(pub Publisher, cfg Config) *Recorder {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 1 << 16
	}
	size := 1 << bits.Len(uint(cfg.Buffer-1))
	if cfg.Batch <= 0 {
		cfg.Batch = 1024
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 200 * time.Millisecond
	}
	if cfg.ReportEvery <= 0 {
		cfg.ReportEvery = 10 * time.Second
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r := &Recorder{cfg: cfg, pub: pub, boot: hex.EncodeToString(b[:]), ring: make([]slot, size),
		mask: uint64(size - 1), kick: make(chan struct{}, 1)}
	for i := range r.ring {
		r.ring[i].seq.Store(uint64(i))
	}
	return r
}

// Boot is this recorder's random id: control keeps the click counts of each
// edge process apart by it.
func (r *Recorder) Boot() string { return r.boot }

// Buffered is how many clicks wait in the ring: lost if the process dies
// now.
func (r *Recorder) Buffered() uint64 {
	done := r.Published.Load() + r.Dropped.Load() - r.full.Load()
	accepted := r.tail.Load()
	if done > accepted {
		return 0
	}
	return accepted - done
}

// Record queues a click on code of domain d from client answered with
// status, served by rule (0: the link's own target), at atMillis, keeping
// at most 128 bytes of referer and clicks.MaxUserAgentLen of userAgent,
// or counts it dropped when the ring is full. Codes longer than link.MaxCodeLen are ignored. It never blocks
// or allocates. It implements redirect.ClickRecorder.
func (r *Recorder) Record(d link.DomainID, code, referer, userAgent []byte, client netip.Addr, status int, rule uint8, atMillis int64) {
	if len(code) > link.MaxCodeLen {
		return
	}
	pos := r.tail.Load()
	for {
		s := &r.ring[pos&r.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if !r.tail.CompareAndSwap(pos, pos+1) {
				pos = r.tail.Load()
				continue
			}
			s.at, s.domain, s.status, s.rule = atMillis, d, uint16(status), rule
			s.nCode = uint8(copy(s.code[:], code))
			s.nRef = uint8(copy(s.ref[:], referer))
			s.nUA = uint16(copy(s.ua[:], userAgent))
			s.client = client.Unmap().As16() // the zero Addr gives zeros
			s.seq.Store(pos + 1)
			if (pos+1)%uint64(r.cfg.Batch) == 0 {
				select {
				case r.kick <- struct{}{}:
				default:
				}
			}
			return
		case seq < pos:
			// The slot still holds a click from one lap ago: full.
			r.full.Add(1)
			r.Dropped.Add(1)
			return
		default:
			pos = r.tail.Load() // another producer took pos
		}
	}
}

// RecordLatency counts one redirect's service time.
func (r *Recorder) RecordLatency(d time.Duration) {
	r.latency[clicks.Bucket(uint64(max(d, 0)))].Add(1)
}

// Timed wraps next, counting the service time of every redirect it answers
// (a 3xx): from when fasthttp handed it the request (ctx.Time, read before
// the handler runs) to the handler's end. One clock read and one atomic add
// per request.
func (r *Recorder) Timed(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		next(ctx)
		if s := ctx.Response.StatusCode(); s >= 300 && s < 400 {
			r.RecordLatency(time.Since(ctx.Time()))
		}
	}
}

// Run publishes batches until ctx is done, then flushes what is queued and
// the histogram (bounded by PublishTimeout per message).
func (r *Recorder) Run(ctx context.Context) error {
	flush := time.NewTicker(r.cfg.FlushEvery)
	defer flush.Stop()
	report := time.NewTicker(r.cfg.ReportEvery)
	defer report.Stop()
	buf := make([]byte, 0, 64<<10)
	ensured := false
	// Publishes are bounded by PublishTimeout, not by ctx: a batch taken
	// from the ring when shutdown begins is still published, not dropped.
	pctx := context.WithoutCancel(ctx)
	for {
		select {
		case <-ctx.Done():
			for r.flush(pctx, &buf, &ensured) {
			}
			r.report(pctx, &ensured)
			return nil
		case <-report.C:
			r.report(pctx, &ensured)
			continue // clicks keep their own cadence
		case <-flush.C:
		case <-r.kick:
		}
		for r.flush(pctx, &buf, &ensured) {
		}
	}
}

func (r *Recorder) source() clicks.Source {
	return clicks.Source{Edge: r.cfg.Edge, Boot: r.boot, Offered: r.tail.Load() + r.full.Load(), Dropped: r.Dropped.Load()}
}

// uaClass is a classified User-Agent, by its 64-bit hash, with its
// visitor digest (Visitors.UserAgent) once one was made: tag 0 is none.
type uaClass struct {
	hash        uint64
	agent       clicks.Agent
	ok          bool
	tag, digest uint64
}

const uaCacheSize = 4096

// classify is clicks.ParseUserAgent behind a direct-mapped cache: a few
// dozen User-Agents make most traffic, and hashing one costs a few percent
// of classifying it. A 64-bit hash collision (about 2^-64 per pair) would
// reuse another UA's class: a counting error, never a crash.
func (r *Recorder) classify(ua []byte) *uaClass {
	if r.uaCache == nil {
		r.seed, r.uaCache = maphash.MakeSeed(), make([]uaClass, uaCacheSize)
	}
	h := maphash.Bytes(r.seed, ua)
	c := &r.uaCache[h%uaCacheSize]
	if c.ok && c.hash == h {
		return c
	}
	*c = uaClass{hash: h, agent: clicks.ParseUserAgent(ua), ok: true}
	return c
}

// visitor is the click's visitor hash, with the User-Agent's digest kept
// in its cache entry u: made again only when its day's key changes.
func (r *Recorder) visitor(u *uaClass, ua []byte, atMillis int64, client netip.Addr) (uint64, bool) {
	v := r.cfg.Visitors
	if u.tag != 0 {
		if h, ok := v.Visitor(u.tag, u.digest, atMillis, client); ok {
			return h, true
		}
	}
	tag, digest, ok := v.UserAgent(atMillis, ua)
	if !ok {
		return 0, false
	}
	u.tag, u.digest = tag, digest
	return v.Visitor(tag, digest, atMillis, client)
}

// appendClicks encodes the next n clicks of the ring into b and frees
// their slots. Per click: the User-Agent's classes (cached), the
// referrer's host, the country and the visitor hash; nothing allocates
// but b's growth. What could not be attributed is counted once a batch.
func (r *Recorder) appendClicks(b []byte, n int) []byte {
	var host [clicks.MaxReferrerLen]byte
	var missing [numMissing]uint64
	for range n {
		s := &r.ring[r.head&r.mask]
		ua := s.ua[:s.nUA]
		u := r.classify(ua)
		a := &u.agent
		c := clicks.ClickView{Domain: s.domain, Code: s.code[:s.nCode], At: s.at, Status: s.status,
			Device: a.Device, Bot: a.Bot, Browser: a.Browser, OS: a.OS, Referrer: clicks.ReferrerHost(host[:], s.ref[:s.nRef]),
			Rule: s.rule}
		r.attribute(&c, netip.AddrFrom16(s.client).Unmap(), u, ua, &missing)
		b = clicks.AppendClick(b, c)
		s.client = [16]byte{}            // the address goes no further than this
		s.seq.Store(r.head + r.mask + 1) // free for the next lap
		r.head++
	}
	for i, x := range []*atomic.Uint64{&r.NoClient, &r.NoGeo, &r.NoCountry, &r.NoSalt} {
		if missing[i] != 0 {
			x.Add(missing[i])
		}
	}
	return b
}

// Why a click lacks a country or a visitor hash: indexes of the counts
// appendClicks keeps for a batch.
const (
	missingClient = iota
	missingGeo
	missingCountry
	missingSalt
	numMissing
)

// attribute sets c's country and visitor hash from the client's address,
// counting in missing what it could not set. An address Geo answers with
// anything but two letters is unknown: a batch carrying it would be
// refused whole.
func (r *Recorder) attribute(c *clicks.ClickView, client netip.Addr, u *uaClass, ua []byte, missing *[numMissing]uint64) {
	if client.IsUnspecified() { // the zero slot: no address
		missing[missingClient]++
		return
	}
	switch {
	case r.cfg.Geo == nil:
		missing[missingGeo]++
	default:
		cc, ok := r.cfg.Geo.Lookup(client)
		cc[0], cc[1] = upper(cc[0]), upper(cc[1])
		if ok && cc != [2]byte{} && clicks.ValidCountry(cc) {
			c.Country = cc
		} else {
			missing[missingCountry]++
		}
	}
	if r.cfg.Visitors != nil {
		if h, ok := r.visitor(u, ua, c.At, client); ok {
			c.Visitor = h
			return
		}
	}
	missing[missingSalt]++
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// flush publishes one batch, reporting whether it published a full one
// (more may be queued).
func (r *Recorder) flush(ctx context.Context, buf *[]byte, ensured *bool) bool {
	r.Recorded.Store(r.tail.Load())
	n := 0
	for n < r.cfg.Batch && r.ring[(r.head+uint64(n))&r.mask].seq.Load() == r.head+uint64(n)+1 {
		n++
	}
	if n == 0 {
		return false
	}
	b := r.appendClicks(clicks.AppendHeader((*buf)[:0], r.source(), n), n)
	*buf = b

	r.batch++
	// The message id makes a retried batch count once; the boot id keeps
	// a restarted edge from colliding with its earlier life.
	id := r.cfg.Edge + "-" + r.boot + "-" + strconv.FormatUint(r.batch, 10)
	if err := r.publish(ctx, ensured, b, id); err != nil {
		// At-most-once: a publish that timed out may still be stored, so
		// the drop count can overstate the loss, never understate it.
		r.Dropped.Add(uint64(n))
		r.cfg.Log.Warn("click batch not published; dropped", "clicks", n, "err", err)
		return false
	}
	r.Published.Add(uint64(n))
	return n == r.cfg.Batch
}

// report publishes the histogram counted since the last report, with the
// click counters. A report that fails is kept and retried first next time
// under the same message id, so service times are neither lost nor counted
// twice across a NATS outage.
func (r *Recorder) report(ctx context.Context, ensured *bool) {
	if r.pending != nil {
		if err := r.publish(ctx, ensured, r.pending, r.pendingID); err != nil {
			r.cfg.Log.Warn("latency report not published; will retry", "err", err)
			return
		}
		r.pending = nil
	}
	var h clicks.Histogram
	for i := range r.latency {
		h[i] = r.latency[i].Swap(0)
	}
	r.reports++
	r.pending = clicks.AppendLatency(nil, r.source(), time.Now().UnixMilli(), &h)
	r.pendingID = r.cfg.Edge + "-" + r.boot + "-l" + strconv.FormatUint(r.reports, 10)
	if err := r.publish(ctx, ensured, r.pending, r.pendingID); err != nil {
		r.cfg.Log.Warn("latency report not published; will retry", "err", err)
		return
	}
	r.pending = nil
}

func (r *Recorder) publish(ctx context.Context, ensured *bool, b []byte, id string) error {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PublishTimeout)
	defer cancel()
	if !*ensured {
		// Create only: a stream that exists is control's to configure (its
		// replicas in a cluster), and an update from here would undo that.
		if _, err := r.pub.CreateStream(pctx, clicks.StreamConfig()); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return err
		}
		*ensured = true
	}
	_, err := r.pub.Publish(pctx, clicks.Subject(r.cfg.Edge), b, jetstream.WithMsgID(id))
	return err
}
