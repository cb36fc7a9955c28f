package outage

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
)

// TestPostgresOutage: PostgreSQL stops while clients follow known links
// and creators keep trying. A create cannot commit its mapping without the
// database, so every create is refused with 503 and Retry-After, promptly
// (the client's deadline is two minutes: a hang would fail as a transport
// error, not pass slowly), while the edge keeps serving every known link.
// Once PostgreSQL is back, creates succeed again and redirect.
func TestPostgresOutage(t *testing.T) { postgresOutage(t, false, 1, 20) }

// TestPostgresCrashOutage is the same with the postmaster SIGKILLed (crash
// recovery on restart) three times and more refused creates.
func TestPostgresCrashOutage(t *testing.T) {
	gate(t)
	postgresOutage(t, true, 3, 200)
}

func postgresOutage(t *testing.T, crash bool, cycles, refusedWanted int) {
	s := newStack(t, 1)
	e := startEdge(t, s.nats.URL(), t.TempDir())
	c := s.startControl(t, e.URL)
	key := s.keys[0]

	led := stack.NewLedger()
	for i := range 100 {
		r := createPatiently(c.URL, key, fmt.Sprintf("https://example.com/before/%d", i), "")
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d: %d %v %v", i, r.Status, r.Problem, r.Err)
		}
		led.Add(r.Code, r.URL, "before")
	}
	known := led.Codes()
	waitApplied(t, e, s.pg.Pool(), time.Minute)

	rd := startReaders(t, 2, 5, e.URL, led, known, "PostgreSQL")

	var (
		slowest   time.Duration
		readyDown []int
		after     []string
	)
	for cycle := range cycles {
		if crash {
			if err := s.pg.Kill(); err != nil {
				t.Fatal(err)
			}
		} else if err := s.pg.Stop(); err != nil {
			t.Fatal(err)
		}
		rd.Fault.Store(true)

		// Every create is refused, each with an answer: 503, Retry-After, a
		// problem body. Nothing is created meanwhile.
		for i := range refusedWanted {
			started := time.Now()
			r := createLink(c.URL, key, fmt.Sprintf("https://example.com/during/%d/%d", cycle, i), "")
			took := time.Since(started)
			slowest = max(slowest, took)
			if r.Err != nil {
				t.Fatalf("create %d with PostgreSQL down got no answer after %v: %v", i, took, r.Err)
			}
			if r.Status != http.StatusServiceUnavailable || r.RetryAfter == "" || r.Problem["status"] != float64(503) {
				t.Fatalf("create %d with PostgreSQL down: %d Retry-After %q %v; want 503 with Retry-After and a problem", i, r.Status, r.RetryAfter, r.Problem)
			}
		}
		// Readiness follows the allocation runway, not the database (seed
		// 000's probes): it is reported, not asserted.
		ready, _, _ := stack.Get(c.URL + "/readyz")
		readyDown = append(readyDown, ready)
		if rd.during.Load() == 0 {
			stack.Eventually(t, "reads of known links while PostgreSQL is down", time.Minute, func() bool { return rd.during.Load() > 0 })
		}

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := s.pg.Restart(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// The restart reset the harness's pool, which the stop cut
		// (SQLSTATE 57P01): the checks below fail only on what control did.
		rd.Fault.Store(false)

		// Creates succeed again (the pool reconnects; the first may still
		// meet a dead connection), and each redirects at once.
		var first stack.Created
		stack.Eventually(t, "a create succeeds after PostgreSQL is back", 2*time.Minute, func() bool {
			first = createLink(c.URL, key, fmt.Sprintf("https://example.com/after/%d/first", cycle), "")
			switch {
			case first.Err != nil:
				t.Fatalf("create while PostgreSQL recovers got no answer: %v", first.Err)
			case first.Status != http.StatusCreated && first.Status != http.StatusServiceUnavailable && first.Status != http.StatusTooManyRequests:
				t.Fatalf("create while PostgreSQL recovers: %d %v; want 201, or 503 (or 429) until it answers", first.Status, first.Problem)
			}
			return first.Status == http.StatusCreated
		})
		led.Add(first.Code, first.URL, "after")
		after = append(after, first.Code)
		for i := range 50 {
			r := createPatiently(c.URL, key, fmt.Sprintf("https://example.com/after/%d/%d", cycle, i), "")
			if r.Status != http.StatusCreated {
				t.Fatalf("create %d after PostgreSQL came back: %d %v %v", i, r.Status, r.Problem, r.Err)
			}
			led.Add(r.Code, r.URL, "after")
			after = append(after, r.Code)
			if status, loc, err := stack.Follow(e.URL, r.Code); err != nil || status != http.StatusFound || loc != r.URL {
				t.Fatalf("GET /%s right after its 201: %d %q %v; want 302 %q", r.Code, status, loc, err, r.URL)
			}
		}
	}
	rd.Stop()
	rd.check(t)
	led.CheckUnique(t)
	led.CheckInDatabase(t, s.pg.Pool())
	var during int
	if err := s.pg.Pool().QueryRow(context.Background(), `SELECT count(*) FROM links WHERE url LIKE 'https://example.com/during/%'`).Scan(&during); err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Fatalf("%d links refused with 503 exist in the database", during)
	}
	applied := waitApplied(t, e, s.pg.Pool(), time.Minute)
	led.CheckRedirects(t, e.URL, led.Codes())

	how := "stopped"
	if crash {
		how = "SIGKILLed (crash recovery on restart)"
	}
	evidence.Record(t, evidence.ReserveThenReject,
		"PostgreSQL %s %d time(s): all %d creates answered 503 with Retry-After and a problem body, the slowest in %v (client deadline 2m, never reached); control /readyz answered %v meanwhile; none of them is in the database; after restart creates succeeded again (%d more 201s)",
		how, cycles, cycles*refusedWanted, slowest.Round(time.Millisecond), readyDown, len(after))
	evidence.Record(t, evidence.ContractUnderLag,
		"PostgreSQL %s %d time(s): %d reads of the 100 known links on the edge (%d while it was down), %d failed",
		how, cycles, rd.reads.Load(), rd.during.Load(), rd.failures.Load())
	evidence.Record(t, evidence.Jumpable,
		"after PostgreSQL came back each of %d new 201s 302'd on the edge right after it; the edge applied the outbox's newest version %d; all %d links redirect",
		len(after), applied, led.Len())
}
