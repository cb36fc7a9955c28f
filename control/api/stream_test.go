package api

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// TestMutationsReachTheStream: creates, PATCHes and DELETEs over HTTP come
// out of the real relay on a real JetStream as full-state events, in version
// order, and an edge applying them by version ends with each link's state.
func TestMutationsReachTheStream(t *testing.T) {
	e, key := newEnvWithTenant(t)
	_, js := natstest.Start(t).Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = outbox.New(e.store, js, outbox.Config{PollInterval: 50 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/a", "code": "promo-a"}`))
	e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [{"url": "https://example.com/b", "code": "promo-b"}, {"url": "https://example.com/c", "code": "promo-c"}]}`))
	e.do(t, "PATCH", "/api/v1/links/promo-a", key, []byte(`{"url": "https://example.com/a2", "redirect_type": 307}`))
	e.do(t, "PATCH", "/api/v1/links/promo-b", key, []byte(`{"status": "disabled"}`))
	e.do(t, "DELETE", "/api/v1/links/promo-c", key, nil)
	e.do(t, "PATCH", "/api/v1/links/promo-a", key, []byte(`{"expires_at": "2090-01-01T00:00:00Z"}`))

	want := map[string]string{
		"promo-a": "active https://example.com/a2 307 2090-01-01T00:00:00Z",
		"promo-b": "disabled https://example.com/b 302 -",
		"promo-c": "deleted https://example.com/c 302 -",
	}
	// The platform's domain has change events of its own (its row, and
	// its host written at start) in the same sequence.
	linkEvents := func(evs []linkevent.Event) int {
		n := 0
		for _, ev := range evs {
			if ev.Kind == linkevent.KindLink {
				n++
			}
		}
		return n
	}
	var evs []linkevent.Event
	if err := poll.Wait(context.Background(), "7 link events on the stream", 30*time.Second, func() bool {
		evs = natstest.ChangeEvents(t, js)
		return linkEvents(evs) >= 7
	}); err != nil {
		t.Fatalf("stream holds %d events: %v", len(evs), err)
	}
	var versions []uint64
	state := map[string]linkevent.Event{}
	var prev uint64
	for _, ev := range evs {
		if ev.Prev != prev {
			t.Fatalf("event %d follows %d, want %d: the stream skipped one", ev.Version, ev.Prev, prev)
		}
		prev = ev.Version
		if ev.Kind != linkevent.KindLink {
			continue
		}
		versions = append(versions, ev.Version)
		if ev.Version > state[ev.Code].Version {
			state[ev.Code] = ev
		}
	}
	if !slices.IsSorted(versions) || len(versions) != 7 {
		t.Fatalf("stream's link versions %v; want 7 in increasing order", versions)
	}
	for code, w := range want {
		ev := state[code]
		exp := "-"
		if ev.ExpiresAt != 0 {
			exp = time.UnixMilli(ev.ExpiresAt).UTC().Format(time.RFC3339)
		}
		if got := fmt.Sprintf("%s %s %d %s", ev.Status, ev.URL, ev.RedirectType, exp); got != w {
			t.Errorf("%s applied by version: %s; want %s", code, got, w)
		}
		// The API's version of the link is the stream's last for its code.
		l := e.do(t, "GET", "/api/v1/links/"+code, key, nil).json(t)
		if uint64(l["version"].(float64)) != ev.Version || l["status"] != string(ev.Status) {
			t.Errorf("%s: API says version %v status %v, stream %d %s", code, l["version"], l["status"], ev.Version, ev.Status)
		}
	}
	if state["promo-c"].Status != link.Deleted {
		t.Errorf("delete did not reach the stream as a tombstone: %+v", state["promo-c"])
	}
}
