package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/internal/stack/allinone"
)

// startEdgeStack runs the local stack (on natsURL, or its embedded NATS
// when empty) with the edge adjusted by edge (which may be nil) and
// returns the running edge's parts too.
func startEdgeStack(t *testing.T, natsURL string, edge func(*edgeserver.Config)) (allinone.Ready, *edgeserver.Edge) {
	t.Helper()
	var parts *edgeserver.Edge
	s := allinone.New(t, allinone.Options{NATSURL: natsURL, Edge: func(c *edgeserver.Config) {
		if edge != nil {
			edge(c)
		}
		c.OnStart = func(e *edgeserver.Edge) { parts = e }
	}})
	return s.Ready, parts
}

func client(r allinone.Ready) stack.Client {
	return stack.Client{ControlURL: r.ControlURL, EdgeURL: r.EdgeURL, Key: r.APIKey}
}

// create posts body as a create, waiting out the API's per-tenant rate
// limit (429) within a bound, and returns the status and answer.
func create(t *testing.T, r allinone.Ready, body string) (int, map[string]any) {
	t.Helper()
	c := client(r).CreateJSONPatiently(context.Background(), body)
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	return c.Status, c.Body
}

func follow(t *testing.T, r allinone.Ready, code string) (int, string) {
	t.Helper()
	status, loc, err := client(r).Follow(code)
	if err != nil {
		t.Fatalf("GET /%s: %v", code, err)
	}
	return status, loc
}

// pollStatus follows code until the edge answers want, within a bound.
func pollStatus(t *testing.T, r allinone.Ready, code string, want int) {
	t.Helper()
	if got, _, err := stack.FollowUntil(r.EdgeURL, code, 30*time.Second, func(s int, _ string) bool { return s == want }); got != want {
		t.Fatalf("GET /%s still answers %d (%v) after 30s; want %d", code, got, err, want)
	}
}

// waitRedirect follows code on the edge until it answers other than 404,
// within a bound, and returns the status and Location.
func waitRedirect(t *testing.T, r allinone.Ready, code string) (int, string) {
	t.Helper()
	status, loc, err := stack.FollowUntil(r.EdgeURL, code, 30*time.Second, func(s int, _ string) bool { return s != http.StatusNotFound })
	if err != nil {
		t.Fatalf("GET %s/%s: %v", r.EdgeURL, code, err)
	}
	return status, loc
}

func dbPool(t *testing.T, r allinone.Ready) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), r.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestCreateThenFollowAcrossRestart is the first slice end to end: a real
// PostgreSQL and NATS JetStream, control and edge in-process; a link created
// over HTTP redirects on the edge, and still does after the whole stack is
// stopped and started again on the same data.
func TestCreateThenFollowAcrossRestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "edgelink-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	s := allinone.New(t, allinone.Options{DataDir: dir})
	r := s.Ready
	target := "https://Example.COM/landing?utm_source=test&utm_campaign=e2e"
	status, body := create(t, r, `{"url": "`+target+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d, body %v", status, body)
	}
	code, _ := body["code"].(string)
	want := "https://example.com/landing?utm_source=test&utm_campaign=e2e"
	if len(code) != 6 || body["url"] != want || body["short_url"] != r.EdgeURL+"/"+code {
		t.Fatalf("create answered %v", body)
	}
	if got, loc := waitRedirect(t, r, code); got != http.StatusFound || loc != want {
		t.Fatalf("edge answered %d Location %q; want 302 %q", got, loc, want)
	}
	key := r.APIKey
	if err := s.Stop(); err != nil {
		t.Errorf("stack stopped with: %v", err)
	}

	r2 := allinone.New(t, allinone.Options{DataDir: dir}).Ready
	if r2.APIKey != key {
		t.Errorf("restart printed a new dev key")
	}
	if got, loc := waitRedirect(t, r2, code); got != http.StatusFound || loc != want {
		t.Fatalf("after restart the edge answered %d Location %q; want 302 %q", got, loc, want)
	}
	// A second link after the restart gets a new code: IDs are not reused.
	status, body2 := create(t, r2, `{"url": "https://example.org/"}`)
	if status != http.StatusCreated || body2["code"] == code {
		t.Fatalf("second create: %d %v", status, body2)
	}
}

func TestMalformedCreateWritesNothing(t *testing.T) {
	r := allinone.New(t, allinone.Options{}).Ready
	for _, body := range []string{`{`, `{}`, `{"url": "ftp://example.com/"}`, `{"url": 5}`, `{"url": "https://example.com/` + strings.Repeat("a", 70<<10) + `"}`} {
		status, out := create(t, r, body)
		if status < 400 || status >= 500 || out["status"] == nil || out["title"] == nil {
			t.Errorf("create %.40q: status %d body %v; want a 4xx problem", body, status, out)
		}
	}
	// Nothing was written: the next good create takes the very first ID.
	status, out := create(t, r, `{"url": "https://example.com/"}`)
	if status != http.StatusCreated || out["code"] != "000001" {
		t.Fatalf("first good create: %d %v; want 201 code 000001", status, out)
	}
}

// waitCaughtUp waits until the edge's feed is caught up with nothing
// pending and cond holds, within a bound.
func waitCaughtUp(t *testing.T, e *edgeserver.Edge, what string, cond func() bool) {
	t.Helper()
	if err := stack.Poll(context.Background(), "edge catches up ("+what+")", 60*time.Second, func() bool {
		p := e.Feed.Position()
		return p.CaughtUp && p.Pending == 0 && cond()
	}); err != nil {
		t.Fatalf("%v: %+v", err, e.Feed.Position())
	}
}

// readyz asks an edge's readiness probe.
func readyz(edgeURL string) (int, string) {
	status, body, err := stack.Get(edgeURL + "/-/readyz")
	if err != nil {
		return -1, err.Error()
	}
	return status, body
}

// TestWelcomeDomainWorks is what `go tool task up` prints about domains:
// a domain added through the API takes FF1 links at once (control and the
// edge share the stack's code key file) and they redirect with its Host;
// the same code on the platform's host is not that link.
func TestWelcomeDomainWorks(t *testing.T) {
	r, _ := startEdgeStack(t, "", nil)
	c := client(r)
	ctx := t.Context()
	if a := c.Do(ctx, "POST", "/api/v1/domains", `{"host": "go.example.test"}`); a.Err != nil || a.Status != http.StatusCreated {
		t.Fatalf("add a domain: %v", a)
	}
	l := c.CreatePatiently(ctx, stack.Link{URL: "https://example.com/", Domain: "go.example.test"})
	if l.Status != http.StatusCreated {
		t.Fatalf("create on the domain: %d %v", l.Status, l.Problem)
	}
	v := stack.NewVisitor(r.EdgeURL, stack.LoopbackIP(1))
	t.Cleanup(v.Close)
	if status, loc, err := v.FollowHost("go.example.test", l.Code); err != nil || status != http.StatusFound || loc != l.URL {
		t.Fatalf("GET /%s with Host go.example.test: %d %q %v; want 302 to %s", l.Code, status, loc, err, l.URL)
	}
	if status, loc, _ := v.Follow(l.Code); loc == l.URL {
		t.Fatalf("GET /%s on the platform's host answered the domain's link: %d", l.Code, status)
	}
}
