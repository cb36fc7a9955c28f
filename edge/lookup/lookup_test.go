package lookup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// fakeNATS answers questions from a function. gate, when set, holds every
// request until it is closed (or the request's deadline passes).
type fakeNATS struct {
	connected atomic.Bool
	calls     atomic.Int64
	inFlight  atomic.Int64
	gate      chan struct{}
	onRequest func(q *authority.Question) // called as each request arrives
	answer    func(d link.DomainID, code string) authority.Reply
	frontier  []authority.Frontier
	promise   uint32
	raw       []byte                 // when set, the answer's bytes, whatever was asked
	hosts     map[string]link.Domain // the domains hosts are answered with

	mu      sync.Mutex
	asked   [][]string        // the codes of each question, in order of arrival
	domains [][]link.DomainID // and their domains
	hostQs  [][]string        // the hosts of each question
}

func (f *fakeNATS) IsConnected() bool { return f.connected.Load() }

// RequestWithContext reads (calls answer) as the request arrives and replies
// when the gate lets it: a slow reply of an answer read early.
func (f *fakeNATS) RequestWithContext(ctx context.Context, subj string, data []byte) (*nats.Msg, error) {
	if subj != authority.AskSubject {
		return nil, fmt.Errorf("asked on %q", subj)
	}
	var q authority.Question
	if err := authority.UnmarshalQuestion(data, &q); err != nil {
		return nil, err
	}
	f.calls.Add(1)
	f.mu.Lock()
	f.asked = append(f.asked, q.Codes)
	f.domains = append(f.domains, q.Domains)
	f.hostQs = append(f.hostQs, q.Hosts)
	f.mu.Unlock()
	if f.onRequest != nil {
		f.onRequest(&q)
	}
	b := f.raw
	if b == nil {
		a := authority.Answer{Kind: authority.Found, Version: 42}
		if q.Frontier {
			a.Frontiers, a.PromiseMillis = f.frontier, f.promise
		}
		for i, c := range q.Codes {
			d := link.DefaultDomain
			if len(q.Domains) > 0 {
				d = q.Domains[i]
			}
			r := f.answer(d, c)
			r.Domain, r.Code = 0, "" // the code is implied by the question
			if r.Kind == authority.Found {
				r.Domain = d // a found link names its domain
			}
			a.Replies = append(a.Replies, r)
		}
		for _, h := range q.Hosts {
			if d, ok := f.hosts[h]; ok {
				a.Domains = append(a.Domains, d)
			}
		}
		var err error
		if b, err = authority.MarshalAnswer(nil, &a); err != nil {
			return nil, err
		}
	}
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &nats.Msg{Data: b}, nil
}

func newFake() *fakeNATS {
	f := &fakeNATS{answer: func(link.DomainID, string) authority.Reply { return authority.Reply{Kind: authority.NotFound} }}
	f.connected.Store(true)
	return f
}

func found(code string) authority.Reply {
	return authority.Reply{Kind: authority.Found, Version: 7, Code: code, URL: "https://example.com/" + code, RedirectType: 302, Status: link.Active}
}

// start runs c until the test ends.
func start(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestCodesShareMessages: codes asked while the only slot is busy go out
// together in the next message, each with its own answer.
func TestCodesShareMessages(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	f.answer = func(_ link.DomainID, code string) authority.Reply {
		if code[0] == 'f' {
			return found(code)
		}
		return authority.Reply{Kind: authority.NotFound}
	}
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)

	first := make(chan error, 1)
	go func() { _, err := c.Ask(link.DefaultDomain, "first-code"); first <- err }()
	poll.Until(t, "the first question in flight", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })

	const n = 300 // more than one message holds
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		code := fmt.Sprintf("code-%04d", i)
		if i%3 == 0 {
			code = fmt.Sprintf("fcod-%04d", i)
		}
		wg.Go(func() {
			r, err := c.Ask(link.DefaultDomain, code)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", code, err)
			case code[0] == 'f' && (r.Kind != authority.Found || r.Code != code):
				errs <- fmt.Errorf("%s: %+v, want its link", code, r)
			case code[0] != 'f' && (r.Kind != authority.NotFound || r.Version != 42):
				errs <- fmt.Errorf("%s: %+v, want NotFound at version 42", code, r)
			}
		})
	}
	poll.Until(t, "every code queued", 10*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.pending) == n
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
	// One message for the first code, then 300 codes in messages of at
	// most MaxCodes.
	want := int64(1 + (n+authority.MaxCodes-1)/authority.MaxCodes)
	if got := f.calls.Load(); got != want {
		t.Errorf("%d codes took %d round trips; want %d", n+1, got, want)
	}
}

// TestNotFoundFromBeforeArrivalIsAskedAgain: a code asked while a question
// about it is already in flight shares its Found, but not its NotFound,
// which was read before it was asked (the link may have been created in
// between, its 201 already sent); it is asked again.
func TestNotFoundFromBeforeArrivalIsAskedAgain(t *testing.T) {
	for _, existed := range []bool{false, true} {
		t.Run(fmt.Sprintf("existed=%v", existed), func(t *testing.T) {
			f := newFake()
			f.gate = make(chan struct{})
			var created atomic.Bool
			created.Store(existed)
			f.answer = func(_ link.DomainID, code string) authority.Reply {
				if created.Load() {
					return found(code)
				}
				return authority.Reply{Kind: authority.NotFound}
			}
			c := New(f, Config{Inflight: 2, MaxWait: time.Minute, Timeout: time.Minute})
			start(t, c)
			early := make(chan authority.Reply, 1)
			go func() { r, _ := c.Ask(link.DefaultDomain, "abcd"); early <- r }()
			poll.Until(t, "the first question read", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
			// The link is created now (its 201 sent), then asked for again
			// while the first answer is still on its way.
			created.Store(true)
			late := make(chan authority.Reply, 1)
			go func() { r, _ := c.Ask(link.DefaultDomain, "abcd"); late <- r }()
			poll.Until(t, "the second ask to join", 10*time.Second, func() bool { return c.Coalesced.Load() == 1 })
			close(f.gate)
			e, l := <-early, <-late
			if existed {
				if e.Kind != authority.Found || l.Kind != authority.Found || f.calls.Load() != 1 {
					t.Fatalf("early %v, late %v after %d round trips; want both Found from one", e.Kind, l.Kind, f.calls.Load())
				}
				return
			}
			if e.Kind != authority.NotFound {
				t.Errorf("the early ask: %v; want NotFound", e.Kind)
			}
			if l.Kind != authority.Found || f.calls.Load() != 2 {
				t.Errorf("the late ask: %v after %d round trips; want Found from a second one", l.Kind, f.calls.Load())
			}
		})
	}
}

// TestShedsInsteadOfQueueing: a code waits MaxWait for a slot, then is shed
// with ErrBusy; past MaxPending waiting codes it is shed at once; a round
// trip past its timeout fails every code it carried.
func TestShedsInsteadOfQueueing(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	defer close(f.gate)
	c := New(f, Config{Inflight: 1, MaxWait: 20 * time.Millisecond, Timeout: time.Hour, MaxPending: 2})
	start(t, c)
	go func() { _, _ = c.Ask(link.DefaultDomain, "held") }()
	poll.Until(t, "the slot taken", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	if _, err := c.Ask(link.DefaultDomain, "wait"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a code with no free slot: %v; want ErrBusy after MaxWait", err)
	}
	c.mu.Lock()
	left := len(c.pending)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d codes still queued after the shed", left)
	}
	c = New(f, Config{Inflight: 1, MaxWait: time.Hour, Timeout: time.Hour, MaxPending: 2})
	start(t, c)
	go func() { _, _ = c.Ask(link.DefaultDomain, "held2") }()
	poll.Until(t, "the slot taken", 10*time.Second, func() bool { return f.inFlight.Load() == 2 })
	for _, code := range []string{"wait1", "wait2"} {
		go func() { _, _ = c.Ask(link.DefaultDomain, code) }()
	}
	poll.Until(t, "two codes queued", 10*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.pending) == 2 })
	if _, err := c.Ask(link.DefaultDomain, "full"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a code past MaxPending: %v; want ErrBusy at once", err)
	}
	if c.Busy.Load() != 1 {
		t.Errorf("Busy = %d; want 1", c.Busy.Load())
	}
}

func TestFailuresAreUnavailable(t *testing.T) {
	badAnswer, _ := authority.MarshalAnswer(nil, &authority.Answer{Kind: authority.Found}) // no reply to the code
	unavailable, _ := authority.MarshalAnswer(nil, &authority.Answer{Kind: authority.Unavailable})
	for _, tt := range []struct {
		name string
		set  func(f *fakeNATS, c *Client)
	}{
		{"nats down", func(f *fakeNATS, _ *Client) { f.connected.Store(false) }},
		{"timeout", func(f *fakeNATS, c *Client) { f.gate = make(chan struct{}); c.cfg.Timeout = 10 * time.Millisecond }},
		{"control cannot read its database", func(f *fakeNATS, _ *Client) { f.raw = unavailable }},
		{"malformed answer", func(f *fakeNATS, _ *Client) { f.raw = badAnswer }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			c := New(f, Config{})
			tt.set(f, c)
			start(t, c)
			if r, err := c.Ask(link.DefaultDomain, "abcd"); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Ask = %+v, %v; want ErrUnavailable", r, err)
			}
			if f.gate != nil {
				close(f.gate)
			}
		})
	}
}

// clock is a settable clock with a monotonic base.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestPromise: the frontier's ceiling holds from the moment the question was
// sent (a slow answer is worth less), for IDs inside a namespace only, and
// is renewed in the background once a quarter of it has passed.
func TestPromise(t *testing.T) {
	f := newFake()
	f.frontier = []authority.Frontier{
		{Namespace: "low", Start: 1, End: 1000, Next: 500, Ceiling: 600},
		{Namespace: "high", Start: 5000, End: 10000, Next: 5000, Ceiling: 5100},
	}
	f.promise = 1000
	clk := &clock{t: time.Now()}
	var slow atomic.Bool // the round trip takes 300 ms of the clock
	gate := make(chan struct{})
	f.onRequest = func(*authority.Question) {
		if slow.Load() {
			clk.add(300 * time.Millisecond)
		}
		<-gate
	}
	c := New(f, Config{Now: clk.now})
	start(t, c)
	if p := c.Promise(); p != nil {
		t.Fatalf("a promise before any answer: %+v", p)
	}
	sentAt := clk.now()
	gate <- struct{}{} // the frontier question goes out
	poll.Until(t, "the promise", 10*time.Second, func() bool { return c.Current() != nil })
	p := c.Promise()
	if want := sentAt.Add(time.Second); p == nil || !p.Until.Equal(want) {
		t.Fatalf("promise %+v; want one until %v, a second after the question was sent", p, want)
	}
	at := clk.now()
	for _, tt := range []struct {
		id   uint64
		want bool
	}{
		{599, false}, {600, true}, {999, true}, {1000, false}, {4999, false}, {5099, false}, {5100, true}, {9999, true}, {10000, false}, {0, false},
	} {
		if got := p.Beyond(tt.id, at); got != tt.want {
			t.Errorf("Beyond(%d) = %v; want %v", tt.id, got, tt.want)
		}
	}
	if p.Beyond(700, sentAt.Add(time.Second)) {
		t.Error("Beyond holds at the promise's end; want it to have run out")
	}
	clk.add(200 * time.Millisecond)
	if c.Promise() == nil || c.refresh.Load() {
		t.Fatal("a fifth of the promise gone: it should hold, without a renewal asked for")
	}
	// A quarter gone: renewed, measured from the renewal's own send, which
	// this time takes 300 ms to answer.
	clk.add(100 * time.Millisecond)
	slow.Store(true)
	renewedAt := clk.now()
	if c.Promise() == nil {
		t.Fatal("the promise ran out early")
	}
	gate <- struct{}{}
	poll.Until(t, "the renewal", 10*time.Second, func() bool { return c.Refreshes.Load() == 2 })
	if got, want := c.Current().Until, renewedAt.Add(time.Second); !got.Equal(want) {
		t.Errorf("renewed until %v; want %v, a second after the renewal was sent (not answered)", got, want)
	}
	close(gate)
	clk.add(2 * time.Second)
	if c.Promise() != nil {
		t.Error("a promise after it ran out")
	}
}

// TestSettle: without a promise, misses wait for a frontier read asked
// after they arrived, and one read settles them all; an ID at or above the
// counter is then unknown, one below it (leased) is left to a per-code
// question; with a promise, an ID above the ceiling needs no round trip.
func TestSettle(t *testing.T) {
	f := newFake()
	f.frontier = []authority.Frontier{{Namespace: "default", Start: 1, End: 1 << 30, Next: 1000, Ceiling: 5000}}
	f.promise = 60_000 // a minute: no renewal during the test
	f.gate = make(chan struct{})
	c := New(f, Config{Inflight: 1, MaxWait: time.Minute, Timeout: time.Minute})
	start(t, c)
	// Hold the only slot with a question about a code, so the misses
	// below queue behind it and share one frontier question.
	go func() { _, _ = c.Ask(link.DefaultDomain, "held") }()
	poll.Until(t, "the slot taken", 10*time.Second, func() bool { return f.inFlight.Load() >= 1 })
	type res struct {
		id      uint64
		unknown bool
		err     error
	}
	ids := []uint64{1000, 2000, 4999, 999, 1 << 29, 1 << 31}
	out := make(chan res, len(ids))
	for _, id := range ids {
		go func() { u, err := c.Settle(id); out <- res{id, u, err} }()
	}
	poll.Until(t, "every miss waiting", 10*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.fwait) == len(ids) })
	close(f.gate)
	want := map[uint64]bool{1000: true, 2000: true, 4999: true, 999: false, 1 << 29: true, 1 << 31: false}
	for range ids {
		r := <-out
		if r.err != nil || r.unknown != want[r.id] {
			t.Errorf("Settle(%d) = %v, %v; want %v", r.id, r.unknown, r.err, want[r.id])
		}
	}
	f.mu.Lock()
	frontierQuestions := 0
	for _, codes := range f.asked {
		if len(codes) == 0 {
			frontierQuestions++
		}
	}
	f.mu.Unlock()
	if frontierQuestions > 1 || f.calls.Load() > 2 {
		t.Errorf("%d misses took %d round trips (%d frontier-only); want them settled by one", len(ids), f.calls.Load(), frontierQuestions)
	}
	// The promise now holds: above the ceiling, no round trip.
	calls := f.calls.Load()
	if u, err := c.Settle(7000); !u || err != nil || f.calls.Load() != calls {
		t.Errorf("Settle(7000) with the promise = %v, %v after %d round trips; want true and none", u, err, f.calls.Load()-calls)
	}
	if u, err := c.Settle(10); u || err != nil || f.calls.Load() != calls {
		t.Errorf("Settle(10), a leased ID, = %v, %v after %d round trips; want false and none", u, err, f.calls.Load()-calls)
	}
	f.connected.Store(false)
	c.promise.Store(nil)
	if _, err := c.Settle(7000); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Settle with NATS down and no promise: %v; want ErrUnavailable", err)
	}
}

// TestSettleWaitsForAReadAfterItArrived: a frontier read asked before a
// miss arrived settles nothing for it: the counter it read may have moved
// since, and a link been created above it.
func TestSettleWaitsForAReadAfterItArrived(t *testing.T) {
	f := newFake()
	var next atomic.Uint64
	next.Store(1000)
	f.gate = make(chan struct{})
	c := New(f, Config{Inflight: 2, MaxWait: time.Minute, Timeout: time.Minute})
	f.onRequest = func(q *authority.Question) {
		f.frontier = []authority.Frontier{{Namespace: "default", Start: 1, End: 1 << 30, Next: next.Load(), Ceiling: next.Load()}}
	}
	start(t, c)
	early := make(chan bool, 1)
	go func() { u, _ := c.Settle(1500); early <- u }()
	poll.Until(t, "the first frontier question read", 10*time.Second, func() bool { return f.inFlight.Load() == 1 })
	// A lease past 1500 is confirmed and its link created; then a miss
	// for it arrives while the first read is on its way back.
	next.Store(2000)
	late := make(chan bool, 1)
	go func() { u, _ := c.Settle(1500); late <- u }()
	poll.Until(t, "the late miss waiting", 10*time.Second, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.fwait) == 2 })
	close(f.gate)
	if !<-early {
		t.Error("the early miss: not settled by the read after it; want unknown (1500 >= 1000 then)")
	}
	if <-late {
		t.Error("the late miss was settled by a read from before it arrived; want the next read's answer (1500 < 2000: ask the code)")
	}
}

// TestConcurrentAsks runs askers, renewals and answers at once under the
// race detector; every answer matches its code.
func TestConcurrentAsks(t *testing.T) {
	f := newFake()
	f.frontier = []authority.Frontier{{Namespace: "default", Start: 1, End: 1 << 30, Next: 10, Ceiling: 20}}
	f.promise = 5
	f.answer = func(_ link.DomainID, code string) authority.Reply {
		if len(code)%2 == 0 {
			return found(code)
		}
		return authority.Reply{Kind: authority.NotFound}
	}
	c := New(f, Config{MaxWait: time.Minute})
	start(t, c)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 300 {
				code := fmt.Sprintf("c%0*d", 4+(i+w)%3, i%17)
				r, err := c.Ask(link.DefaultDomain, code)
				if err != nil {
					t.Error(err)
					return
				}
				if (len(code)%2 == 0) != (r.Kind == authority.Found) || (r.Kind == authority.Found && r.Code != code) {
					t.Errorf("%s answered %+v", code, r)
					return
				}
				_ = c.Promise().Beyond(25, time.Now())
			}
		})
	}
	wg.Wait()
}
