package outage

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

// TestBoundaryExhaustion is the fault matrix's boundary row through the
// API: control runs with a namespace holding only the last three IDs of
// the 6-character space (M-3, M-2, M-1 with M = 62^6) in segments of two.
// Those three are handed out, the last as "zzzzzz", and each redirects;
// then every create is refused with an explicit, non-retryable capacity
// problem, answered at once, never a hang, a 500 or a retry-soon 503.
func TestBoundaryExhaustion(t *testing.T) {
	const m = base62.Space
	s := newStack(t, 1)
	e := startEdge(t, s.nats.URL(), t.TempDir())
	c := s.startControl(t, e.URL, "--id-start", fmt.Sprint(m-3), "--id-end", fmt.Sprint(m), "--id-step", "2")
	key := s.keys[0]

	led := stack.NewLedger()
	var answered []string
	for i := range 3 {
		target := fmt.Sprintf("https://example.com/last/%d", i)
		r := createPatiently(c.URL, key, target, "")
		if r.Status != http.StatusCreated {
			t.Fatalf("create %d of the last 3 IDs: %d %v %v", i+1, r.Status, r.Problem, r.Err)
		}
		led.Add(r.Code, r.URL, "control")
		answered = append(answered, r.Code)
		// Every 201 redirects at once, including the very last code.
		if status, loc, err := stack.Follow(e.URL, r.Code); err != nil || status != http.StatusFound || loc != r.URL {
			t.Fatalf("GET /%s right after its 201: %d %q %v; want 302 %q", r.Code, status, loc, err, r.URL)
		}
	}
	led.CheckUnique(t)
	want := []string{"zzzzzx", "zzzzzy", "zzzzzz"}
	if strings.Join(answered, ",") != strings.Join(want, ",") {
		t.Fatalf("the last three IDs were answered as %v; want %v (M-3, M-2, M-1 in order)", answered, want)
	}
	if id := led.Get("zzzzzz").ID; id != base62.MaxID {
		t.Fatalf("zzzzzz decodes to %d; want 62^6-1 = %d", id, base62.MaxID)
	}

	// The space is used up: generated and custom creates alike (a custom
	// code takes an internal ID too) are refused, every time, explicitly.
	var refusals []string
	for i, custom := range []string{"", "", "after-the-end", ""} {
		r := createLink(c.URL, key, fmt.Sprintf("https://example.com/beyond/%d", i), custom)
		if r.Err != nil {
			t.Fatalf("create past the end (%d): no answer: %v", i, r.Err)
		}
		detail, _ := r.Problem["detail"].(string)
		if r.Status != http.StatusInsufficientStorage || r.RetryAfter != "" || r.Problem["status"] != float64(r.Status) ||
			!strings.Contains(detail, "exhausted") {
			t.Fatalf("create past the end (%d, custom %q): %d Retry-After %q %v; want 507 without Retry-After, a problem saying the ID space is exhausted",
				i, custom, r.Status, r.RetryAfter, r.Problem)
		}
		refusals = append(refusals, fmt.Sprintf("%d %q", r.Status, detail))
	}

	// The audit holds exactly the two segments, the counter sits at M,
	// and `control alloc verify` agrees.
	ivs := audit(t, s.pg.Pool())
	if len(ivs) != 2 || ivs[0].Start != m-3 || ivs[0].End != m-1 || ivs[1].Start != m-1 || ivs[1].End != m {
		t.Fatalf("audit after exhaustion: %v; want [M-3, M-1) and [M-1, M)", ivs)
	}
	var next int64
	if err := s.pg.Pool().QueryRow(context.Background(), `SELECT next_id FROM alloc_namespaces WHERE namespace = 'default'`).Scan(&next); err != nil {
		t.Fatal(err)
	}
	if uint64(next) != m {
		t.Fatalf("counter next_id = %d after exhaustion; want 62^6 = %d", next, m)
	}
	out, err := s.runControlCommand(t, "alloc", "verify")
	if err != nil || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("control alloc verify: %v\n%s", err, out)
	}
	led.CheckInDatabase(t, s.pg.Pool())

	evidence.Record(t, evidence.UniqueIDs,
		"namespace [62^6-3, 62^6) with step 2 through the API: 201s for IDs %d, %d, %d as %v, each once, the last = 62^6-1 = zzzzzz; audit %v, counter next_id = %d = 62^6; alloc verify: %s",
		m-3, m-2, m-1, answered, ivs, next, strings.TrimSpace(out))
	evidence.Record(t, evidence.ReserveThenReject,
		"after the last ID every create (generated and custom) was answered at once with %v: explicit, no Retry-After; each of the 3 last codes 302'd on the edge right after its 201",
		refusals)
	evidence.Record(t, evidence.Jumpable, "the last 3 codes of the space (%v) each 302'd on the edge right after its 201", answered)
}
