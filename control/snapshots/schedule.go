package snapshots

import (
	"bytes"
	"context"
	"time"
)

// Schedule says when control builds and publishes a snapshot by itself:
// after Changes new changes on the stream, or after Every when anything
// changed at all, whichever comes first. Zero fields take the defaults.
type Schedule struct {
	Changes  uint64        // default 100,000
	Every    time.Duration // default 10 minutes
	Check    time.Duration // how often the stream is looked at; default 10s
	Replicas int
	// Disabled turns scheduled builds off: for deployments that build
	// with `control snapshot build` elsewhere, and for tests that must not
	// see snapshots swapped in under them.
	Disabled bool
}

// Run builds and publishes on sched until ctx is done. Several control
// instances may run it: each publish is a complete, named snapshot, so a
// duplicate build only costs work. Failures are logged and retried at the
// next check; Run returns only when ctx ends.
func (b *Builder) Run(ctx context.Context, sched Schedule) error {
	if sched.Disabled {
		return nil
	}
	if sched.Changes == 0 {
		sched.Changes = 100_000
	}
	if sched.Every <= 0 {
		sched.Every = 10 * time.Minute
	}
	if sched.Check <= 0 {
		sched.Check = 10 * time.Second
	}
	var lastVersion uint64
	lastAt := time.Time{}
	tick := time.NewTicker(sched.Check)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		v, _, err := streamPosition(ctx, b.js)
		if err != nil {
			b.log.Warn("snapshot schedule: read stream position", "err", err)
			continue
		}
		due := v >= lastVersion+sched.Changes || (v != lastVersion && b.now().Sub(lastAt) >= sched.Every)
		if !due {
			continue
		}
		var buf bytes.Buffer
		h, err := b.Build(ctx, &buf, nil)
		if err != nil {
			b.log.Warn("snapshot schedule: build", "err", err)
			continue
		}
		name, err := Publish(ctx, b.js, buf.Bytes(), sched.Replicas)
		if err != nil {
			b.log.Warn("snapshot schedule: publish", "err", err)
			continue
		}
		lastVersion, lastAt = h.ChangeVersion, b.now()
		b.log.Info("snapshot published", "name", name, "entries", h.Entries, "bytes", buf.Len(), "change_version", h.ChangeVersion)
	}
}
