// Package poll waits for a condition with a bound: it asks again every few
// milliseconds instead of sleeping a fixed time, and gives up, naming what
// it waited for, once the bound passes. It is for tests and for the stack
// that runs edgelink's pieces for them (internal/stack); it imports only
// the standard library, so any package's tests can use it.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Every is how often Wait and Until ask again: often enough that a test
// does not wait long past its condition, rarely enough that a condition
// which asks a server (a query, a request) costs a busy machine little.
const Every = 20 * time.Millisecond

// Wait asks cond until it holds, ctx ends or within passes, whichever is
// first, pausing Every between asks. It returns nil once cond held and
// otherwise an error naming what. cond runs on the caller's goroutine, so
// it may record what it saw for the caller's own failure message.
func Wait(ctx context.Context, what string, within time.Duration, cond func() bool) error {
	return WaitEvery(ctx, what, within, Every, cond)
}

// WaitEvery is Wait pausing every between asks, for a condition that is
// costly to ask or that the asking itself slows down.
func WaitEvery(ctx context.Context, what string, within, every time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			// One last ask: the bound may have passed while cond ran.
			if cond() {
				return nil
			}
			return fmt.Errorf("%s: not within %v", what, within)
		case <-tick.C:
		}
	}
	return nil
}

// Until is Wait for a test: it fails t (t.Fatal, so from the test's own
// goroutine) when cond does not hold within the bound.
func Until(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if err := Wait(context.Background(), what, within, cond); err != nil {
		t.Fatal(err)
	}
}
