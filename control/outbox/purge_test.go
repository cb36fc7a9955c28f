package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/internal/poll"
)

// TestRelayPurgesPublishedRows: published rows older than PurgeAfter leave
// the outbox while the relay is idle, the stream keeps every event, and a
// row written after the purge is published as usual.
func TestRelayPurgesPublishedRows(t *testing.T) {
	e := newEnv(t)
	var want []uint64
	for range 25 {
		want = append(want, e.create(t))
	}
	r := outbox.New(e.store, e.js, outbox.Config{PollInterval: 20 * time.Millisecond,
		PurgeEvery: 10 * time.Millisecond, PurgeAfter: time.Nanosecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	e.waitVersions(t, want)
	rows := func() int {
		var n int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	poll.Until(t, "the published rows purged", 30*time.Second, func() bool { return rows() == 0 })
	if got := r.Stats().Purged; got != uint64(len(want)) {
		t.Errorf("Stats().Purged = %d, want %d", got, len(want))
	}
	want = append(want, e.create(t))
	e.waitVersions(t, want)
}
