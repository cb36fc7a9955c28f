package outbox_test

import (
	"context"
	"testing"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
)

// TestRelayPublishesExtras: links' rules, password hashes and click limits
// reach the stream as each link has them at its version, in the batch
// format that carries them (3) only for messages holding some: a run of
// plain links is published as format 2, as before extras, so edges of the
// release before read it.
func TestRelayPublishesExtras(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, stop := e.runRelay(t)
	plain := []uint64{e.create(t), e.create(t)}
	e.waitVersions(t, plain)
	stop()

	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"
	x := link.Extras{Rules: []link.Rule{{Devices: []link.Device{link.DeviceAndroid}, URL: "https://play.google.com/store/apps/details?id=x"}},
		PasswordHash: hash, MaxClicks: 100}
	l := &link.Link{ID: 500, Code: "with-extras", TenantID: e.tenant, Namespace: "default", URL: "https://example.com/x",
		URLOriginal: "https://example.com/x", RedirectType: 302, Extras: x}
	if err := e.store.CreateLink(ctx, l, true); err != nil {
		t.Fatal(err)
	}
	cleared, err := e.store.UpdateLink(ctx, e.tenant, link.DefaultDomain, l.Code, links.Change{SetRules: true, SetPassword: true, SetMaxClicks: true})
	if err != nil {
		t.Fatal(err)
	}
	e.runRelay(t)
	evs := e.waitVersions(t, append(plain, l.Version, cleared.Version))
	want, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Extras != "" || evs[1].Extras != "" || evs[2].Extras != string(want) || evs[3].Extras != "" {
		t.Errorf("events' extras %q, %q, %x, %q; want none, none, %x, none", evs[0].Extras, evs[1].Extras, evs[2].Extras, evs[3].Extras, want)
	}
	s, err := e.js.Stream(ctx, linkevent.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msgs := natstest.ChangeMessages(t, e.js)
	if len(msgs) != 2 {
		t.Fatalf("%d messages; want the plain links' and the later run's", len(msgs))
	}
	for i, m := range msgs {
		raw, err := s.GetMsg(ctx, m.Seq)
		if err != nil {
			t.Fatal(err)
		}
		wantFormat := []byte{linkevent.FormatBatch, linkevent.FormatBatchExtras}[i]
		if raw.Data[0] != wantFormat {
			t.Errorf("message %d (versions to %d) is format %d; want %d", i, m.Version, raw.Data[0], wantFormat)
		}
	}
}
