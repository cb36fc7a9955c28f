package changefeed

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

type recorder struct {
	mu       sync.Mutex
	versions []uint64
}

func (r *recorder) Apply(e *store.Entry) bool {
	r.mu.Lock()
	r.versions = append(r.versions, e.Version)
	r.mu.Unlock()
	return true
}

func (r *recorder) seen() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.versions...)
}

// TestRestartRepositions: a feed started after a snapshot's position
// applies only what follows it, and a Restart while running replays from
// the new position without applying anything of the old consumer after it.
func TestRestartRepositions(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Start(t).Connect(t)
	natstest.ChangeStream(t, js)
	for v := uint64(1); v <= 10; v++ {
		natstest.PublishChange(t, js, &linkevent.Event{Version: v, Prev: v - 1, Kind: linkevent.KindLink,
			Code: fmt.Sprintf("code%02d", v), URL: "https://example.com/", RedirectType: 302, Status: link.Active})
	}
	rec := &recorder{}
	f := New(js, rec, nil)
	f.Restart(6, 6) // as after a snapshot at stream sequence 6
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := poll.Wait(ctx, what, 30*time.Second, cond); err != nil {
			t.Fatalf("%v: feed at %+v, applied %v", err, f.Position(), rec.seen())
		}
	}
	waitFor("catch up after 6", func() bool { p := f.Position(); return p.CaughtUp && p.Seq == 10 })
	if got := rec.seen(); fmt.Sprint(got) != "[7 8 9 10]" || !f.Complete() {
		t.Fatalf("applied %v (complete %v), want [7 8 9 10] without a gap", got, f.Complete())
	}
	f.Restart(2, 2)
	waitFor("replay after 2", func() bool { p := f.Position(); return p.CaughtUp && p.Seq == 10 && len(rec.seen()) == 12 })
	if got := rec.seen(); fmt.Sprint(got) != "[7 8 9 10 3 4 5 6 7 8 9 10]" || !f.Complete() {
		t.Fatalf("applied %v (complete %v), want a replay from 3", got, f.Complete())
	}
}
