package authfail

import (
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a time a test moves by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestBurstThenRefill(t *testing.T) {
	clk := newClock()
	f := New(1, 3, 64, clk.now)
	a := netip.MustParseAddr("192.0.2.7")
	for i := range 3 {
		if _, blocked := f.Blocked(a); blocked {
			t.Fatalf("blocked after %d failures of a burst of 3", i)
		}
		f.Fail(a)
	}
	wait, blocked := f.Blocked(a)
	if !blocked || wait != time.Second {
		t.Fatalf("after the burst: blocked %v for %v; want true for 1s", blocked, wait)
	}
	if _, blocked := f.Blocked(netip.MustParseAddr("192.0.2.8")); blocked {
		t.Error("another client shares the bucket")
	}
	clk.advance(time.Second)
	if _, blocked := f.Blocked(a); blocked {
		t.Error("still blocked after a token refilled")
	}
	var none *Budget
	none.Fail(a)
	if _, blocked := none.Blocked(a); blocked || none.Clients() != 0 || New(-1, 3, 64, nil) != nil {
		t.Error("a nil budget refuses someone")
	}
}

func TestTableIsBounded(t *testing.T) {
	clk := newClock()
	f := New(1, 10, 64, clk.now)
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	for i := range 10_000 {
		f.Fail(addr(i))
		if n := f.Clients(); n > 64 {
			t.Fatalf("%d clients tracked after %d; want at most 64", n, i+1)
		}
	}
	// A client that failed once is still tracked, and still allowed.
	if _, blocked := f.Blocked(addr(9_999)); blocked {
		t.Error("one failure blocked a client")
	}
}

func TestEntriesExpire(t *testing.T) {
	clk := newClock()
	f := New(1, 10, 100_000, clk.now)
	for i := range 1000 {
		f.Fail(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}))
	}
	if n := f.Clients(); n != 1000 {
		t.Fatalf("%d clients tracked; want 1000", n)
	}
	// Once their buckets are full again they hold nothing: the next
	// failure in each shard forgets them.
	clk.advance(10 * time.Second)
	touched := map[*shard]bool{}
	fresh := 0
	for i := 0; len(touched) < shards; i++ {
		a := netip.AddrFrom4([4]byte{172, 16, byte(i >> 8), byte(i)})
		touched[f.shard(a)] = true
		f.Fail(a)
		fresh++
	}
	if n := f.Clients(); n != fresh {
		t.Errorf("%d clients tracked; want only the %d that failed since", n, fresh)
	}
}

func TestConcurrentClientsStayBounded(t *testing.T) {
	clk := newClock()
	f := New(1, 5, 64, clk.now)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				a := netip.AddrFrom4([4]byte{10, byte(g), byte(i >> 8), byte(i)})
				f.Fail(a)
				f.Blocked(a)
			}
		})
	}
	wg.Wait()
	if n := f.Clients(); n > 64 {
		t.Errorf("%d clients tracked; want at most 64", n)
	}
	hot := netip.MustParseAddr("10.9.9.9")
	for range 5 {
		f.Fail(hot)
	}
	if _, blocked := f.Blocked(hot); !blocked {
		t.Error("a client past its burst is not blocked")
	}
}

func TestClientGroupsIPv6By64(t *testing.T) {
	for _, c := range []struct{ remote, want string }{
		{"192.0.2.1:443", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:443", "192.0.2.1"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2:bbbb::9]:443", "2001:db8:1:2::"},
		{"[fe80::1%eth0]:443", "fe80::"},
		{"@", "invalid IP"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if got := Client(r).String(); got != c.want {
			t.Errorf("Client(%s) = %s; want %s", c.remote, got, c.want)
		}
	}
}
