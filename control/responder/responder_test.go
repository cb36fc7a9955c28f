package responder

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

type fakeLookup struct {
	running, peak atomic.Int64
	release       chan struct{}
}

func (f *fakeLookup) LookupForEdge(ctx context.Context, code string) (authority.Reply, error) {
	return f.lookup(ctx, link.DefaultDomain, code)
}

// lookup knows 00000A on the platform's domain and on domain 3 (another
// link there), and fails for "broken".
func (f *fakeLookup) lookup(ctx context.Context, d link.DomainID, code string) (authority.Reply, error) {
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
	switch {
	case code == "00000A" && d == link.DefaultDomain:
		return authority.Reply{Kind: authority.Found, Version: 3, Code: code, URL: "https://example.com/", RedirectType: 302, Status: link.Active}, nil
	case code == "00000A" && d == 3:
		return authority.Reply{Kind: authority.Found, Version: 4, Domain: 3, Code: code, URL: "https://acme.example/", RedirectType: 302, Status: link.Active}, nil
	case code == "wrong-domain":
		// A broken lookup answering with another domain's link.
		return authority.Reply{Kind: authority.Found, Version: 5, Domain: d + 1, Code: code, URL: "https://other.example/", RedirectType: 302, Status: link.Active}, nil
	case code == "broken":
		return authority.Reply{}, errors.New("database down")
	}
	return authority.Reply{Kind: authority.NotFound, Version: 9}, nil
}

func (f *fakeLookup) LookupCodes(ctx context.Context, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error) {
	out := make([]authority.Reply, len(codes))
	for i, c := range codes {
		d := link.DefaultDomain
		if len(domains) > 0 {
			d = domains[i]
		}
		r, err := f.lookup(ctx, d, c)
		if err != nil {
			return nil, 0, err
		}
		r.Version = map[bool]uint64{true: r.Version, false: 0}[r.Kind == authority.Found]
		out[i] = r
	}
	return out, 9, nil
}

type fakeFrontiers struct{ fail bool }

func (f fakeFrontiers) Frontiers(context.Context) ([]authority.Frontier, time.Duration, error) {
	if f.fail {
		return nil, 0, errors.New("database down")
	}
	return []authority.Frontier{{Namespace: "default", Start: 1, End: 1000, Next: 100, Ceiling: 300}}, 1500 * time.Millisecond, nil
}

func start(t *testing.T, lookup Lookup, cfg Config) (*Responder, func(code string) authority.Reply) {
	t.Helper()
	r, ask, _ := startAsk(t, lookup, fakeFrontiers{}, cfg)
	return r, ask
}

// startAsk runs a responder and returns it with a single-code asker and a
// raw asker on AskSubject.
func startAsk(t *testing.T, lookup Lookup, frontiers Frontiers, cfg Config) (*Responder, func(code string) authority.Reply, func(data []byte) []byte) {
	t.Helper()
	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	r := New(nc, lookup, frontiers, cfg)
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
	// The subscription reaches the server asynchronously: retry "no
	// responders" within a bound. Asks run on goroutines of their own, so
	// the wait reports rather than failing the test.
	request := func(subject string, data []byte) (msg *nats.Msg, err error) {
		_ = poll.Wait(context.Background(), "an answer", 10*time.Second, func() bool {
			msg, err = client.Request(subject, data, 5*time.Second)
			return err == nil
		})
		return msg, err
	}
	ask := func(code string) authority.Reply {
		t.Helper()
		msg, err := request(authority.Subject, []byte(code))
		if err != nil {
			t.Errorf("request %q: %v", code, err)
			return authority.Reply{}
		}
		var rep authority.Reply
		if err := authority.Unmarshal(msg.Data, &rep); err != nil {
			t.Errorf("reply to %q: %v", code, err)
		}
		return rep
	}
	raw := func(data []byte) []byte {
		t.Helper()
		msg, err := request(authority.AskSubject, data)
		if err != nil {
			t.Fatalf("question: %v", err)
		}
		return msg.Data
	}
	return r, ask, raw
}

// TestQuestions: a question is answered code by code at its index, with the
// frontier and its promise when it asks; a database failure anywhere, or a
// malformed question, is Unavailable as a whole, never a NotFound.
func TestQuestions(t *testing.T) {
	r, _, raw := startAsk(t, &fakeLookup{}, fakeFrontiers{}, Config{})
	ask := func(q authority.Question) authority.Answer {
		t.Helper()
		b, err := authority.MarshalQuestion(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		var a authority.Answer
		if err := authority.UnmarshalAnswer(raw(b), &q, &a); err != nil {
			t.Fatalf("answer to %+v: %v", q, err)
		}
		return a
	}
	a := ask(authority.Question{Frontier: true, Codes: []string{"00000B", "00000A"}})
	if a.Kind != authority.Found || a.Version != 9 || len(a.Replies) != 2 || a.Replies[0].Kind != authority.NotFound ||
		a.Replies[1].Kind != authority.Found || a.Replies[1].Code != "00000A" || a.Replies[1].URL != "https://example.com/" {
		t.Fatalf("answer %+v", a)
	}
	if len(a.Frontiers) != 1 || a.Frontiers[0].Ceiling != 300 || a.PromiseMillis != 1500 {
		t.Fatalf("frontier %+v, promise %d ms; want the allocator's, 1500 ms", a.Frontiers, a.PromiseMillis)
	}
	if a := ask(authority.Question{Codes: []string{"00000A"}}); len(a.Frontiers) != 0 || a.PromiseMillis != 0 {
		t.Errorf("a question without the frontier got %+v", a)
	}
	if a := ask(authority.Question{Codes: []string{"00000A", "broken"}}); a.Kind != authority.Unavailable {
		t.Errorf("a question with a failing code: %+v; want Unavailable", a)
	}
	var a2 authority.Answer
	if err := authority.UnmarshalAnswer(raw([]byte{2, 0, 1, 1, 'x'}), &authority.Question{}, &a2); err != nil || a2.Kind != authority.Unavailable {
		t.Errorf("a malformed question: %+v, %v; want Unavailable", a2, err)
	}
	if r.Invalid.Load() != 1 || r.Questions.Load() != 4 || r.FrontierReads.Load() != 1 {
		t.Errorf("counters: invalid %d, questions %d, frontier reads %d; want 1, 4, 1", r.Invalid.Load(), r.Questions.Load(), r.FrontierReads.Load())
	}
	// Codes on domains: each answered on its own, a domain the lookup
	// does not know NotFound, and a lookup answering with another
	// domain's link is Unavailable, never that link.
	a = ask(authority.Question{Codes: []string{"00000A", "00000A", "00000A"}, Domains: []link.DomainID{0, 3, 9}})
	if a.Kind != authority.Found || len(a.Replies) != 3 || a.Replies[0].URL != "https://example.com/" ||
		a.Replies[1].Domain != 3 || a.Replies[1].URL != "https://acme.example/" || a.Replies[2].Kind != authority.NotFound {
		t.Fatalf("answer on domains 0, 3, 9: %+v", a)
	}
	if a := ask(authority.Question{Codes: []string{"wrong-domain"}, Domains: []link.DomainID{3}}); a.Kind != authority.Unavailable {
		t.Errorf("a lookup answering with another domain's link: %+v; want Unavailable", a)
	}
	if r.Failed.Load() != 2 || r.Questions.Load() != 6 {
		t.Errorf("counters: failed %d, questions %d; want 2, 6", r.Failed.Load(), r.Questions.Load())
	}
	_, _, raw = startAsk(t, &fakeLookup{}, fakeFrontiers{fail: true}, Config{})
	q := authority.Question{Frontier: true, Codes: []string{"00000A"}}
	b, _ := authority.MarshalQuestion(nil, &q)
	if err := authority.UnmarshalAnswer(raw(b), &q, &a2); err != nil || a2.Kind != authority.Unavailable {
		t.Errorf("the frontier unreadable: %+v, %v; want Unavailable", a2, err)
	}
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
	// Past the bound the test goes on: the answers below are what it checks.
	_ = poll.Wait(context.Background(), "three lookups running", 10*time.Second, func() bool { return f.running.Load() >= 3 })
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

// LookupKeys answers codes as LookupCodes and knows one host; "evil.example"
// is answered with a domain of another host (a broken lookup), and
// "broken.example" fails.
func (f *fakeLookup) LookupKeys(ctx context.Context, domains []link.DomainID, codes, hosts []string) ([]authority.Reply, []link.Domain, uint64, error) {
	var reps []authority.Reply
	if len(codes) > 0 {
		var err error
		if reps, _, err = f.LookupCodes(ctx, domains, codes); err != nil {
			return nil, nil, 0, err
		}
	}
	var found []link.Domain
	for _, h := range hosts {
		switch h {
		case "go.acme.com":
			found = append(found, link.Domain{ID: 3, Host: h, TenantID: 1, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 8})
		case "evil.example":
			found = append(found, link.Domain{ID: 4, Host: "victim.example", TenantID: 2, CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 8})
		case "broken.example":
			return nil, nil, 0, errors.New("database down")
		}
	}
	return reps, found, 9, nil
}

// TestQuestionsHosts: hosts are answered with the active domains that have
// them, beside the codes of the same question; a lookup that fails, or
// that names a host not asked, is answered Unavailable, never with a
// domain the edge would serve on the wrong host.
func TestQuestionsHosts(t *testing.T) {
	r, _, raw := startAsk(t, &fakeLookup{}, fakeFrontiers{}, Config{})
	ask := func(q authority.Question) authority.Answer {
		t.Helper()
		b, err := authority.MarshalQuestion(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		var a authority.Answer
		if err := authority.UnmarshalAnswer(raw(b), &q, &a); err != nil {
			t.Fatalf("answer to %+v: %v", q, err)
		}
		return a
	}
	a := ask(authority.Question{Codes: []string{"00000A"}, Domains: []link.DomainID{3}, Hosts: []string{"go.acme.com", "nobody.example"}})
	if a.Kind != authority.Found || len(a.Replies) != 1 || a.Replies[0].URL != "https://acme.example/" {
		t.Fatalf("answer = %+v; want the code's link", a)
	}
	if d, ok := a.DomainOf("go.acme.com"); !ok || d.ID != 3 || len(a.Domains) != 1 {
		t.Errorf("domains = %+v; want go.acme.com's only", a.Domains)
	}
	if a := ask(authority.Question{Hosts: []string{"nobody.example"}}); a.Kind != authority.Found || len(a.Domains) != 0 {
		t.Errorf("an unknown host = %+v; want an answer without domains", a)
	}
	for _, h := range []string{"evil.example", "broken.example"} {
		if a := ask(authority.Question{Hosts: []string{h}}); a.Kind != authority.Unavailable {
			t.Errorf("host %s = %+v; want Unavailable", h, a)
		}
	}
	if r.HostsFound.Load() != 1 || r.HostsNotFound.Load() != 2 || r.Failed.Load() != 2 {
		t.Errorf("hosts found %d, not found %d, failed %d; want 1, 2, 2", r.HostsFound.Load(), r.HostsNotFound.Load(), r.Failed.Load())
	}
}
