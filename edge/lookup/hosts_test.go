package lookup

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

func testDomain(id link.DomainID, host string) link.Domain {
	return link.Domain{ID: id, Host: host, TenantID: 1, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 5}
}

// TestHostsShareMessages: hosts asked while the only slot is busy go out
// together, with the codes asked meanwhile, in one message; one host asked
// many times is asked once; each gets its own answer.
func TestHostsShareMessages(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	f.hosts = map[string]link.Domain{"go.acme.com": testDomain(3, "go.acme.com"), "b.example": testDomain(4, "b.example")}
	f.answer = func(d link.DomainID, code string) authority.Reply {
		if d == 3 && code == "spring" {
			return found(code)
		}
		return authority.Reply{Kind: authority.NotFound}
	}
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)

	first := make(chan error, 1)
	go func() { _, err := c.Ask(link.DefaultDomain, "first-code"); first <- err }()
	poll.Until(t, "the first question in flight", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	hosts := []string{"go.acme.com", "go.acme.com", "go.acme.com", "b.example", "nobody.example"}
	for _, h := range hosts {
		wg.Go(func() {
			d, ok, err := c.AskHost(h)
			want, wantOK := f.hosts[h]
			if err != nil || ok != wantOK || d.ID != want.ID || d.Host != want.Host {
				errs <- fmt.Errorf("AskHost(%s) = %+v, %v, %v; want %+v, %v", h, d, ok, err, want, wantOK)
			}
		})
	}
	wg.Go(func() {
		r, err := c.Ask(3, "spring")
		if err != nil || r.Kind != authority.Found || r.Domain != 3 {
			errs <- fmt.Errorf("Ask(3, spring) = %+v, %v; want its link", r, err)
		}
	})
	poll.Until(t, "the hosts and the code queued", 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending) == 4 && c.Coalesced.Load() == 2
	})
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hostQs) != 2 || len(f.hostQs[1]) != 3 || len(f.asked[1]) != 1 {
		t.Errorf("questions carried hosts %q and codes %q; want the three hosts and the code in the second", f.hostQs, f.asked)
	}
	if c.HostsAsked.Load() != 5 || c.HostsSent.Load() != 3 {
		t.Errorf("hosts asked %d, sent %d; want 5, 3", c.HostsAsked.Load(), c.HostsSent.Load())
	}
}

// TestHostsBatchBound: more hosts than one message may carry go out in
// several, none above authority.MaxHosts.
func TestHostsBatchBound(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)
	go func() { _, _ = c.Ask(link.DefaultDomain, "first-code") }()
	poll.Until(t, "the first question in flight", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	n := 2*authority.MaxHosts + 1
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, ok, err := c.AskHost(fmt.Sprintf("h%d.example", i)); err != nil || ok {
				t.Errorf("host %d: %v, %v; want not found", i, ok, err)
			}
		})
	}
	poll.Until(t, "every host queued", 10*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == n })
	close(f.gate)
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, hs := range f.hostQs {
		if len(hs) > authority.MaxHosts {
			t.Errorf("a question carried %d hosts", len(hs))
		}
		total += len(hs)
	}
	if total != n {
		t.Errorf("%d hosts sent; want %d", total, n)
	}
}

// TestHostsShedAndFail: a host past the bounds is shed with ErrBusy, and an
// authority that cannot answer is ErrUnavailable: neither is "no such
// host".
func TestHostsShedAndFail(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	defer close(f.gate)
	c := New(f, Config{Inflight: 1, MaxWait: 20 * time.Millisecond, Timeout: time.Hour, MaxPending: 1})
	start(t, c)
	go func() { _, _ = c.Ask(link.DefaultDomain, "held") }()
	poll.Until(t, "the slot taken", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	if _, _, err := c.AskHost("go.acme.com"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a host with no free slot: %v; want ErrBusy after MaxWait", err)
	}

	u := newFake()
	u.raw, _ = authority.MarshalAnswer(nil, &authority.Answer{Kind: authority.Unavailable})
	c = New(u, Config{})
	start(t, c)
	if _, ok, err := c.AskHost("go.acme.com"); !errors.Is(err, ErrUnavailable) || ok {
		t.Fatalf("an unavailable authority: %v, %v; want ErrUnavailable", ok, err)
	}
	u.connected.Store(false)
	if _, _, err := c.AskHost("go.acme.com"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("nats down: %v; want ErrUnavailable", err)
	}
}

// TestHostNotFoundFromBeforeArrivalIsAskedAgain: a host asked while a
// question about it is in flight does not take that question's "not
// found", read before it was asked (the domain may have been created in
// between); it is asked again.
func TestHostNotFoundFromBeforeArrivalIsAskedAgain(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	var mu sync.Mutex
	created := false
	f.onRequest = func(q *authority.Question) {
		mu.Lock()
		defer mu.Unlock()
		if created {
			f.hosts = map[string]link.Domain{"go.acme.com": testDomain(3, "go.acme.com")}
		}
	}
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)
	early := make(chan bool, 1)
	go func() { _, ok, _ := c.AskHost("go.acme.com"); early <- ok }()
	poll.Until(t, "the first question in flight", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	mu.Lock()
	created = true
	mu.Unlock()
	late := make(chan error, 1)
	go func() {
		d, ok, err := c.AskHost("go.acme.com")
		if err == nil && (!ok || d.ID != 3) {
			err = fmt.Errorf("got %+v, %v; want domain 3", d, ok)
		}
		late <- err
	}()
	poll.Until(t, "the second ask joined", 10*time.Second, func() bool { return c.HostsAsked.Load() == 2 && c.Coalesced.Load() == 1 })
	close(f.gate)
	if ok := <-early; ok {
		t.Error("the first ask found a domain created after its question was read")
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
}
