package idalloc_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/idalloc/idalloctest"
	"github.com/edgelink/edgelink/internal/pgtest"
)

// BenchmarkNext measures Next against a real Postgres authority at the
// default step and reports the lease transactions it needed per million IDs.
func BenchmarkNext(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		store := allocstore.New(pgtest.Pool(b))
		var leases atomic.Int64
		ns := idalloc.Namespace{Name: "bench", Start: 1, End: 50_000_000_000}
		cfg := idalloc.Config{Namespaces: []idalloc.Namespace{ns}, OnSegment: func(idalloc.Segment) { leases.Add(1) }}
		a := idalloctest.Start(b, store, cfg)
		ctx := context.Background()
		if err := a.WaitLoaded(ctx); err != nil {
			b.Fatal(err)
		}
		start := leases.Load()
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := a.Next(ctx, ns.Name); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			for b.Loop() {
				if _, err := a.Next(ctx, ns.Name); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(leases.Load()-start)/float64(b.N)*1e6, "tx/1M-IDs")
		s, _ := a.Stats(ns.Name)
		b.ReportMetric(float64(s.Waits), "waits")
	}
	b.Run("single", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}
