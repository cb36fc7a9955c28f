package poll

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A condition that comes to hold ends the wait with nil, having been
// asked until then and not after.
func TestWaitReturnsOnceCondHolds(t *testing.T) {
	asks := 0
	err := Wait(context.Background(), "the third ask", time.Minute, func() bool {
		asks++
		return asks == 3
	})
	if err != nil || asks != 3 {
		t.Fatalf("Wait = %v after %d asks; want nil after 3", err, asks)
	}
}

// A condition that never holds ends the wait at the bound with an error
// that names what was waited for.
func TestWaitNamesWhatAtTheBound(t *testing.T) {
	err := Wait(context.Background(), "the impossible", 20*time.Millisecond, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "the impossible") {
		t.Fatalf("Wait = %v; want an error naming the impossible", err)
	}
}

// An ended context ends the wait, whatever the bound.
func TestWaitStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, "anything", time.Hour, func() bool { return false }); err == nil {
		t.Fatal("Wait on an ended context = nil; want an error")
	}
}
