package visitorsalt

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
)

var (
	day1   = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	day2   = day1.Add(24 * time.Hour)
	alice  = netip.MustParseAddr("203.0.113.7")
	bob    = netip.MustParseAddr("2001:db8::7")
	iphone = []byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")
)

// clock is a settable time for Config.Now.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func (c *clock) now() time.Time   { return time.Unix(0, c.ns.Load()).UTC() }

// bucket creates the salt bucket as control would and returns it.
func bucket(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := createBucket(js)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// putSalt writes day's salt as control does (only where none was ever
// written) and returns it.
func putSalt(t *testing.T, kv jetstream.KeyValue, day time.Time, fill byte) []byte {
	t.Helper()
	salt := bytes.Repeat([]byte{fill}, clicks.SaltLen)
	if _, err := kv.Update(context.Background(), clicks.SaltKey(day), salt, 0); err != nil {
		t.Fatal(err)
	}
	return salt
}

// run starts s.Run and stops it at cleanup.
func run(t *testing.T, s *Salts) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func waitDays(t *testing.T, s *Salts, n int) {
	t.Helper()
	poll.Until(t, "salts held", 10*time.Second, func() bool { return s.Len() == n })
}

// TestTwoEdgesHashAlike: two edges watching one bucket hash a visitor
// alike within a day, and differently on another day, or for another
// address or User-Agent; before any salt, and for an unusable address,
// there is no hash.
func TestTwoEdgesHashAlike(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	clk := newClock(day1.Add(time.Hour))
	a := New(js, Config{Now: clk.now, Retry: 50 * time.Millisecond})
	b := New(js, Config{Now: clk.now, Retry: 50 * time.Millisecond})
	at := day1.Add(13 * time.Hour).UnixMilli()
	if h, ok := a.Hash(at, alice, iphone); ok || h != 0 {
		t.Fatalf("hash before any salt: %#x, %v", h, ok)
	}
	run(t, a) // creates the bucket: no control has yet
	run(t, b)
	poll.Until(t, "the bucket created by an edge", 10*time.Second, func() bool {
		_, err := js.KeyValue(context.Background(), clicks.SaltBucket)
		return err == nil
	})
	kv, err := js.KeyValue(context.Background(), clicks.SaltBucket)
	if err != nil {
		t.Fatal(err)
	}
	putSalt(t, kv, day1, 1)
	putSalt(t, kv, day2, 2)
	waitDays(t, a, 2)
	waitDays(t, b, 2)

	ha, okA := a.Hash(at, alice, iphone)
	hb, okB := b.Hash(day1.Add(23*time.Hour+59*time.Minute).UnixMilli(), alice, iphone)
	if !okA || !okB || ha != hb || ha == 0 {
		t.Fatalf("same visitor, same day, two edges: %#x (%v) and %#x (%v)", ha, okA, hb, okB)
	}
	// IPv4 and its IPv4-mapped IPv6 form are one client.
	if h, _ := b.Hash(at, netip.AddrFrom16(alice.As16()), iphone); h != ha {
		t.Fatalf("IPv4-mapped address hashed %#x; the plain one %#x", h, ha)
	}
	distinct := map[uint64]string{ha: "alice day 1"}
	for name, h := range map[string]uint64{
		"alice day 2":     must(t)(a.Hash(day2.UnixMilli(), alice, iphone)),
		"bob day 1":       must(t)(a.Hash(at, bob, iphone)),
		"alice curl":      must(t)(a.Hash(at, alice, []byte("curl/8.0"))),
		"alice no UA":     must(t)(a.Hash(at, alice, nil)),
		"another address": must(t)(a.Hash(at, netip.MustParseAddr("203.0.113.8"), iphone)),
	} {
		if other, ok := distinct[h]; ok {
			t.Fatalf("%s hashed like %s: %#x", name, other, h)
		}
		distinct[h] = name
	}
	for _, bad := range []netip.Addr{{}, netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		if h, ok := a.Hash(at, bad, iphone); ok || h != 0 {
			t.Fatalf("address %v hashed %#x, %v", bad, h, ok)
		}
	}
	if _, ok := a.Hash(day2.Add(24*time.Hour).UnixMilli(), alice, iphone); ok {
		t.Fatal("a day without a salt hashed")
	}
}

func must(t *testing.T) func(uint64, bool) uint64 {
	return func(h uint64, ok bool) uint64 {
		t.Helper()
		if !ok || h == 0 {
			t.Fatalf("no hash")
		}
		return h
	}
}

// TestDeletedSaltIsGone: a salt deleted in the bucket (as control deletes
// it: purged) is dropped by the edge at once; one the edge never hears is
// deleted is dropped by its own clock once the grace has passed.
func TestDeletedSaltIsGone(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	kv := bucket(t, js)
	putSalt(t, kv, day1, 1)
	putSalt(t, kv, day2, 2)
	clk := newClock(day2.Add(time.Hour))
	s := New(js, Config{Now: clk.now, Prune: 10 * time.Millisecond})
	run(t, s)
	waitDays(t, s, 2)
	at := day1.Add(time.Hour).UnixMilli()
	if _, ok := s.Hash(at, alice, iphone); !ok {
		t.Fatal("day 1 not hashed")
	}
	if err := kv.Purge(context.Background(), clicks.SaltKey(day1)); err != nil {
		t.Fatal(err)
	}
	waitDays(t, s, 1)
	if h, ok := s.Hash(at, alice, iphone); ok || h != 0 {
		t.Fatalf("a deleted day still hashes: %#x", h)
	}
	// Day 2's deletion never comes (control down): the edge's clock
	// drops it when its grace ends, not before.
	clk.set(day2.Add(24*time.Hour + clicks.SaltGrace - time.Second))
	if _, ok := s.Hash(day2.UnixMilli(), alice, iphone); !ok {
		t.Fatal("day 2 dropped before its grace ended")
	}
	clk.set(day2.Add(24*time.Hour + clicks.SaltGrace))
	waitDays(t, s, 0)
	if s.Dropped.Load() != 2 {
		t.Fatalf("dropped %d salts; want 2", s.Dropped.Load())
	}
	// A salt put for a day already past its grace is never taken.
	putSalt(t, kv, day1.Add(-24*time.Hour), 9)
	putSalt(t, kv, day2.Add(24*time.Hour), 3)
	waitDays(t, s, 1)
	if d := s.Days(); len(d) != 1 || !d[0].Equal(day2.Add(24*time.Hour)) {
		t.Fatalf("holds %v; want only day 3", d)
	}
}

// TestRefusesWhatIsNotASalt: entries with a key that names no day or a
// value of the wrong length are ignored and counted; the edge keeps
// serving the others.
func TestRefusesWhatIsNotASalt(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	kv := bucket(t, js)
	ctx := context.Background()
	if _, err := kv.Put(ctx, "not-a-day", bytes.Repeat([]byte{1}, clicks.SaltLen)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, clicks.SaltKey(day1), []byte("short")); err != nil {
		t.Fatal(err)
	}
	putSalt(t, kv, day2, 2)
	s := New(js, Config{Now: newClock(day1).now})
	run(t, s)
	waitDays(t, s, 1)
	poll.Until(t, "two refused", 10*time.Second, func() bool { return s.Refused.Load() == 2 })
	if _, ok := s.Hash(day1.UnixMilli(), alice, iphone); ok {
		t.Fatal("a short salt was used")
	}
}

// TestKeepsSaltsThroughAnOutage: with NATS gone the edge keeps hashing with
// the salts it holds, and its watch takes a salt written after NATS is
// back (a NATS restart: the server's store survives, its consumers do not).
func TestKeepsSaltsThroughAnOutage(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	kv := bucket(t, js)
	putSalt(t, kv, day1, 1)
	s := New(js, Config{Now: newClock(day1).now, Retry: 20 * time.Millisecond})
	run(t, s)
	waitDays(t, s, 1)
	want, _ := s.Hash(day1.UnixMilli(), alice, iphone)
	ns.Stop()
	poll.Until(t, "the client disconnected", 10*time.Second, func() bool { return !nc.IsConnected() })
	if h, ok := s.Hash(day1.UnixMilli(), alice, iphone); !ok || h != want {
		t.Fatalf("during the outage: %#x, %v; want %#x", h, ok, want)
	}
	ns.Restart(t)
	natstest.WaitConnected(t, nc, 20*time.Second)
	putSalt(t, kv, day2, 2)
	// The watch's ordered consumer notices the restart by its missed
	// heartbeats and recreates itself: about 20 s here.
	poll.Until(t, "day 2's salt after the outage", 90*time.Second, func() bool { return s.Len() == 2 })
}

// TestStartsWithNATSDown: an edge that boots while NATS is unreachable
// counts its failed attempts, hashes nothing, and takes the salts once
// NATS is back.
func TestStartsWithNATSDown(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	kv := bucket(t, js)
	putSalt(t, kv, day1, 1)
	ns.Stop()
	poll.Until(t, "the client disconnected", 10*time.Second, func() bool { return !nc.IsConnected() })
	s := New(js, Config{Now: newClock(day1).now, Retry: 20 * time.Millisecond})
	run(t, s)
	poll.Until(t, "a failed attempt", 30*time.Second, func() bool { return s.WatchFailures.Load() > 0 })
	if _, ok := s.Hash(day1.UnixMilli(), alice, iphone); ok {
		t.Fatal("hashed without a salt")
	}
	ns.Restart(t)
	waitDays(t, s, 1)
}

// TestHashIsSafeAndAllocatesNothing: Hash runs concurrently with salts
// changing (under -race) and allocates nothing.
func TestHashIsSafeAndAllocatesNothing(t *testing.T) {
	s := New(nil, Config{Now: newClock(day1).now})
	s.change(dayOf(day1.UnixMilli()), bytes.Repeat([]byte{1}, clicks.SaltLen))
	at := day1.UnixMilli()
	if n := testing.AllocsPerRun(100, func() { s.Hash(at, alice, iphone) }); n != 0 {
		t.Fatalf("Hash allocated %v times", n)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.change(dayOf(day2.UnixMilli()), bytes.Repeat([]byte{byte(i)}, clicks.SaltLen))
			s.change(dayOf(day2.UnixMilli()), nil)
		}
	})
	want, _ := s.Hash(at, alice, iphone)
	for range 10_000 {
		if h, ok := s.Hash(at, alice, iphone); !ok || h != want {
			t.Fatalf("hash changed under concurrent updates of another day: %#x", h)
		}
	}
	close(stop)
	wg.Wait()
}

// TestDigestsStayWithTheirKey: a User-Agent digest is used only with the
// key it was made under: not for a click of another day, nor after its
// day's salt was replaced; Hash is the two steps in one; neither step
// allocates.
func TestDigestsStayWithTheirKey(t *testing.T) {
	s := New(nil, Config{Now: newClock(day1).now})
	d1, d2 := dayOf(day1.UnixMilli()), dayOf(day2.UnixMilli())
	s.change(d1, bytes.Repeat([]byte{1}, clicks.SaltLen))
	s.change(d2, bytes.Repeat([]byte{2}, clicks.SaltLen))
	at1, at2 := day1.Add(time.Hour).UnixMilli(), day2.Add(time.Hour).UnixMilli()
	tag, digest, ok := s.UserAgent(at1, iphone)
	if !ok {
		t.Fatal("no digest on a day with a salt")
	}
	h, ok := s.Visitor(tag, digest, at1, alice)
	if want, _ := s.Hash(at1, alice, iphone); !ok || h != want || h == 0 {
		t.Fatalf("Visitor %#x, %v; Hash %#x", h, ok, want)
	}
	if _, ok := s.Visitor(tag, digest, at2, alice); ok {
		t.Fatal("a day-1 digest was used for a day-2 click")
	}
	s.change(d1, nil)
	s.change(d1, bytes.Repeat([]byte{3}, clicks.SaltLen))
	if _, ok := s.Visitor(tag, digest, at1, alice); ok {
		t.Fatal("a digest was used under a replaced salt")
	}
	tag2, digest2, _ := s.UserAgent(at1, iphone)
	if h2, ok := s.Visitor(tag2, digest2, at1, alice); !ok || h2 == h {
		t.Fatalf("under the new salt: %#x, %v; the old salt's hash was %#x", h2, ok, h)
	}
	// The digest covers the first clicks.MaxUserAgentLen bytes only, as the edge keeps them.
	long := bytes.Repeat([]byte("x"), clicks.MaxUserAgentLen+10)
	_, dl, _ := s.UserAgent(at1, long)
	_, dc, _ := s.UserAgent(at1, long[:clicks.MaxUserAgentLen])
	if dl != dc {
		t.Fatal("bytes past clicks.MaxUserAgentLen changed the digest")
	}
	if n := testing.AllocsPerRun(100, func() {
		tag, d, _ := s.UserAgent(at1, iphone)
		s.Visitor(tag, d, at1, bob)
	}); n != 0 {
		t.Fatalf("UserAgent and Visitor allocated %v times", n)
	}
}

func TestDayOf(t *testing.T) {
	for _, at := range []time.Time{day1, day1.Add(-time.Millisecond), time.Unix(0, 0), time.Unix(-1, 0), day2.Add(-time.Millisecond)} {
		if got, want := dayOf(at.UnixMilli()), at.UTC().Truncate(24*time.Hour).Unix()/86400; got != want {
			t.Errorf("dayOf(%v) = %d; want %d", at, got, want)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	s := New(nil, Config{})
	s.change(dayOf(day1.UnixMilli()), bytes.Repeat([]byte{1}, clicks.SaltLen))
	at := day1.UnixMilli()
	b.ReportAllocs()
	for b.Loop() {
		s.Hash(at, alice, iphone)
	}
}

// createBucket creates the salt bucket as control does.
func createBucket(js jetstream.JetStream) (jetstream.KeyValue, error) {
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, clicks.SaltStreamConfig()); err != nil {
		return nil, err
	}
	return js.KeyValue(ctx, clicks.SaltBucket)
}
