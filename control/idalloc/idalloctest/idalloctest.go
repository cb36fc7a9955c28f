// Package idalloctest starts ID allocators for tests: a Config with short
// timeouts and backoff that logs into the test, and an allocator that is
// closed when the test ends. It is for _test.go files only.
package idalloctest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/idalloc"
)

// Config is a Config for nss with short timeouts and backoff, warnings
// logged into t, and onSegment (nil: none) told of every confirmed segment.
func Config(t testing.TB, onSegment func(idalloc.Segment), nss ...idalloc.Namespace) idalloc.Config {
	return idalloc.Config{
		Namespaces:  nss,
		LoadTimeout: 5 * time.Second,
		BackoffMin:  5 * time.Millisecond,
		BackoffMax:  100 * time.Millisecond,
		Tick:        20 * time.Millisecond,
		OnSegment:   onSegment,
		Logger:      slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Start runs an allocator on store, failing t when it cannot be made
// within 30 s. It is closed when the test ends; tests that skip Done leave
// segments open, and that close gives up on them after a second.
func Start(t testing.TB, store idalloc.Store, cfg idalloc.Config) *idalloc.Allocator {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := idalloc.New(ctx, store, cfg)
	if err != nil {
		t.Fatalf("idalloc.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	return a
}
