package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// BenchmarkRelayThroughput measures how fast a relay drains an outbox backlog
// onto the stream: the rate a bulk load reaches edges at.
func BenchmarkRelayThroughput(b *testing.B) {
	const rows = 20_000
	ctx := context.Background()
	pool := pgtest.Pool(b)
	_, js := natstest.Start(b).Connect(b)
	for b.Loop() {
		b.StopTimer()
		if _, err := pool.Exec(ctx, `
			INSERT INTO outbox (version, kind, code, url, redirect_type, status)
			SELECT nextval('change_version_seq'), 'link', 'bench-' || g, 'https://example.com/landing?utm_source=bench&n=' || g, 302, 'active'
			FROM generate_series(1, $1) g`, rows); err != nil {
			b.Fatal(err)
		}
		r := outbox.New(postgres.New(pool), js, outbox.Config{PollInterval: 10 * time.Millisecond})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		b.StartTimer()
		go func() { defer close(done); _ = r.Run(rctx) }()
		for r.Stats().Published < rows {
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		cancel()
		<-done
		if _, err := pool.Exec(ctx, `DELETE FROM outbox`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "events/s")
}
