package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/webhooks"
	"github.com/edgelink/edgelink/internal/poll"
)

// consumers are the stream's webhook consumers.
func (r *rig) consumers() []string {
	r.t.Helper()
	s, err := r.js.Stream(context.Background(), webhooks.Stream)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	names := s.ConsumerNames(context.Background())
	for n := range names.Name() {
		out = append(out, n)
	}
	if err := names.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

func (r *rig) streamMsgs() uint64 {
	r.t.Helper()
	s, err := r.js.Stream(context.Background(), webhooks.Stream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.Msgs
}

// An endpoint that fails every attempt for the policy's time is disabled,
// with the reason and when; its consumer goes, the events of its disabled
// period are never sent, and once enabled it gets the events from then on.
// The dispatcher's clock moves an hour at every attempt: no waiting.
func TestAutoDisableAndEnable(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	down := true
	fake := &clock{}
	fake.Set(time.Now())
	rc := newReceiver(t, func(string, int) int {
		fake.Add(time.Hour)
		if down {
			return 503
		}
		return 200
	})
	id, _ := r.endpoint(rc.srv.URL, webhooks.LinkCreated)
	r.start(5*time.Second, func(c *webhooks.DispatcherConfig) {
		c.Now = fake.Now
		c.Disable = webhooks.DisablePolicy{After: 3 * time.Hour, MinFailures: 3, Gap: 25 * time.Hour}
	})
	r.create("https://example.com/first")
	poll.Until(t, "endpoint disabled", 30*time.Second, func() bool {
		e, err := r.svc.Get(ctx, r.tenant, id)
		return err == nil && !e.Enabled
	})
	e, _ := r.svc.Get(ctx, r.tenant, id)
	if !strings.Contains(e.DisabledReason, "every attempt failed") || !strings.Contains(e.DisabledReason, "503") || e.DisabledAt.IsZero() {
		t.Errorf("disabled with reason %q at %v; want the run of failures and the last error", e.DisabledReason, e.DisabledAt)
	}
	if got := len(rc.requests()); got != 4 {
		t.Errorf("%d attempts before disabling; want 4 (hours 0 to 3)", got)
	}
	poll.Until(t, "its consumer deleted", 10*time.Second, func() bool { return len(r.consumers()) == 0 })

	// While disabled: the event is made and kept on the stream, not sent.
	before := r.streamMsgs()
	rc.mu.Lock()
	down = false
	rc.mu.Unlock()
	r.create("https://example.com/while-disabled")
	poll.Until(t, "the disabled period's event on the stream", 10*time.Second, func() bool { return r.streamMsgs() > before })

	e, err := r.svc.SetEnabled(ctx, r.tenant, id, true)
	if err != nil || !e.Enabled || e.Generation != 2 || e.ConsecutiveFailures != 0 || !e.FailingSince.IsZero() {
		t.Fatalf("enable: %+v, %v; want enabled, generation 2, no failures", e, err)
	}
	after := r.create("https://example.com/after")
	poll.Until(t, "the event after enabling delivered", 30*time.Second, func() bool { return len(rc.delivered()) == 1 })
	for _, g := range rc.delivered() {
		if !strings.Contains(string(g[0].body), after.Code) {
			t.Errorf("delivered %s; want the link made after enabling (%s)", g[0].body, after.Code)
		}
	}
	if names := r.consumers(); len(names) != 1 || !strings.HasSuffix(names[0], "_2") {
		t.Errorf("consumers %v; want the second generation's alone", names)
	}
}

// A rotated secret and the one it replaced both sign during the grace
// period, and only the new one after it.
func TestSecretRotation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rc := newReceiver(t, func(string, int) int { return 200 })
	id, oldKey := r.endpoint(rc.srv.URL, webhooks.LinkCreated)
	fake := &clock{}
	fake.Set(time.Now())
	r.start(5*time.Second, func(c *webhooks.DispatcherConfig) { c.Now = fake.Now })
	e, newKey, err := r.svc.RotateSecret(ctx, r.tenant, id, time.Hour)
	if err != nil || e.PrevExpiresAt.IsZero() {
		t.Fatalf("rotate: %+v, %v", e, err)
	}
	if _, _, err := r.svc.RotateSecret(ctx, r.tenant, id, 8*24*time.Hour); err == nil {
		t.Error("a grace of 8 days was accepted; the most is 7")
	}
	if _, err := r.svc.SendTest(ctx, r.tenant, id); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the test event", 20*time.Second, func() bool { return len(rc.delivered()) == 1 })
	g := rc.requests()[0]
	if g.typ != "webhook.test" || len(g.signatures) != 2 {
		t.Fatalf("got %s with signatures %q; want webhook.test signed twice", g.typ, g.signatures)
	}
	if verify(newKey, g.id, g.ts, g.body, g.signatures[:1]) != nil || verify(oldKey, g.id, g.ts, g.body, g.signatures[1:]) != nil {
		t.Errorf("signatures %q: want the new key's then the old key's", g.signatures)
	}
	fake.Add(2 * time.Hour) // past the grace period
	if _, err := r.svc.SendTest(ctx, r.tenant, id); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the second test event", 20*time.Second, func() bool { return len(rc.delivered()) == 2 })
	g = rc.requests()[1]
	if len(g.signatures) != 1 || verify(newKey, g.id, g.ts, g.body, g.signatures) != nil || verify(oldKey, g.id, g.ts, g.body, g.signatures) == nil {
		t.Errorf("after the grace period: signatures %q; want the new key's alone", g.signatures)
	}
}

// An endpoint that hangs holds only its own slots: another endpoint gets
// every event meanwhile.
func TestSlowEndpointDoesNotBlockAnother(t *testing.T) {
	r := newRig(t)
	slow := newReceiver(t, func(string, int) int { return 0 })
	fast := newReceiver(t, func(string, int) int { return 200 })
	r.endpoint(slow.srv.URL, webhooks.LinkCreated)
	r.endpoint(fast.srv.URL, webhooks.LinkCreated)
	r.start(time.Minute, func(c *webhooks.DispatcherConfig) { c.PerEndpoint = 2; c.MaxInFlight = 8 })
	const n = 20
	for i := range n {
		r.create(fmt.Sprintf("https://example.com/%d", i))
	}
	poll.Until(t, "the fast endpoint gets every event", 30*time.Second, func() bool { return len(fast.delivered()) == n })
	if got := len(slow.requests()); got > 2 {
		t.Errorf("the hanging endpoint has %d requests in flight; want at most its 2 slots", got)
	}
	close(slow.release)
	poll.Until(t, "the slow endpoint gets every event once released", 30*time.Second, func() bool { return len(slow.delivered()) == n })
}

// A control that dies mid-delivery loses nothing: the attempts it had in
// flight are handed out again after AckWait, the events it had not
// published are published by the next, and each event is answered 2xx
// once. (The death, in process: its NATS connection is closed and the
// receiver's connections cut while its attempts hang, so nothing it did
// after is acknowledged; then it stops.)
func TestRestartMidDelivery(t *testing.T) {
	r := newRig(t)
	hang := true
	rc := newReceiver(t, func(string, int) int {
		if hang {
			return 0
		}
		return 200
	})
	r.endpoint(rc.srv.URL, webhooks.LinkCreated, webhooks.LinkDeleted)
	stopA := r.start(time.Minute, func(c *webhooks.DispatcherConfig) { c.AckWait = 2 * time.Second; c.PerEndpoint = 3 })
	const n = 12
	for i := range n {
		r.create(fmt.Sprintf("https://example.com/%d", i))
	}
	poll.Until(t, "attempts in flight", 20*time.Second, func() bool { return len(rc.requests()) >= 3 })
	r.conn.Close() // its acks and publishes go nowhere from here
	rc.mu.Lock()
	hang = false
	rc.mu.Unlock()
	rc.srv.CloseClientConnections()
	stopA()
	r.start(5*time.Second, func(c *webhooks.DispatcherConfig) { c.AckWait = 2 * time.Second })
	poll.Until(t, "every event delivered after the restart", 60*time.Second, func() bool { return len(rc.delivered()) == n })
	for id, reqs := range rc.delivered() {
		if len(reqs) != 1 {
			t.Errorf("event %s answered 2xx %d times", id, len(reqs))
		}
	}
}
