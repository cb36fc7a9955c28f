package changefeed

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// BenchmarkFeedApply is the rate (events/s) at which a feed applies a
// stream backlog of link creates to an edge's layers (overlay, bloom hint),
// with the stream written one JSON event per message (before batching) and
// in batches of 1,000 (the relay's default).
func BenchmarkFeedApply(b *testing.B) {
	const backlog = 100_000
	for _, per := range []int{0, 1000} {
		name := "json"
		if per > 0 {
			name = fmt.Sprintf("batch%d", per)
		}
		b.Run(name, func(b *testing.B) {
			_, js := natstest.Start(b).Connect(b)
			natstest.ChangeStream(b, js)
			publishBacklog(b, js, backlog, per)
			var events int
			b.ReportAllocs()
			for b.Loop() {
				layers := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1<<20, 0.01), Segments: new(store.Segments)}
				f := New(js, layers, nil)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); _ = f.Run(ctx) }()
				err := poll.WaitEvery(ctx, "the feed applies the backlog", 5*time.Minute, time.Millisecond, func() bool {
					return f.Position().Version >= backlog
				})
				cancel()
				<-done
				if err != nil {
					b.Fatal(err)
				}
				events += backlog
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// publishBacklog writes versions 1 to n as link creates, per to a batch (0:
// one JSON event per message).
func publishBacklog(b *testing.B, js jetstream.JetStream, n, per int) {
	b.Helper()
	var (
		batch   linkevent.Batch
		futures []jetstream.PubAckFuture
	)
	send := func(data []byte, last uint64) {
		msg := &nats.Msg{Subject: linkevent.Subject, Data: data, Header: nats.Header{}}
		msg.Header.Set(linkevent.HeaderVersion, strconv.FormatUint(last, 10))
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	for v := uint64(1); v <= uint64(n); v++ {
		e := linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink, Code: fmt.Sprintf("b%07d", v),
			URL: fmt.Sprintf("https://example.com/landing?utm_source=bench&utm_campaign=winter&n=%d", v), RedirectType: 302, Status: link.Active}
		if per == 0 {
			data, err := linkevent.Marshal(&e)
			if err != nil {
				b.Fatal(err)
			}
			send(data, v)
			continue
		}
		if err := batch.Add(&e); err != nil {
			b.Fatal(err)
		}
		if batch.Len() == per || v == uint64(n) {
			send(append([]byte(nil), batch.Bytes()...), v)
			batch.Reset()
		}
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			b.Fatal(err)
		case <-time.After(time.Minute):
			b.Fatal("no publish ack within a minute")
		}
	}
}
