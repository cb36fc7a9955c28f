package edgeserver

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/redirect"
	"github.com/edgelink/edgelink/edge/snapsync"
)

// probes back the edge's /-/startupz, /-/readyz and /-/livez.
//
// Readiness is lost only for reasons of this edge's own: booting, replaying
// the stream after boot while the stream is reachable, or a gap in what it
// applied (it may hold stale links until its re-sync from a snapshot). What
// every edge shares (NATS down, a slow stream) is reported as degraded but
// keeps it in service: it answers every link it knows, and 503 (never a
// guessed 404) for recent ones it cannot check. Startup: the snapshot (or,
// with none published, the empty store the stream is replayed into) is
// loaded. Live: the process makes progress; NATS, control or PostgreSQL
// being down is not a reason to restart an edge that serves what it knows.
type probes struct {
	syncer    *snapsync.Syncer
	feed      *changefeed.Feed
	nc        *nats.Conn
	maxLag    uint64
	beat      *atomic.Int64
	inService atomic.Bool
}

func newProbes(syncer *snapsync.Syncer, feed *changefeed.Feed, nc *nats.Conn, maxLag uint64, beat *atomic.Int64) *probes {
	return &probes{syncer: syncer, feed: feed, nc: nc, maxLag: maxLag, beat: beat}
}

func (p *probes) attach(h *redirect.Handler) {
	h.Started, h.Ready, h.Degraded, h.Live = p.started, p.ready, p.degraded, p.live
}

func (p *probes) started() error {
	if !p.syncer.Booted() {
		return errors.New("booting: loading the snapshot")
	}
	return nil
}

func (p *probes) ready() error {
	pos := p.feed.Position()
	switch {
	case !p.syncer.Booted():
		return errors.New("booting: loading the snapshot")
	case pos.Gaps > 0:
		return fmt.Errorf("re-syncing: %d gaps in the change stream", pos.Gaps)
	case p.inService.Load():
		return nil
	case p.nc.IsConnected() && !pos.CaughtUp:
		return fmt.Errorf("catching up: %d stream messages pending", pos.Pending)
	}
	p.inService.Store(true)
	return nil
}

func (p *probes) degraded() string {
	pos := p.feed.Position()
	switch {
	case !p.nc.IsConnected():
		return "change stream unreachable; serving known links, recent ones answer 503"
	case !pos.CaughtUp || pos.Pending > p.maxLag:
		return fmt.Sprintf("lagging: %d stream messages pending", pos.Pending)
	}
	return ""
}

func (p *probes) live() error {
	if since := time.Since(time.Unix(0, p.beat.Load())); since > liveStall {
		return fmt.Errorf("stalled: the edge's heartbeat has not run for %s", since.Round(time.Second))
	}
	return nil
}

// liveStall is how long the heartbeat may go without running before /-/livez
// fails: a scheduler stall or deadlock that long is not going away.
const liveStall = 30 * time.Second

// heartbeat stamps beat every second until ctx is done.
func heartbeat(ctx context.Context, beat *atomic.Int64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			beat.Store(now.UnixNano())
		}
	}
}
