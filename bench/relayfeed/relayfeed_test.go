// Package relayfeedbench measures the change stream end to end on one
// machine: an outbox backlog in PostgreSQL published by control's relay to
// JetStream and applied by an edge's change feed to its store (overlay,
// bloom hint, segments), the path a bulk create takes to every edge. It
// lives outside control/ and edge/ because it wires both sides, which
// neither may import.
//
//	go test ./bench/relayfeed -run '^$' -bench RelayToEdge -benchtime 3x
//
// BenchmarkStreamFedMemory (memory_test.go) compares an edge's resident
// memory fed its links by the stream with the same edge booted from a
// snapshot of them; README.md says how to run both.
package relayfeedbench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		// The benchmark's edge process: see memory_test.go.
		if err := runChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, "relayfeed child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

// backlog is the outbox rows each iteration publishes and applies: a
// marketing batch's worth, large enough that start-up costs vanish.
const backlog = 200_000

// BenchmarkRelayToEdge is the rate (events/s) at which a backlog of link
// changes in the outbox reaches an edge's store: from the relay's start to
// the feed applying the last version. The timer covers only that; filling
// the outbox and starting the servers are outside it.
func BenchmarkRelayToEdge(b *testing.B) {
	ctx := context.Background()
	var events int
	for b.Loop() {
		b.StopTimer()
		pool := pgtest.Pool(b)
		_, js := natstest.Start(b).Connect(b)
		var last uint64
		if err := pool.QueryRow(ctx, `
			WITH o AS (
				INSERT INTO outbox (version, kind, code, url, redirect_type, status)
				SELECT nextval('change_version_seq'), 'link', 'b' || lpad(g::text, 7, '0'),
				       'https://example.com/landing?utm_source=bench&utm_campaign=winter&n=' || g, 302, 'active'
				FROM generate_series(1, $1) g
				RETURNING version)
			SELECT max(version) FROM o`, backlog).Scan(&last); err != nil {
			b.Fatal(err)
		}
		layers := &store.Layers{Overlay: store.NewOverlay(), Hint: store.NewHint(1<<20, 0.01), Segments: new(store.Segments)}
		feed := changefeed.New(js, layers, nil)
		relay := outbox.New(postgres.New(pool), js, outbox.Config{})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		b.StartTimer()
		go func() { _ = relay.Run(rctx); done <- struct{}{} }()
		go func() { _ = feed.Run(rctx); done <- struct{}{} }()
		// A coarse bound poll: it ends the timing within a few
		// milliseconds of the last apply, against seconds of work.
		err := poll.WaitEvery(ctx, "the edge applies the backlog", 10*time.Minute, time.Millisecond, func() bool {
			return feed.Position().Version >= last
		})
		b.StopTimer()
		cancel()
		<-done
		<-done
		if err != nil {
			b.Fatalf("%v: relay %+v, feed %+v", err, relay.Stats(), feed.Position())
		}
		if n := layers.Overlay.Len(); n != backlog {
			b.Fatalf("overlay holds %d codes, want %d", n, backlog)
		}
		events += backlog
		b.StartTimer()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
