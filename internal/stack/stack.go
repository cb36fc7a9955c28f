// Package stack runs edgelink's pieces for tests, benchmarks and the local
// all-in-one mode: PostgreSQL (a server of its own, a fresh database on the
// test process's shared server, streaming replicas), NATS JetStream (one
// embedded server, an in-process cluster, or an external URL), controls and
// edges in this process or as child processes, and a small creator and
// visitor client.
//
// Every piece has two forms. StartX takes a context, returns an error and
// a handle whose Close (or Stop) the caller owes; NewX takes a testing.TB,
// fails the test when the piece cannot start, and registers the stop with
// t.Cleanup, so whatever a test starts is stopped when it ends, failed or
// not. Pieces are stopped in the reverse order of their cleanups: start
// PostgreSQL and NATS before the controls and edges that use them.
//
// Waits are bounded polls (Poll, Eventually), never fixed sleeps.
package stack

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/logbuf"
	"github.com/edgelink/edgelink/internal/poll"
)

// Poll is poll.Wait, for the stack's callers: it returns nil once cond
// held and an error naming what when ctx ended or within passed first.
func Poll(ctx context.Context, what string, within time.Duration, cond func() bool) error {
	return poll.Wait(ctx, what, within, cond)
}

// Eventually is poll.Until: it fails the test when cond does not hold
// within the bound.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, within, cond)
}

// LogBuffer collects a component's output for parsing and for failure
// reports. It is safe for concurrent use; the zero value is ready.
type LogBuffer struct{ logbuf.Buffer }

// Lines is everything written so far, one line an element.
func (l *LogBuffer) Lines() []string {
	return strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
}

// Tail is the last n bytes written, marked when cut.
func (l *LogBuffer) Tail(n int) string {
	out := l.String()
	if len(out) > n {
		out = "…" + out[len(out)-n:]
	}
	return out
}

// folder returns dir, or when it is empty a new temporary folder, which it
// also records in *temp for the piece's Close to remove.
func folder(dir, what string, temp *string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "edgelink-stack-"+what+"-")
	*temp = dir
	return dir, err
}

// closeOnError closes a piece that failed to start, joining what closing
// it said to the error that stopped it.
func closeOnError(err *error, close func() error) {
	if *err != nil {
		*err = errors.Join(*err, close())
	}
}

// started is a NewX: it runs start with a context bounded by within (0:
// none, for a piece that lives on the context it is given), fails t when
// the piece does not start, and stops it with stop when the test ends.
func started[T any](t testing.TB, what string, within time.Duration, start func(context.Context) (T, error), stop func(T) error) T {
	t.Helper()
	ctx := context.Background()
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	v, err := start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, what, func() error { return stop(v) })
	return v
}

// cleanup registers stop with t, reporting its error.
func cleanup(t testing.TB, what string, stop func() error) {
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop %s: %v", what, err)
		}
	})
}
