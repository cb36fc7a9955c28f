package ratelimit

import (
	"net/netip"
	"testing"
	"time"
)

func TestPerIP(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(10, 5, 1000, func() time.Time { return now })
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for i := range 5 {
		if !l.Allow(a) {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	if l.Allow(a) {
		t.Fatal("request past the burst allowed")
	}
	if !l.Allow(b) {
		t.Fatal("another IP was limited by the first")
	}
	now = now.Add(100 * time.Millisecond) // one token at 10/s
	if !l.Allow(a) || l.Allow(a) {
		t.Fatal("refill is not one token per 100ms")
	}
}

func TestTableIsBounded(t *testing.T) {
	l := New(1, 1, 64, nil)
	for i := range 10000 {
		l.Allow(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	n := 0
	for i := range l.shards {
		n += len(l.shards[i].m)
	}
	if n > 64*2+shards*16 {
		t.Fatalf("table holds %d IPs after a scan from 10000", n)
	}
}

func TestAllowDoesNotAllocate(t *testing.T) {
	l := New(1e9, 1e9, 100, nil)
	ip := netip.MustParseAddr("10.0.0.1")
	l.Allow(ip)
	if n := testing.AllocsPerRun(100, func() { l.Allow(ip) }); n != 0 {
		t.Fatalf("Allow allocated %v times", n)
	}
}

// TestFailClosedKeepsBudgets: a table that fails closed, full of keys that
// spent their budget, refuses a new key instead of forgetting the spent
// ones (whose budgets a flood of new keys must not reset), and takes new
// keys again once buckets refill.
func TestFailClosedKeepsBudgets(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewKeyed[int](1, 2, shards*16, true, func() time.Time { return now })
	for k := range 100_000 {
		l.Allow(k)
		l.Allow(k)
	}
	held := l.Len()
	if held > shards*16 {
		t.Fatalf("table holds %d keys, bound %d", held, shards*16)
	}
	// Every key held spent its burst: none may be forgotten and refilled.
	spent := 0
	for k := range 100_000 {
		if l.Allow(k) {
			t.Fatalf("key %d allowed a third take in the same instant", k)
		}
		spent++
	}
	if l.Len() != held {
		t.Fatalf("table changed from %d to %d keys while full", held, l.Len())
	}
	now = now.Add(3 * time.Second) // every bucket refilled
	if !l.Allow(-1) {
		t.Fatal("a new key refused after every bucket refilled")
	}

	open := NewKeyed[int](1, 2, shards*16, false, func() time.Time { return now })
	for k := range 100_000 {
		open.Allow(k)
		open.Allow(k)
	}
	if !open.Allow(-1) {
		t.Fatal("a table that does not fail closed refused a new key")
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want time.Duration
	}{{50, time.Second}, {1, time.Second}, {0.5, 2 * time.Second}, {0.1, 10 * time.Second}, {0.3, 4 * time.Second}, {0, time.Second}} {
		if got := NewKeyed[int](tt.rate, 1, 10, false, nil).RetryAfter(); got != tt.want {
			t.Errorf("rate %v: retry after %v, want %v", tt.rate, got, tt.want)
		}
	}
}
