package responder

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

type fakeLookup struct {
	running, peak atomic.Int64
	release       chan struct{}
}

func (f *fakeLookup) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if f.release != nil && code == "00000A" {
		<-f.release
	}
	switch code {
	case "00000A":
		return authority.Reply{Kind: authority.Found, Version: 3, Code: code, URL: "https://example.com/", RedirectType: 302, Status: link.Active}, nil
	case "broken":
		return authority.Reply{}, errors.New("database down")
	}
	return authority.Reply{Kind: authority.NotFound, Version: 9}, nil
}

func start(t *testing.T, lookup Lookup, cfg Config) (*Responder, func(code string) authority.Reply) {
	t.Helper()
	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	r := New(nc, lookup, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	client, _ := ns.Connect(t)
	ask := func(code string) authority.Reply {
		t.Helper()
		// The subscription reaches the server asynchronously: retry "no
		// responders" within a bound.
		deadline := time.Now().Add(10 * time.Second)
		for {
			msg, err := client.Request(authority.Subject, []byte(code), 5*time.Second)
			if err != nil {
				if time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				t.Errorf("request %q: %v", code, err)
				return authority.Reply{}
			}
			var rep authority.Reply
			if err := authority.Unmarshal(msg.Data, &rep); err != nil {
				t.Errorf("reply to %q: %v", code, err)
			}
			return rep
		}
	}
	return r, ask
}

func TestAnswers(t *testing.T) {
	_, ask := start(t, &fakeLookup{}, Config{})
	tests := []struct {
		code string
		want authority.Reply
	}{
		{"00000A", authority.Reply{Kind: authority.Found, Version: 3, Code: "00000A", URL: "https://example.com/", RedirectType: 302, Status: link.Active}},
		{"00000B", authority.Reply{Kind: authority.NotFound, Version: 9}},
		{"broken", authority.Reply{Kind: authority.Unavailable}},
		{"a/b", authority.Reply{Kind: authority.NotFound}},
	}
	for _, tt := range tests {
		if got := ask(tt.code); got != tt.want {
			t.Errorf("ask(%q) = %+v; want %+v", tt.code, got, tt.want)
		}
	}
}

func TestConcurrencyIsBounded(t *testing.T) {
	f := &fakeLookup{release: make(chan struct{})}
	_, ask := start(t, f, Config{Concurrency: 3})
	ask("00000B") // the subscription is live
	var wg sync.WaitGroup
	got := make(chan authority.Reply, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got <- ask("00000A")
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.running.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(f.release)
	wg.Wait()
	close(got)
	for rep := range got {
		if rep.Kind != authority.Found {
			t.Errorf("reply %+v; want Found", rep)
		}
	}
	if p := f.peak.Load(); p != 3 {
		t.Fatalf("peak concurrent lookups %d; want exactly the bound 3", p)
	}
}
