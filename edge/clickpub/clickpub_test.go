package clickpub

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

var (
	code    = []byte("00000A")
	referer = []byte("https://t.co/abc?utm=1")
	iphone  = []byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")
	alice   = netip.MustParseAddr("203.0.113.7")
)

// capture is a Publisher keeping every message, optionally failing.
type capture struct {
	mu   sync.Mutex
	msgs []clicks.Batch
	fail bool
}

func (c *capture) Publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return nil, errors.New("nats down")
	}
	b, err := clicks.Decode(data)
	if err != nil {
		return nil, err
	}
	c.msgs = append(c.msgs, b)
	return &jetstream.PubAck{}, nil
}

func (c *capture) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, nil
}

func (c *capture) clicks() (n int, last clicks.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		n += len(m.Clicks)
		last = m
	}
	return n, last
}

func TestRecordDoesNotAllocate(t *testing.T) {
	r := New(nil, Config{Buffer: 1 << 20})
	if n := testing.AllocsPerRun(1000, func() { r.Record(12345, code, referer, iphone, alice, 302, 0, 1) }); n != 0 {
		t.Fatalf("Record allocated %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { r.RecordLatency(150 * time.Nanosecond) }); n != 0 {
		t.Fatalf("RecordLatency allocated %v times", n)
	}
}

func TestFullBufferDrops(t *testing.T) {
	r := New(nil, Config{Buffer: 4})
	for range 10 {
		r.Record(0, code, nil, nil, alice, 302, 0, 1)
	}
	if r.tail.Load() != 4 || r.Dropped.Load() != 6 || r.Buffered() != 4 {
		t.Fatalf("accepted %d dropped %d buffered %d; want 4, 6, 4", r.tail.Load(), r.Dropped.Load(), r.Buffered())
	}
}

// TestConcurrentRecordingLosesNothing: producers racing each other and the
// publisher, through many laps of a small ring; every click offered is
// either published (exactly once, intact: its own domain, status and
// rule) or counted dropped.
func TestConcurrentRecordingLosesNothing(t *testing.T) {
	pub := &capture{}
	r := New(pub, Config{Edge: "e1", Buffer: 256, Batch: 64, FlushEvery: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	const producers, each = 4, 5_000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				r.Record(link.DomainID(p), code, referer, iphone, alice, 301+p, uint8(p), int64(p*each+i))
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, last := pub.clicks()
	if uint64(got) != r.Published.Load() || uint64(got)+r.Dropped.Load() != producers*each {
		t.Fatalf("published %d (counter %d) + dropped %d; want %d in all", got, r.Published.Load(), r.Dropped.Load(), producers*each)
	}
	if last.Offered != producers*each || last.Dropped != r.Dropped.Load() || last.Edge != "e1" || last.Boot != r.Boot() {
		t.Fatalf("last message's source %+v; want offered %d dropped %d", last.Source, producers*each, r.Dropped.Load())
	}
	seen := make(map[int64]bool, got)
	for _, m := range pub.msgs {
		for _, c := range m.Clicks {
			if seen[c.At] || c.Code != "00000A" || c.Referrer != "t.co" || c.Device != clicks.DeviceMobile || c.Bot || c.Status != uint16(301+c.At/each) || c.Domain != link.DomainID(c.At/each) || c.Rule != uint8(c.At/each) {
				t.Fatalf("click %+v: duplicate or garbled", c)
			}
			seen[c.At] = true
		}
	}
}

func TestFailedPublishIsCountedDropped(t *testing.T) {
	pub := &capture{fail: true}
	r := New(pub, Config{Edge: "e1", Batch: 10})
	var buf []byte
	ensured := false
	for range 25 {
		r.Record(0, code, nil, nil, alice, 302, 0, 1)
	}
	for r.flush(context.Background(), &buf, &ensured) {
	}
	if r.Dropped.Load() != 10 || r.Buffered() != 15 {
		t.Fatalf("dropped %d buffered %d; want 10 and 15", r.Dropped.Load(), r.Buffered())
	}
}

func TestLatencyReportRetriedUntilPublished(t *testing.T) {
	pub := &capture{fail: true}
	r := New(pub, Config{Edge: "e1"})
	r.RecordLatency(150 * time.Nanosecond)
	r.RecordLatency(2 * time.Millisecond)
	ensured := false
	r.report(context.Background(), &ensured) // fails: kept
	r.RecordLatency(150 * time.Nanosecond)
	pub.mu.Lock()
	pub.fail = false
	pub.mu.Unlock()
	r.report(context.Background(), &ensured) // the kept one, then the new one
	if len(pub.msgs) != 2 {
		t.Fatalf("%d reports published; want 2", len(pub.msgs))
	}
	var sum clicks.Histogram
	for _, m := range pub.msgs {
		sum.Add(m.Latency)
	}
	if sum.Count() != 3 || sum[clicks.Bucket(150)] != 2 {
		t.Fatalf("reports hold %d values (%d at 150ns); want 3 (2)", sum.Count(), sum[clicks.Bucket(150)])
	}
}

func TestPublishesToTheStream(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	r := New(js, Config{Edge: "e1", Batch: 100, FlushEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for i := range 250 {
		r.Record(link.DomainID(i%3), code, referer, []byte("curl/8.0"), alice, 302, 0, int64(i))
	}
	cancel()
	<-done
	if r.Published.Load() != 250 || r.Dropped.Load() != 0 {
		t.Fatalf("published %d dropped %d; want 250 and 0", r.Published.Load(), r.Dropped.Load())
	}
	stream, err := js.Stream(context.Background(), clicks.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(context.Background())
	if info.Config.MaxBytes != clicks.MaxBytes || info.Config.Discard != jetstream.DiscardOld {
		t.Errorf("stream limits %d bytes, discard %v; want %d, old", info.Config.MaxBytes, info.Config.Discard, clicks.MaxBytes)
	}
	cons, err := js.OrderedConsumer(context.Background(), clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got, reports int
	for got < 250 || reports == 0 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d clicks: %v", got, err)
		}
		b, err := clicks.Decode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		if b.Latency != nil {
			reports++
			continue
		}
		for _, c := range b.Clicks {
			if c.Code != "00000A" || c.At != int64(got) || c.Domain != link.DomainID(got%3) || !c.Bot || c.Referrer != "t.co" {
				t.Fatalf("click %d = %+v", got, c)
			}
			got++
		}
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r := New(nil, Config{Buffer: 1 << 16})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var head uint64
		for pb.Next() {
			r.Record(0, code, referer, iphone, alice, 302, 0, 1)
			// Stand in for the publisher: keep the ring from filling.
			if r.tail.Load()-head > 1<<15 {
				r.drainForBench(&head)
			}
		}
	})
}
