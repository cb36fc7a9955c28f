package lookup

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// fakeNATS answers from a function; gate, when set, holds every request
// until closed.
type fakeNATS struct {
	connected atomic.Bool
	calls     atomic.Int64
	inFlight  atomic.Int64
	gate      chan struct{}
	deaf      bool // hold until the gate opens, whatever the deadline
	answer    func(code string) authority.Reply
}

func (f *fakeNATS) IsConnected() bool { return f.connected.Load() }

func (f *fakeNATS) RequestWithContext(ctx context.Context, subj string, data []byte) (*nats.Msg, error) {
	f.calls.Add(1)
	f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	if f.gate != nil && f.deaf {
		<-f.gate
	} else if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rep := f.answer(string(data))
	b, err := authority.Marshal(nil, &rep)
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Data: b}, nil
}

func newFake() *fakeNATS {
	f := &fakeNATS{answer: func(code string) authority.Reply {
		return authority.Reply{Kind: authority.NotFound, Version: 1}
	}}
	f.connected.Store(true)
	return f
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFoundIsCoalesced(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	f.answer = func(code string) authority.Reply {
		return authority.Reply{Kind: authority.Found, Version: 3, Code: code, URL: "https://x", RedirectType: 302, Status: link.Active}
	}
	c := New(f, Config{Timeout: 10 * time.Second})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rep, err := c.Lookup("00000A"); err != nil || rep.Kind != authority.Found {
				t.Errorf("Lookup = %+v, %v", rep, err)
			}
		}()
	}
	waitFor(t, "a request in flight", func() bool { return f.inFlight.Load() == 1 })
	// Let the waiters pile onto the one flight; the count of coalesced
	// lookups tells us when they have.
	waitFor(t, "waiters to join", func() bool { return c.clock.Load() >= 21 })
	close(f.gate)
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("20 concurrent lookups of one found code made %d round trips; want 1", n)
	}
}

// A NotFound from a round trip that started before a lookup arrived is not
// trusted: the link may have been created in between.
func TestStaleNotFoundIsAskedAgain(t *testing.T) {
	f := newFake()
	f.gate = make(chan struct{})
	var created atomic.Bool
	f.answer = func(code string) authority.Reply {
		if created.Load() {
			return authority.Reply{Kind: authority.Found, Version: 9, Code: code, URL: "https://new", RedirectType: 302, Status: link.Active}
		}
		return authority.Reply{Kind: authority.NotFound, Version: 8}
	}
	c := New(f, Config{Timeout: 10 * time.Second})
	first := make(chan authority.Reply, 1)
	go func() { rep, _ := c.Lookup("00000A"); first <- rep }()
	waitFor(t, "the probe in flight", func() bool { return f.inFlight.Load() == 1 })
	// The probe's read has happened (it answers NotFound); now the link
	// is created, and a follow arrives while the probe is still in flight.
	second := make(chan authority.Reply, 1)
	go func() { rep, _ := c.Lookup("00000A"); second <- rep }()
	waitFor(t, "the follow to arrive", func() bool { return c.clock.Load() >= 3 })
	f.answer = func(code string) authority.Reply { // the gate below publishes this write
		return authority.Reply{Kind: authority.Found, Version: 9, Code: code, URL: "https://new", RedirectType: 302, Status: link.Active}
	}
	created.Store(true)
	close(f.gate)
	<-first
	if rep := <-second; rep.Kind != authority.Found {
		t.Fatalf("follow after create answered %+v; want Found", rep)
	}
}

func TestBoundsAndFailures(t *testing.T) {
	f := newFake()
	f.gate, f.deaf = make(chan struct{}), true
	c := New(f, Config{Timeout: 50 * time.Millisecond, Concurrency: 1})
	done := make(chan error, 1)
	go func() { _, err := c.Lookup("00000A"); done <- err }()
	waitFor(t, "one lookup holding the only slot", func() bool { return f.inFlight.Load() == 1 })
	if _, err := c.Lookup("00000B"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second lookup with the slot taken: %v; want ErrBusy", err)
	}
	close(f.gate)
	<-done

	f.gate, f.deaf = make(chan struct{}), false
	if _, err := c.Lookup("00000E"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("lookup past its timeout: %v; want ErrUnavailable", err)
	}
	close(f.gate)
	f.connected.Store(false)
	if _, err := c.Lookup("00000C"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("lookup while disconnected: %v; want ErrUnavailable", err)
	}
	f.connected.Store(true)
	f.answer = func(string) authority.Reply { return authority.Reply{Kind: authority.Unavailable} }
	if _, err := c.Lookup("00000D"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("lookup answered Unavailable: %v; want ErrUnavailable", err)
	}
}
