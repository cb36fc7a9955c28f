package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A backoff doubles from min, stays at max, and takes what Set gives it as
// the next pause, doubling again from there (never below min).
func TestBackoff(t *testing.T) {
	b := NewBackoff(100*time.Millisecond, time.Second)
	var got []time.Duration
	for range 6 {
		got = append(got, b.Next())
	}
	b.Set(0)
	got = append(got, b.Next(), b.Next())
	b.Set(700 * time.Millisecond)
	got = append(got, b.Next(), b.Next())
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, 0, 100 * ms, 700 * ms, time.Second}
	if len(got) != len(want) {
		t.Fatalf("pauses %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pauses %v; want %v", got, want)
		}
	}
}

// Run calls the session again after every return, asking pause with the
// session's error each time, and returns once the context ends, without
// asking pause for that last return.
func TestRunUntilTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errBoom := errors.New("boom")
	sessions, pauses := 0, 0
	Run(ctx, func(context.Context) error {
		sessions++
		if sessions == 5 {
			cancel()
		}
		return errBoom
	}, func(err error) time.Duration {
		if !errors.Is(err, errBoom) {
			t.Errorf("pause asked with %v; want the session's error", err)
		}
		pauses++
		return 0
	})
	if sessions != 5 || pauses != 4 {
		t.Fatalf("%d sessions, %d pauses; want 5 and 4", sessions, pauses)
	}
}

// A pause ends early when the context ends.
func TestRunPauseEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sessions := 0
	Run(ctx, func(context.Context) error {
		sessions++
		return errors.New("down")
	}, func(error) time.Duration {
		cancel()
		return time.Hour
	})
	if sessions != 1 {
		t.Fatalf("%d sessions; want 1", sessions)
	}
}
