package lookup

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// TestSameCodeOnTwoDomains: one code on two domains is two links: asked at
// once they are two questions (not one shared), the message says each
// code's domain, and each asker gets its own domain's link.
func TestSameCodeOnTwoDomains(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	f.answer = func(d link.DomainID, code string) authority.Reply {
		if d == 0 {
			return authority.Reply{Kind: authority.NotFound}
		}
		r := found(code)
		r.URL = fmt.Sprintf("https://example.com/domain-%d/%s", d, code)
		return r
	}
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)
	go func() { _, _ = c.Ask(link.DefaultDomain, "held") }()
	poll.Until(t, "the slot taken", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	type res struct {
		d   link.DomainID
		r   authority.Reply
		err error
	}
	out := make(chan res, 3)
	for _, d := range []link.DomainID{0, 7, 9} {
		go func() { r, err := c.Ask(d, "same1"); out <- res{d, r, err} }()
	}
	poll.Until(t, "three questions queued", 10*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == 3 })
	if n := c.Coalesced.Load(); n != 0 {
		t.Fatalf("%d asks shared another domain's question; want none", n)
	}
	close(f.gate)
	for range 3 {
		r := <-out
		switch {
		case r.err != nil:
			t.Errorf("domain %d: %v", r.d, r.err)
		case r.d == 0 && r.r.Kind != authority.NotFound:
			t.Errorf("domain 0: %+v; want NotFound", r.r)
		case r.d != 0 && (r.r.Kind != authority.Found || r.r.Domain != r.d || r.r.Code != "same1" ||
			r.r.URL != fmt.Sprintf("https://example.com/domain-%d/same1", r.d)):
			t.Errorf("domain %d: %+v; want its own link", r.d, r.r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.domains) != 2 || len(f.domains[0]) != 0 {
		t.Fatalf("questions' domains %v; want none for the first (platform only) and one per code for the second", f.domains)
	}
	got := map[link.DomainID]int{}
	for i, d := range f.domains[1] {
		if f.asked[1][i] != "same1" {
			t.Errorf("code %d asked: %q", i, f.asked[1][i])
		}
		got[d]++
	}
	if len(got) != 3 || got[0] != 1 || got[7] != 1 || got[9] != 1 {
		t.Errorf("the second question's domains %v; want 0, 7 and 9 once each", f.domains[1])
	}
}
