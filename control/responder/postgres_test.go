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

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestAnswersByDomain: on a real database and NATS, the same code on two
// domains is answered with each domain's own link, the platform's when a
// question names no domain (an edge from before domains, format 2, or the
// single-code protocol), and NotFound on a domain that does not exist:
// never another domain's link.
func TestAnswersByDomain(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.New(pool)
	tenant, err := store.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Written straight into the tables, as control/domains and
	// control/links would: this test is about reading them.
	for _, d := range []struct {
		id   link.DomainID
		host string
	}{{1, "go.acme.com"}, {2, "acme.link"}} {
		exec(`INSERT INTO domains (id, host, tenant_id, code_mode, version) VALUES ($1, $2, $3, 'sequential', nextval('change_version_seq'))`,
			int32(d.id), d.host, tenant)
	}
	for _, l := range []struct {
		d   link.DomainID
		url string
	}{{0, "https://platform.example/"}, {1, "https://acme.example/one"}, {2, "https://acme.example/two"}} {
		exec(`INSERT INTO links (id, domain_id, code, tenant_id, code_source, namespace, url_original, url, version)
			VALUES ($1, $2, 'spring', $3, 'custom', $4, $5, $5, nextval('change_version_seq'))`,
			int64(link.IDBase(l.d)+7), int32(l.d), tenant, link.NamespaceOf(l.d), l.url)
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
		// The subscription reaches the server asynchronously.
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
		if a.Kind != authority.Found || len(a.Replies) != len(q.Codes) {
			t.Fatalf("answer to %+v: %+v", q, a)
		}
		return a
	}

	a := ask(authority.Question{Codes: []string{"spring", "spring", "spring", "spring"}, Domains: []link.DomainID{1, 2, 0, 9}})
	for i, want := range []struct {
		d   link.DomainID
		url string
	}{{1, "https://acme.example/one"}, {2, "https://acme.example/two"}, {0, "https://platform.example/"}} {
		if rep := a.Replies[i]; rep.Kind != authority.Found || rep.Domain != want.d || rep.Code != "spring" || rep.URL != want.url {
			t.Errorf("reply %d = %+v; want domain %d's link to %s", i, rep, want.d, want.url)
		}
	}
	if rep := a.Replies[3]; rep.Kind != authority.NotFound {
		t.Errorf("spring on a domain that does not exist = %+v; want NotFound", rep)
	}
	if a.Version == 0 {
		t.Error("answer without the change version reached")
	}
	if a := ask(authority.Question{Codes: []string{"spring"}}); a.Replies[0].Domain != 0 || a.Replies[0].URL != "https://platform.example/" {
		t.Errorf("a question naming no domain = %+v; want the platform's link", a.Replies[0])
	}
	var rep authority.Reply
	if err := authority.Unmarshal(request(authority.Subject, []byte("spring")), &rep); err != nil || rep.URL != "https://platform.example/" {
		t.Errorf("single-code lookup = %+v, %v; want the platform's link", rep, err)
	}
}

// TestAnswersHosts: on a real database and NATS, a host is answered with
// its active domain, created a moment before the question; a removed
// domain's host and one nobody has get no domain.
func TestAnswersHosts(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	store := postgres.New(pool)
	tenant, err := store.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		id     link.DomainID
		host   string
		status string
	}{{1, "go.acme.com", "active"}, {2, "old.acme.com", "removed"}} {
		if _, err := pool.Exec(ctx, `INSERT INTO domains (id, host, tenant_id, code_mode, status, version)
			VALUES ($1, $2, $3, 'sequential', $4, nextval('change_version_seq'))`, int32(d.id), d.host, tenant, d.status); err != nil {
			t.Fatal(err)
		}
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
	q := authority.Question{Codes: []string{"spring"}, Domains: []link.DomainID{1}, Hosts: []string{"go.acme.com", "old.acme.com", "nobody.example"}}
	b, err := authority.MarshalQuestion(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	var msg *nats.Msg
	poll.Until(t, "an answer", 10*time.Second, func() bool {
		msg, err = client.Request(authority.AskSubject, b, 5*time.Second)
		return err == nil
	})
	var a authority.Answer
	if err := authority.UnmarshalAnswer(msg.Data, &q, &a); err != nil {
		t.Fatal(err)
	}
	if a.Kind != authority.Found || len(a.Replies) != 1 || a.Replies[0].Kind != authority.NotFound {
		t.Fatalf("answer = %+v; want spring not found", a)
	}
	if len(a.Domains) != 1 || a.Domains[0].ID != 1 || a.Domains[0].Host != "go.acme.com" || a.Domains[0].TenantID != tenant {
		t.Errorf("domains = %+v; want go.acme.com's only", a.Domains)
	}
}
