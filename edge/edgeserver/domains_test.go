package edgeserver_test

import (
	"context"
	"encoding/base64"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/scrape"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/ff1"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// fakeAuthority answers the edge's questions as control's responder
// would: frontiers of the platform's namespace and of domain 3's, and
// links by (domain, code). It counts the codes asked.
type fakeAuthority struct {
	mu        sync.Mutex
	frontiers []authority.Frontier
	links     map[askedKey]authority.Reply
	asked     []askedKey
	codes     atomic.Int64
}

type askedKey struct {
	d    link.DomainID
	code string
}

func (f *fakeAuthority) serve(t *testing.T, nc *nats.Conn) {
	t.Helper()
	sub, err := nc.QueueSubscribe(authority.AskSubject, authority.QueueGroup, func(m *nats.Msg) {
		var q authority.Question
		if err := authority.UnmarshalQuestion(m.Data, &q); err != nil {
			t.Errorf("fake authority: %v", err)
			return
		}
		f.mu.Lock()
		a := authority.Answer{Kind: authority.Found, Version: 10}
		if q.Frontier {
			a.Frontiers, a.PromiseMillis = append([]authority.Frontier(nil), f.frontiers...), 60_000
		}
		for i, c := range q.Codes {
			k := askedKey{q.Domain(i), c}
			f.asked = append(f.asked, k)
			r, ok := f.links[k]
			if !ok {
				r = authority.Reply{Kind: authority.NotFound}
			} else {
				r.Code, r.Domain = "", k.d
			}
			a.Replies = append(a.Replies, r)
		}
		f.mu.Unlock()
		f.codes.Add(int64(len(q.Codes)))
		b, err := authority.MarshalAnswer(nil, &a)
		if err != nil {
			t.Errorf("fake authority: %v", err)
			return
		}
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// setFrontier sets domain d's namespace counter and ceiling (local IDs).
func (f *fakeAuthority) setFrontier(d link.DomainID, next, ceiling uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start, end := link.IDRange(d)
	ns := authority.Frontier{Namespace: link.NamespaceOf(d), Start: start, End: end,
		Next: link.IDBase(d) + next, Ceiling: link.IDBase(d) + ceiling}
	for i := range f.frontiers {
		if f.frontiers[i].Namespace == ns.Namespace {
			f.frontiers[i] = ns
			return
		}
	}
	f.frontiers = append(f.frontiers, ns)
}

// TestDomainsOnTheEdge runs an edge with a domain table from its snapshot
// and the stream and a key file: each domain's host serves its own links,
// an unknown host gets 404, an FF1 domain's random codes are answered 404
// from memory (beyond its frontier) without asking a code of the
// authority, a code created after boot is asked about (on its domain) and
// found, and a domain created after boot serves once its event arrives.
func TestDomainsOnTheEdge(t *testing.T) {
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	natstest.ChangeStream(t, js)

	dir := t.TempDir()
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	keyFile := filepath.Join(dir, "code-keys")
	if err := os.WriteFile(keyFile, []byte("k1 "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const acme = "go.acme.test"
	codes, err := ff1.NewCodes(key, acme)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(local uint64) string {
		c, err := codes.Encode(local)
		if err != nil {
			t.Fatal(err)
		}
		return string(c[:])
	}

	domains := []link.Domain{
		{ID: 0, Host: "sho.rt", CodeMode: link.CodesSequential, Status: link.DomainActive, Version: 1},
		{ID: 3, Host: acme, TenantID: 7, CodeMode: link.CodesFF1, KeyIDs: []string{"k1"}, Status: link.DomainActive, Version: 2,
			NotFoundRedirect: "https://acme.example/missing"},
	}
	links := []snapshot.Link{
		{Domain: 0, Code: "same-code", URL: "https://platform.example/same", RedirectType: 302, Status: link.Active, Version: 3},
		{Domain: 3, Code: "same-code", URL: "https://acme.example/same", RedirectType: 302, Status: link.Active, Version: 4},
		{Domain: 3, Code: enc(5), URL: "https://acme.example/5", RedirectType: 302, Status: link.Active, Version: 5},
	}
	data, err := snapshottest.BuildDomains(links, domains, snapshot.Header{ChangeVersion: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), data, 0o644); err != nil {
		t.Fatal(err)
	}

	auth := &fakeAuthority{links: map[askedKey]authority.Reply{}}
	auth.setFrontier(0, 100, 200)
	auth.setFrontier(3, 100, 200)
	auth.serve(t, nc)

	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), Name: "domains",
			SnapshotDir: dir, CodeKeysFile: keyFile, NotFoundRate: -1, OnListen: func(a net.Addr) { addr <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("edge stopped before it listened: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("edge did not listen within 60s")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(host, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	poll.Until(t, "the edge ready", 60*time.Second, func() bool { s, _ := get("any.example", "/-/readyz"); return s == 200 })

	for _, tt := range []struct {
		host, path string
		status     int
		location   string
	}{
		{"sho.rt", "/same-code", 302, "https://platform.example/same"},
		{acme, "/same-code", 302, "https://acme.example/same"},
		{"GO.ACME.TEST:8080", "/" + enc(5), 302, "https://acme.example/5"},
		{"unknown.example", "/same-code", 404, ""},
		{"sho.rt", "/" + enc(5), 404, ""},
	} {
		if s, loc := get(tt.host, tt.path); s != tt.status || loc != tt.location {
			t.Errorf("GET %s on %s: %d %q; want %d %q", tt.path, tt.host, s, loc, tt.status, tt.location)
		}
	}

	if v := metric(t, base, "edge_requests_total", "outcome", "unknown_host"); v != 1 {
		t.Errorf("edge_requests_total{outcome=\"unknown_host\"} = %v; want 1", v)
	}
	// The unknown host was asked of the authority before its 404.
	if v := metric(t, base, "edge_host_asks_total", "outcome", "not_found"); v != 1 {
		t.Errorf("edge_host_asks_total{outcome=\"not_found\"} = %v; want 1", v)
	}

	// Random codes on the FF1 domain: decoded with its key, beyond its
	// frontier, answered from memory: a frontier question at most, no
	// code asked. Its not-found redirect answers them.
	rng := rand.New(rand.NewPCG(7, 9))
	before := auth.codes.Load()
	for range 200 {
		c := make([]byte, base62.Length)
		for i := range c {
			c[i] = base62.Alphabet[rng.IntN(62)]
		}
		if s, loc := get(acme, "/"+string(c)); s != 302 || loc != "https://acme.example/missing" {
			t.Fatalf("random %s on %s: %d %q; want the domain's not-found redirect", c, acme, s, loc)
		}
	}
	if n := auth.codes.Load() - before; n != 0 {
		t.Errorf("200 random codes on an FF1 domain asked the authority about %d codes; want 0", n)
	}

	// Control leases past local ID 150 and creates its link: the edge has
	// not received it, its ID is below the promised ceiling, so it asks,
	// on the link's domain, and redirects.
	fresh := enc(150)
	auth.mu.Lock()
	auth.links[askedKey{3, fresh}] = authority.Reply{Kind: authority.Found, Version: 11, URL: "https://acme.example/fresh",
		RedirectType: 302, Status: link.Active}
	auth.mu.Unlock()
	auth.setFrontier(3, 300, 400)
	if s, loc := get(acme, "/"+fresh); s != 302 || loc != "https://acme.example/fresh" {
		t.Errorf("a code created after boot: %d %q; want 302 to its target", s, loc)
	}
	auth.mu.Lock()
	asked := append([]askedKey(nil), auth.asked...)
	auth.mu.Unlock()
	if len(asked) != 1 || asked[0] != (askedKey{3, fresh}) {
		t.Errorf("asked the authority about %v; want only (3, %s)", asked, fresh)
	}

	// A domain created after boot, and a link on it, from the stream.
	natstest.PublishChanges(t, js,
		linkevent.Event{Version: 11, Prev: 10, Kind: linkevent.KindDomain, Conf: &link.Domain{ID: 5, Host: "acme.link",
			TenantID: 7, CodeMode: link.CodesSequential, Status: link.DomainActive, RootRedirect: "https://acme.example/"}},
		linkevent.Event{Version: 12, Prev: 11, Kind: linkevent.KindLink, Domain: 5, Code: "same-code",
			URL: "https://acme.example/link", RedirectType: 302, Status: link.Active})
	poll.Until(t, "the new domain's link", 30*time.Second, func() bool {
		s, loc := get("acme.link", "/same-code")
		return s == 302 && loc == "https://acme.example/link"
	})
	if s, loc := get("acme.link", "/"); s != 302 || loc != "https://acme.example/" {
		t.Errorf("the new domain's root: %d %q; want its root redirect", s, loc)
	}
	if s, loc := get("sho.rt", "/same-code"); s != 302 || loc != "https://platform.example/same" {
		t.Errorf("the platform's link after another domain's change: %d %q", s, loc)
	}

	fams, err := scrape.Scrape(base + "/-/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"edge_domain_redirects_total", []string{"outcome", "not_found"}, 200},
		{"edge_domain_redirects_total", []string{"outcome", "root"}, 1},
		{"edge_domains", nil, 3},
		{"edge_domain_table_received", nil, 1},
		{"edge_domains_undecodable", nil, 0},
		{"edge_undecodable_misses_total", nil, 0},
	} {
		if v, ok := scrape.Value(fams, m.name, m.labels...); !ok || v != m.want {
			t.Errorf("%s%v = %v (exported: %v); want %v", m.name, m.labels, v, ok, m.want)
		}
	}
}

// metric scrapes the edge at base for name{labels} (-1: not exported).
func metric(t *testing.T, base, name string, labels ...string) float64 {
	t.Helper()
	fams, err := scrape.Scrape(base + "/-/metrics")
	if err != nil {
		t.Fatal(err)
	}
	v, ok := scrape.Value(fams, name, labels...)
	if !ok {
		return -1
	}
	return v
}

// TestBadCodeKeysFile: an edge refuses to start with a key file it cannot
// read, and says which line without showing it.
func TestBadCodeKeysFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "code-keys")
	secret := "c2VjcmV0LWtleS1ieXRlcy1zaG93bi1uZXZlcg"
	if err := os.WriteFile(bad, []byte("# keys\nk1 "+secret+"\nk2 not base64 at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing")} {
		err := edgeserver.Run(context.Background(), edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: "nats://127.0.0.1:1", CodeKeysFile: path})
		if err == nil {
			t.Fatalf("Run with code keys %s: started; want an error", path)
		}
		if msg := err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "not base64 at all") {
			t.Errorf("the error shows the file's contents: %v", err)
		}
		t.Log(err)
	}
}
