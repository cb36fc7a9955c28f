package changefeed

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

type recorder struct {
	mu       sync.Mutex
	versions []uint64
}

func (r *recorder) Apply(e *store.Entry) bool {
	r.mu.Lock()
	r.versions = append(r.versions, e.Version)
	r.mu.Unlock()
	return true
}

func (r *recorder) seen() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.versions...)
}

// TestRestartRepositions: a feed started after a snapshot's position
// applies only what follows it, and a Restart while running replays from
// the new position without applying anything of the old consumer after it.
func TestRestartRepositions(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	for v := uint64(1); v <= 10; v++ {
		natstest.PublishChange(t, js, &linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink,
			Code: fmt.Sprintf("code%02d", v), URL: "https://example.com/", RedirectType: 302, Status: link.Active})
	}
	rec := &recorder{}
	f := New(js, rec, nil)
	f.Restart(6, 6) // as after a snapshot at stream sequence 6
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := poll.Wait(ctx, what, 30*time.Second, cond); err != nil {
			t.Fatalf("%v: feed at %+v, applied %v", err, f.Position(), rec.seen())
		}
	}
	waitFor("catch up after 6", func() bool { p := f.Position(); return p.CaughtUp && p.Seq == 10 })
	if got := rec.seen(); fmt.Sprint(got) != "[7 8 9 10]" || !f.Complete() {
		t.Fatalf("applied %v (complete %v), want [7 8 9 10] without a gap", got, f.Complete())
	}
	f.Restart(2, 2)
	waitFor("replay after 2", func() bool { p := f.Position(); return p.CaughtUp && p.Seq == 10 && len(rec.seen()) == 12 })
	if got := rec.seen(); fmt.Sprint(got) != "[7 8 9 10 3 4 5 6 7 8 9 10]" || !f.Complete() {
		t.Fatalf("applied %v (complete %v), want a replay from 3", got, f.Complete())
	}
}

func linkEvent(v uint64) linkevent.Event {
	return linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Code: fmt.Sprintf("code%02d", v),
		URL: fmt.Sprintf("https://example.com/%d", v), RedirectType: 302, Status: link.Active}
}

// run is linkEvent(from) to linkEvent(to), chained.
func run(from, to uint64) []linkevent.Event {
	var evs []linkevent.Event
	for v := from; v <= to; v++ {
		evs = append(evs, linkEvent(v))
	}
	return evs
}

// startFeed runs a feed into a's store until the test ends.
func startFeed(t *testing.T, f *Feed) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitPos(t *testing.T, f *Feed, rec *recorder, what string, cond func(Position) bool) {
	t.Helper()
	if err := poll.Wait(context.Background(), what, 30*time.Second, func() bool { return cond(f.Position()) }); err != nil {
		t.Fatalf("%v: feed at %+v, applied %v", err, f.Position(), rec.seen())
	}
}

// TestBothShapes: a stream an old control began (one JSON event per
// message) and a new one continued (batches) is applied event by event, in
// order, each once, into the real layers; a Restart after a batch's
// sequence with its last version starts exactly after it.
func TestBothShapes(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	for _, e := range run(1, 3) {
		natstest.PublishChange(t, js, &e)
	}
	natstest.PublishChanges(t, js, run(4, 8)...)               // seq 4
	natstest.PublishChanges(t, js, run(9, 9)...)               // seq 5
	afterSeq := natstest.PublishChanges(t, js, run(10, 14)...) // seq 6
	natstest.PublishChanges(t, js, run(15, 20)...)             // seq 7

	layers := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments)}
	rec := &recorder{}
	f := New(js, &both{layers, rec}, nil)
	startFeed(t, f)
	waitPos(t, f, rec, "apply all 20", func(p Position) bool { return p.CaughtUp && p.Seq == 7 })
	if got := rec.seen(); fmt.Sprint(got) != fmt.Sprint(versions(1, 20)) || !f.Complete() || f.Position().Version != 20 || f.Position().Bad != 0 {
		t.Fatalf("applied %v (position %+v), want 1 to 20 once each, in order, without a gap", got, f.Position())
	}
	for v := uint64(1); v <= 20; v++ {
		e := linkEvent(v)
		hit, ok := layers.Find(e.Domain, []byte(e.Code))
		if !ok || !hit.Overlay || hit.Rec.URL() != e.URL || hit.Rec.Version != v || !layers.Hint.MayContain(e.Domain, []byte(e.Code)) {
			t.Fatalf("%s after the feed: %+v, %v; want version %d to %s, in the hint", e.Code, hit.Rec, ok, v, e.URL)
		}
	}
	// As after a snapshot taken at that batch: its position is the
	// message's sequence and its last version.
	f.Restart(afterSeq, 14)
	waitPos(t, f, rec, "replay after 14", func(p Position) bool { return p.CaughtUp && p.Seq == 7 && len(rec.seen()) == 26 })
	if got := rec.seen()[20:]; fmt.Sprint(got) != fmt.Sprint(versions(15, 20)) || !f.Complete() {
		t.Fatalf("after a restart at sequence %d, applied %v (complete %v), want 15 to 20 without a gap", afterSeq, got, f.Complete())
	}
}

func versions(from, to uint64) []uint64 {
	var vs []uint64
	for v := from; v <= to; v++ {
		vs = append(vs, v)
	}
	return vs
}

// both applies to the layers and records the versions.
type both struct {
	*store.Layers
	rec *recorder
}

func (b *both) Apply(e *store.Entry) bool { b.rec.Apply(e); return b.Layers.Apply(e) }

// TestBatchGaps: a batch whose first event does not follow what was applied
// is a gap, and so is whatever follows a message that does not decode (none
// of whose events is applied).
func TestBatchGaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		publish func(t *testing.T, js jetstream.JetStream)
		applied []uint64
		bad     uint64
	}{
		{"batch after a hole", func(t *testing.T, js jetstream.JetStream) {
			natstest.PublishChanges(t, js, run(1, 3)...)
			natstest.PublishChanges(t, js, run(6, 8)...) // 6 says prev 5
		}, []uint64{1, 2, 3, 6, 7, 8}, 0},
		{"undecodable batch", func(t *testing.T, js jetstream.JetStream) {
			natstest.PublishChanges(t, js, run(1, 3)...)
			if _, err := js.Publish(context.Background(), linkevent.Subject, []byte{linkevent.FormatBatch, 9, 0, 0, 0}); err != nil {
				t.Fatal(err)
			}
			natstest.PublishChanges(t, js, run(7, 9)...) // as if the bad one held 4 to 6
		}, []uint64{1, 2, 3, 7, 8, 9}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, js := natstest.Start(t).Connect(t)
			natstest.ChangeStream(t, js)
			tc.publish(t, js)
			rec := &recorder{}
			f := New(js, rec, nil)
			startFeed(t, f)
			waitPos(t, f, rec, "catch up", func(p Position) bool { return p.CaughtUp && p.Version == tc.applied[len(tc.applied)-1] })
			if got := rec.seen(); fmt.Sprint(got) != fmt.Sprint(tc.applied) || f.Complete() || f.Position().Bad != tc.bad {
				t.Fatalf("applied %v, complete %v, bad %d; want %v, a gap, %d bad", got, f.Complete(), f.Position().Bad, tc.applied, tc.bad)
			}
		})
	}
}

// ordered records, for each link applied, whether its domain was known by
// then, and forwards everything to the layers.
type ordered struct {
	*store.Layers
	mu     sync.Mutex
	events []string
}

func (o *ordered) Apply(e *store.Entry) bool {
	_, known := o.Domains.Get(e.Domain)
	o.mu.Lock()
	o.events = append(o.events, fmt.Sprintf("link %d/%s v%d domain known %v", e.Domain, e.Code, e.Version, known))
	o.mu.Unlock()
	return o.Layers.Apply(e)
}

func (o *ordered) ApplyDomain(c link.Domain) error {
	o.mu.Lock()
	o.events = append(o.events, fmt.Sprintf("domain %d %s v%d", c.ID, c.Status, c.Version))
	o.mu.Unlock()
	return o.Layers.ApplyDomain(c)
}

func (o *ordered) seen() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.events)
}

// TestDomainEvents: domain events reach the layers' domain table in stream
// order with the link events, in both message shapes: a link on a new
// domain arrives after its domain; the same code on two domains is two
// links; a removed domain's host stops resolving, its links stay.
func TestDomainEvents(t *testing.T) {
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	acme := link.Domain{ID: 3, Host: "go.acme.test", TenantID: 9, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive}
	removed := acme
	removed.Status = link.DomainRemoved
	platform := link.Domain{ID: 0, Host: "edge.test", CodeMode: link.CodesSequential, Status: link.DomainActive}
	on := func(v uint64, d link.DomainID, url string) linkevent.Event {
		return linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Domain: d, Code: "00000A", URL: url,
			RedirectType: 302, Status: link.Active}
	}
	dom := func(v uint64, c link.Domain) linkevent.Event {
		return linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindDomain, Conf: &c}
	}
	natstest.PublishChanges(t, js, dom(1, platform), dom(2, acme), on(3, 3, "https://acme.example/"), on(4, 0, "https://platform.example/"))
	ev := dom(5, removed)
	natstest.PublishChange(t, js, &ev) // a single JSON event, as an older relay sends

	keys, err := ff1.ParseKeys(strings.NewReader("k1 AAECAwQFBgcICQoLDA0ODw==\n"))
	if err != nil {
		t.Fatal(err)
	}
	layers := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1000, 0.01), Segments: new(store.Segments),
		Domains: store.NewDomains(keys)}
	o := &ordered{Layers: layers}
	f := New(js, o, nil)
	startFeed(t, f)
	waitPos(t, f, &recorder{}, "apply all 5", func(p Position) bool { return p.CaughtUp && p.Version == 5 })
	want := "[domain 0 active v1 domain 3 active v2 link 3/00000A v3 domain known true link 0/00000A v4 domain known true domain 3 removed v5]"
	if got := o.seen(); got != want {
		t.Fatalf("applied %s;\nwant %s", got, want)
	}
	if p := f.Position(); p.Bad != 0 || p.BadDomains != 0 || !f.Complete() {
		t.Errorf("position %+v; want nothing refused and no gap", p)
	}
	for d, url := range map[link.DomainID]string{0: "https://platform.example/", 3: "https://acme.example/"} {
		if h, ok := layers.Find(d, []byte("00000A")); !ok || h.Rec.URL() != url {
			t.Errorf("Find(%d, 00000A) = %+v, %v; want %s", d, h.Rec, ok, url)
		}
	}
	if _, ok := layers.Domains.ByHost([]byte("go.acme.test")); ok {
		t.Error("the removed domain's host still resolves")
	}
	if s, ok := layers.Domains.ByHost([]byte("edge.test")); !ok || s.Conf.ID != 0 || !layers.Domains.Known() {
		t.Errorf("the platform's host: %+v, %v, known %v", s, ok, layers.Domains.Known())
	}
	if s, ok := layers.Domains.Get(3); !ok || s.Conf.Status != link.DomainRemoved || s.Conf.Version != 5 {
		t.Errorf("Get(3) = %+v, %v; want removed at version 5", s, ok)
	}
}
