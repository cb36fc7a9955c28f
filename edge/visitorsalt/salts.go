// Package visitorsalt holds the edge's copy of the daily visitor salts
// (shared/clicks SaltBucket) and computes a click's visitor hash with the
// salt of the click's UTC day.
//
// Control writes one random 256-bit salt per UTC day ahead of time and
// deletes it after the day (and a grace) ends; every edge watches the
// bucket, so a visitor (client address and User-Agent) hashes the same on
// every edge within a day, and differently on another day. Once a day's
// salt is deleted, no hash of that day can be recomputed from an address:
// the edge keeps salts in memory only (never on disk), and drops a day's
// once its grace has passed by its own clock even if it never saw the
// deletion (cut off from NATS). A click whose day has no salt gets no
// visitor hash (0); clickpub counts it.
package visitorsalt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/clicks"
)

// Buckets is the part of JetStream Salts uses.
type Buckets interface {
	KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error)
	CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error)
}

// Config tunes Salts. Zero values take the defaults noted.
type Config struct {
	// Now is the edge's clock, for dropping salts whose grace has passed
	// (default time.Now).
	Now func() time.Time
	// Retry is the pause after the bucket could not be opened or watched
	// (default 5s).
	Retry time.Duration
	// Prune is how often salts past their grace are dropped by the clock,
	// besides when the bucket says they were deleted (default 1 minute).
	Prune time.Duration
	Log   *slog.Logger
}

// dayKey is the two SipHash keys derived from one day's salt: ua for
// User-Agent digests, v for visitor hashes. gen tells keys apart over the
// process's life, so a digest made under one key is never used with
// another (were a day's salt ever replaced).
type dayKey struct {
	day      int64 // days since 1970-01-01 UTC
	gen      uint64
	ua0, ua1 uint64
	v0, v1   uint64
}

// Salts is the edge's set of visitor salts. Hash is safe for concurrent
// use with Run and never blocks or allocates; one Run at a time. The zero
// value is not usable: call New.
type Salts struct {
	js  Buckets
	cfg Config

	keys atomic.Pointer[[]dayKey] // immutable once stored; sorted by day
	mu   sync.Mutex               // serializes changes of keys
	gen  uint64                   // the last dayKey.gen given; under mu

	// Received counts salts taken from the bucket; Dropped, salts removed
	// (deleted in the bucket or past their grace); Refused, bucket entries
	// that were not a salt (a malformed key or value), ignored;
	// WatchFailures, times the bucket could not be opened or watched.
	Received, Dropped, Refused, WatchFailures atomic.Uint64
}

// New returns salts read from js's SaltBucket once Run runs.
func New(js Buckets, cfg Config) *Salts {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 5 * time.Second
	}
	if cfg.Prune <= 0 {
		cfg.Prune = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Salts{js: js, cfg: cfg}
	s.keys.Store(&[]dayKey{})
	return s
}

const dayMillis = 24 * 60 * 60 * 1000

// dayOf is the UTC day number of a Unix millisecond time, floored.
func dayOf(atMillis int64) int64 {
	d := atMillis / dayMillis
	if atMillis%dayMillis < 0 {
		d--
	}
	return d
}

// The visitor hash of a click is SipHash-2-4, under the visitor key of
// the click's UTC day, of the client's 16-byte address (IPv4 as
// IPv4-mapped) followed by the User-Agent's digest: SipHash-2-4, under the
// day's User-Agent key, of its first clicks.MaxUserAgentLen bytes. Two
// steps, so that a publisher caching digests per User-Agent (a few dozen
// make most traffic) hashes three words a click instead of the whole
// User-Agent; a PRF of a PRF's output under independent keys is still a
// PRF of (address, User-Agent), up to a 2^-64 chance that two User-Agents
// share a digest.

// UserAgent is userAgent's digest under the key of the UTC day holding
// atMillis, with the tag Visitor needs to use it: false when the edge
// holds no salt for that day. A digest may be kept and reused for clicks
// of the same day with the same User-Agent. It does not allocate.
func (s *Salts) UserAgent(atMillis int64, userAgent []byte) (tag, digest uint64, ok bool) {
	k, ok := s.key(dayOf(atMillis))
	if !ok {
		return 0, 0, false
	}
	if len(userAgent) > clicks.MaxUserAgentLen {
		userAgent = userAgent[:clicks.MaxUserAgentLen]
	}
	return k.gen, sipHash24(k.ua0, k.ua1, nil, userAgent), true
}

// Visitor is the visitor hash of a click at atMillis from client whose
// User-Agent digest UserAgent gave with tag. It reports false, and 0, when
// the tag is not the key of the click's day (a digest kept from another
// day: ask UserAgent again), the day's salt is gone, or client is not a
// usable address. A hash is never 0 (0 means unknown on the wire): the one
// input in 2^64 that hashes to 0 gets 1. It does not allocate.
func (s *Salts) Visitor(tag, digest uint64, atMillis int64, client netip.Addr) (uint64, bool) {
	if !client.IsValid() || client.IsUnspecified() {
		return 0, false
	}
	k, ok := s.key(dayOf(atMillis))
	if !ok || k.gen != tag {
		return 0, false
	}
	var in [24]byte
	a := client.Unmap().As16()
	copy(in[:16], a[:])
	binary.LittleEndian.PutUint64(in[16:], digest)
	if h := sipHash24(k.v0, k.v1, in[:], nil); h != 0 {
		return h, true
	}
	return 1, true
}

// Hash is the visitor hash of a click at atMillis from client with
// userAgent (UserAgent, then Visitor), and false when there is none.
func (s *Salts) Hash(atMillis int64, client netip.Addr, userAgent []byte) (uint64, bool) {
	tag, d, ok := s.UserAgent(atMillis, userAgent)
	if !ok {
		return 0, false
	}
	return s.Visitor(tag, d, atMillis, client)
}

// key is day's keys, if the edge holds its salt.
func (s *Salts) key(day int64) (dayKey, bool) {
	for _, k := range *s.keys.Load() {
		if k.day == day {
			return k, true
		}
	}
	return dayKey{}, false
}

// Days lists the UTC days whose salt the edge holds, oldest first.
func (s *Salts) Days() []time.Time {
	keys := *s.keys.Load()
	out := make([]time.Time, len(keys))
	for i, k := range keys {
		out[i] = time.UnixMilli(k.day * dayMillis).UTC()
	}
	return out
}

// Len is how many days' salts the edge holds.
func (s *Salts) Len() int { return len(*s.keys.Load()) }

// keyOf derives a day's two SipHash keys from its salt. SipHash takes
// 128 bits; hashing the whole 256-bit salt under a label makes every bit
// of it count and keeps these keys apart from any other use of the salt.
func keyOf(day int64, gen uint64, salt []byte) dayKey {
	h := sha256.New()
	h.Write([]byte("edgelink visitor hash v1\x00"))
	h.Write(salt)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	le := binary.LittleEndian
	return dayKey{day: day, gen: gen, v0: le.Uint64(sum[:8]), v1: le.Uint64(sum[8:16]),
		ua0: le.Uint64(sum[16:24]), ua1: le.Uint64(sum[24:])}
}

// change stores keys with day's salt set (salt non-nil) or removed.
func (s *Salts) change(day int64, salt []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.keys.Load()
	next := make([]dayKey, 0, len(old)+1)
	for _, k := range old {
		if k.day != day {
			next = append(next, k)
		}
	}
	if salt != nil {
		s.gen++
		next = append(next, keyOf(day, s.gen, salt))
		slices.SortFunc(next, func(a, b dayKey) int { return int(a.day - b.day) })
	} else if len(next) < len(old) {
		s.Dropped.Add(1)
	}
	s.keys.Store(&next)
}

// wanted reports whether the edge may still hash with day's salt at now:
// until clicks.SaltGrace after the day ends.
func wanted(day int64, now time.Time) bool {
	return now.Before(time.UnixMilli(day * dayMillis).Add(24*time.Hour + clicks.SaltGrace))
}

// prune drops the salts whose grace has passed by the edge's clock.
func (s *Salts) prune() {
	now := s.cfg.Now()
	for _, k := range *s.keys.Load() {
		if !wanted(k.day, now) {
			s.change(k.day, nil)
		}
	}
}

// Run watches the bucket until ctx is done, creating it if no control has
// yet. It retries (every Retry) while NATS cannot be reached, keeping the
// salts it holds, and drops salts past their grace every Prune.
func (s *Salts) Run(ctx context.Context) error {
	prune := time.NewTicker(s.cfg.Prune)
	defer prune.Stop()
	for ctx.Err() == nil {
		err := s.watch(ctx, prune.C)
		if ctx.Err() != nil {
			break
		}
		s.WatchFailures.Add(1)
		s.cfg.Log.Warn("visitor salts: watch failed; retrying", "err", err, "retry", s.cfg.Retry)
		retry := time.NewTimer(s.cfg.Retry)
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				waiting = false
			case <-prune.C:
				s.prune()
			case <-retry.C:
				waiting = false
			}
		}
		retry.Stop()
	}
	return nil
}

// watch opens the bucket and applies its entries until ctx is done or the
// watch ends; it returns why it ended.
func (s *Salts) watch(ctx context.Context, prune <-chan time.Time) error {
	octx, cancel := context.WithTimeout(ctx, s.cfg.Retry)
	kv, err := s.js.KeyValue(octx, clicks.SaltBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// Create only: an existing one is control's to configure.
		_, err = s.js.CreateStream(octx, clicks.SaltStreamConfig())
		if err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = s.js.KeyValue(octx, clicks.SaltBucket)
		}
	}
	cancel()
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", clicks.SaltBucket, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", clicks.SaltBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune:
			s.prune()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("watch of bucket %s ended", clicks.SaltBucket)
			}
			if e != nil { // nil marks the end of the initial values
				s.apply(e)
			}
		}
	}
}

// apply takes one bucket entry: a day's salt put, or deleted.
func (s *Salts) apply(e jetstream.KeyValueEntry) {
	d, err := clicks.SaltDay(e.Key())
	if err != nil {
		s.Refused.Add(1)
		s.cfg.Log.Warn("visitor salts: ignored an entry that is not a day's", "key", e.Key())
		return
	}
	day := dayOf(d.UnixMilli())
	if e.Operation() != jetstream.KeyValuePut {
		s.change(day, nil)
		return
	}
	if len(e.Value()) != clicks.SaltLen {
		s.Refused.Add(1)
		s.cfg.Log.Warn("visitor salts: ignored a salt of the wrong length", "day", e.Key(), "bytes", len(e.Value()))
		return
	}
	if !wanted(day, s.cfg.Now()) {
		return // a deletion on its way: never hash with it
	}
	s.Received.Add(1)
	s.change(day, e.Value())
}
