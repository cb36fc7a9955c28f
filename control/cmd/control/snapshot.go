package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/term"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/internal/atomicfile"
)

func (c *snapshotBuildCmd) Run(ctx context.Context, g *globals, stdout io.Writer, progress progressOut) error {
	return runSnapshotBuild(ctx, g.DatabaseURL, *c, stdout, progress.Writer)
}

func runSnapshotBuild(ctx context.Context, dsn string, c snapshotBuildCmd, stdout, stderr io.Writer) error {
	if c.Out == "" && !c.Publish {
		return usageError{errors.New("snapshot build: give --out FILE, --publish, or both")}
	}
	if err := c.snapshotBudget.validate(); err != nil {
		return err
	}
	pool, err := postgres.Open(ctx, dsn, 0)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	nc, err := nats.Connect(c.NATSURL, nats.Name("edgelink-control snapshot"))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	start := time.Now()
	var buf bytes.Buffer
	st := postgres.New(pool)
	b := snapshots.New(st, js, nil).WithBudget(c.Budget, st.Hotness(c.HotDays, nil))
	h, err := b.Build(ctx, &buf, progressPrinter(stderr))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "snapshot at change version %d (stream sequence %d): %d links, %d bytes (%.1f per link), built in %s\n",
		h.ChangeVersion, h.StreamSeq, h.Entries, buf.Len(), float64(buf.Len())/float64(max(h.Entries, 1)), time.Since(start).Round(time.Millisecond))
	if c.Budget > 0 {
		fmt.Fprintf(stdout, "memory budget: the hottest %d of %d codes hold entries; the bloom covers all of them\n", h.Entries, h.BloomCount)
	}
	if c.Out != "" {
		if err := atomicfile.Write(c.Out, buf.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "written to %s\n", c.Out)
	}
	if c.Publish {
		name, err := snapshots.Publish(ctx, js, buf.Bytes(), c.Replicas)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published as %s\n", name)
	}
	return nil
}

// progressPrinter redraws one line on a terminal; elsewhere (logs, CI) it
// stays quiet.
func progressPrinter(w io.Writer) snapshots.Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func(done, total int64) {
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(done) / float64(total)
		}
		fmt.Fprintf(w, "\rreading links: %d / %d (%.0f%%)", done, total, pct)
		if done >= total {
			fmt.Fprintln(w)
		}
	}
}
