package clicks

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/natstest"
)

func TestRecordDoesNotAllocate(t *testing.T) {
	r := New(nil, Config{Buffer: 1 << 20})
	code := []byte("00000A")
	if n := testing.AllocsPerRun(1000, func() { r.Record(code, 1) }); n != 0 {
		t.Fatalf("Record allocated %v times", n)
	}
}

func TestFullBufferDrops(t *testing.T) {
	r := New(nil, Config{Buffer: 4})
	for range 10 {
		r.Record([]byte("00000A"), 1)
	}
	if r.Recorded.Load() != 4 || r.Dropped.Load() != 6 {
		t.Fatalf("recorded %d dropped %d; want 4 and 6", r.Recorded.Load(), r.Dropped.Load())
	}
}

func TestPublishesBatches(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	r := New(js, Config{Edge: "e1", Batch: 100, FlushEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 250 {
		r.Record([]byte("00000A"), int64(i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.Published.Load() < 250 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.Published.Load() != 250 || r.Dropped.Load() != 0 {
		t.Fatalf("published %d dropped %d; want 250 and 0", r.Published.Load(), r.Dropped.Load())
	}
	cons, err := js.OrderedConsumer(context.Background(), clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for got < 250 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d clicks: %v", got, err)
		}
		cs, err := clicks.Decode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Code != "00000A" || c.At != int64(got) {
				t.Fatalf("click %d = %+v", got, c)
			}
			got++
		}
	}
}
