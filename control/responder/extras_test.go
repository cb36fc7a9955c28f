package responder_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/responder"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// TestAnswersExtras: on a real database and NATS, a link's rules, password
// hash and click limit are answered to an edge that reads them; an edge
// that does not (a question without Extras, or the single-code protocol)
// is answered Unavailable for it, never the link without them, while a
// plain link is answered to every edge as before.
func TestAnswersExtras(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.New(pool)
	tenant, err := store.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"
	x := link.Extras{Rules: []link.Rule{{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"}}, PasswordHash: hash, MaxClicks: 4}
	for i, l := range []*link.Link{
		{ID: 11, Code: "locked", URL: "https://example.com/locked", Extras: x},
		{ID: 12, Code: "plain", URL: "https://example.com/plain"},
	} {
		l.TenantID, l.Namespace, l.URLOriginal, l.RedirectType = tenant, "default", l.URL, 302
		if err := store.CreateLink(ctx, l, true); err != nil {
			t.Fatalf("link %d: %v", i, err)
		}
	}
	wire, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}

	ns := natstest.Start(t)
	nc, _ := ns.Connect(t)
	r := responder.New(nc, store, nil, responder.Config{})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	client, _ := ns.Connect(t)
	request := func(subject string, data []byte) []byte {
		t.Helper()
		var msg *nats.Msg
		poll.Until(t, "an answer", 10*time.Second, func() bool {
			msg, err = client.Request(subject, data, 5*time.Second)
			return err == nil
		})
		return msg.Data
	}
	ask := func(q authority.Question) authority.Answer {
		t.Helper()
		b, err := authority.MarshalQuestion(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		var a authority.Answer
		if err := authority.UnmarshalAnswer(request(authority.AskSubject, b), &q, &a); err != nil {
			t.Fatalf("answer to %+v: %v", q, err)
		}
		return a
	}
	a := ask(authority.Question{Codes: []string{"locked", "plain"}, Extras: true})
	if a.Kind != authority.Found || a.Replies[0].Extras != string(wire) || a.Replies[1].Extras != "" || a.Replies[1].URL != "https://example.com/plain" {
		t.Errorf("an edge that reads extras: %+v", a)
	}
	if a := ask(authority.Question{Codes: []string{"locked", "plain"}}); a.Kind != authority.Unavailable {
		t.Errorf("an edge that does not read extras, about a link with them: %+v; want Unavailable", a)
	}
	if a := ask(authority.Question{Codes: []string{"plain"}}); a.Kind != authority.Found || a.Replies[0].URL != "https://example.com/plain" {
		t.Errorf("an edge that does not read extras, about a plain link: %+v", a)
	}
	var rep authority.Reply
	if err := authority.Unmarshal(request(authority.Subject, []byte("locked")), &rep); err != nil || rep.Kind != authority.Unavailable {
		t.Errorf("single-code lookup of a link with extras = %+v, %v; want Unavailable", rep, err)
	}
	if err := authority.Unmarshal(request(authority.Subject, []byte("plain")), &rep); err != nil || rep.URL != "https://example.com/plain" {
		t.Errorf("single-code lookup of a plain link = %+v, %v", rep, err)
	}
}
