package domains

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// scale is n in the launch gate and small otherwise.
func scale(small, n int) int {
	if os.Getenv("EDGELINK_GATE") != "" {
		return n
	}
	return small
}

// env is one stack whose control and edge read the same code key file.
type env struct {
	pg      *stack.Postgres
	nats    *stack.NATS
	edge    *stack.Edge
	control *stack.Control
	ccfg    controlserver.Config
	keys    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{pg: stack.SharedPostgres(t), nats: stack.NewNATS(t, stack.NATSConfig{}), keys: stack.CodeKeys(t)}
	e.edge = stack.NewEdge(t, edgeserver.Config{NATSURL: e.nats.URL(), Name: "domains", SnapshotDir: t.TempDir(),
		CodeKeysFile: e.keys,
		// As in gate/visibility: the test is about what the edge answers,
		// not about how long a busy machine takes to answer it.
		AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second})
	e.ccfg = controlserver.Config{DatabaseURL: e.pg.DSN, NATSURL: e.nats.URL(), PublicURL: e.edge.URL,
		Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: e.keys, DomainKey: stack.CodeKeyName}
	e.control = stack.NewControl(t, e.ccfg)
	return e
}

// tenant is a new tenant's API client.
func (e *env) tenant(t *testing.T, name string) stack.Client {
	t.Helper()
	_, key := e.pg.NewTenant(t, name)
	return stack.Client{ControlURL: e.control.URL, EdgeURL: e.edge.URL, Key: key}
}

// addDomain creates one of c's domains through the API.
func addDomain(t *testing.T, c stack.Client, body string) map[string]any {
	t.Helper()
	a := c.Do(t.Context(), "POST", "/api/v1/domains", body)
	if a.Err != nil || a.Status != http.StatusCreated {
		t.Fatalf("POST /api/v1/domains %s: %v", body, a)
	}
	var d map[string]any
	if err := json.Unmarshal(a.Body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// created is a link as its 201 described it.
type created struct{ domain, code, url string }

// TestEveryLinkRedirectsOnItsOwnDomainOnly: links are created on two FF1
// domains of one tenant, a domain of another tenant and the platform
// domain, in parallel; each is followed right after its 201 on its own host
// (302 to its target), on every other host (never its target) and on a
// host no domain has (404). The same custom code on each domain goes to
// each one's target.
func TestEveryLinkRedirectsOnItsOwnDomainOnly(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	acme, other := e.tenant(t, "acme"), e.tenant(t, "other")
	addDomain(t, acme, `{"host":"go.acme.test"}`)
	addDomain(t, acme, `{"host":"ACME.link."}`) // stored canonical: acme.link
	addDomain(t, other, `{"host":"other.test"}`)
	platform := strings.TrimPrefix(e.edge.URL, "http://")
	platform = platform[:strings.LastIndexByte(platform, ':')]
	type creator struct {
		c      stack.Client
		domain string
	}
	creators := []creator{{acme, "go.acme.test"}, {acme, "acme.link"}, {other, "other.test"}, {acme, ""}}
	hosts := []string{"go.acme.test", "acme.link", "other.test", platform}

	// The same custom code on every domain: four links, four targets.
	for i, cr := range creators {
		r := cr.c.CreatePatiently(ctx, stack.Link{URL: fmt.Sprintf("https://example.com/same/%d", i), Code: "spring-sale", Domain: cr.domain})
		if r.Status != http.StatusCreated {
			t.Fatalf("custom code on %q: %d %v", cr.domain, r.Status, r.Problem)
		}
	}
	v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(1))
	t.Cleanup(v.Close)
	for i, h := range hosts {
		want := fmt.Sprintf("https://example.com/same/%d", i)
		for _, spelling := range []string{h, strings.ToUpper(h) + ".", h + ":80"} {
			if status, loc, err := v.FollowHost(spelling, "spring-sale"); err != nil || status != http.StatusFound || loc != want {
				t.Fatalf("spring-sale on Host %q: %d %q %v; want 302 to %s", spelling, status, loc, err, want)
			}
		}
	}

	perDomain := scale(40, 400)
	var (
		mu    sync.Mutex
		links []created
		wrong []string
	)
	bad := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for ci, cr := range creators {
		wg.Go(func() {
			v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(10+ci))
			defer v.Close()
			own := hosts[ci]
			for i := range perDomain {
				target := fmt.Sprintf("https://example.com/%d/%d", ci, i)
				r := cr.c.CreatePatiently(ctx, stack.Link{URL: target, Domain: cr.domain})
				if r.Status != http.StatusCreated {
					bad("create on %q: %d %v", own, r.Status, r.Problem)
					return
				}
				if status, loc, err := v.FollowHost(own, r.Code); err != nil || status != http.StatusFound || loc != r.URL {
					bad("%s/%s right after its 201: %d %q %v", own, r.Code, status, loc, err)
				}
				mu.Lock()
				links = append(links, created{own, r.Code, r.URL})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d links: first wrong answers: %s", len(links), strings.Join(wrong, "; "))
	}

	// Every link, on every other host and on an unknown one.
	// From 16 addresses, so that no client spends its budget of 404s (past
	// it the edge answers 429, which would say nothing about the host).
	pool := make([]*stack.Visitor, 16)
	for i := range pool {
		pool[i] = stack.NewVisitor(e.edge.URL, stack.LoopbackIP(100+i))
		t.Cleanup(pool[i].Close)
	}
	elsewhere, unknown := 0, 0
	for i, l := range links {
		for _, h := range append(hosts, "nobody.test", "go.acme.test.evil.test") {
			if h == l.domain {
				continue
			}
			status, loc, err := pool[i%len(pool)].FollowHost(h, l.code)
			if err != nil {
				t.Fatal(err)
			}
			if loc == l.url {
				t.Fatalf("%s/%s answered on Host %q: %d %q", l.domain, l.code, h, status, loc)
			}
			switch {
			case h == "nobody.test" || strings.HasSuffix(h, ".evil.test"):
				if status != http.StatusNotFound {
					t.Fatalf("%s on the unknown Host %q: %d %q; want 404", l.code, h, status, loc)
				}
				unknown++
			default:
				elsewhere++
			}
		}
	}
	if status, _, err := v.FollowHost("nobody.test", ""); err != nil || status != http.StatusNotFound {
		t.Fatalf("/ on an unknown host: %d %v; want 404", status, err)
	}
	evidence.Record(t, evidence.DomainIsolation, "%d links created on 4 domains (2 of one tenant, 1 of another, the platform's) each redirected right after its 201 on its own host; none answered with its target on the %d follows on other domains' hosts, and the %d follows on unknown hosts were all 404; one custom code on the 4 domains went to 4 targets, under upper-case, trailing-dot and port spellings of each host",
		len(links), elsewhere, unknown)
}
