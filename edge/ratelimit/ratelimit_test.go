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
