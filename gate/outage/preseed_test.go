package outage

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

// TestNegativeCachePreSeed is the fault matrix's negative-cache row through
// the control binary: with the edge's change feed paused, the next 40
// generated codes and 10 custom codes are probed twice each (404, so the
// edge holds negative answers for them), then created; each answers 302
// right after its 201. deploy/local's TestVisibilityContract proves one
// code of each kind in process; this one probes the exact codes the
// allocator then hands out.
func TestNegativeCachePreSeed(t *testing.T) {
	const generated, custom = 40, 10
	s := newStack(t, 1)
	e := startEdge(t, s.nats.URL(), t.TempDir())
	c := s.startControl(t, e.URL)
	key := s.keys[0]

	first := createPatiently(c.URL, key, "https://example.com/first", "")
	if first.Status != http.StatusCreated {
		t.Fatalf("first create: %d %v %v", first.Status, first.Problem, first.Err)
	}
	waitApplied(t, e, s.pg.Pool(), time.Minute)
	id0, err := base62.Decode(first.Code)
	if err != nil {
		t.Fatal(err)
	}
	e.E.Feed.Pause()
	t.Cleanup(e.E.Feed.Resume)
	applied := e.E.Overlay.Len()

	// One client, one control, one create at a time: the allocator hands
	// out the IDs after id0 in order (the segment holds 100,000).
	var future []string
	for i := range uint64(generated) {
		code, _ := base62.Encode(id0 + 1 + i)
		future = append(future, code)
	}
	for i := range custom {
		future = append(future, fmt.Sprintf("preseed-%02d", i))
	}
	for round := range 2 {
		for _, code := range future {
			if status, _, err := stack.Follow(e.URL, code); err != nil || status != http.StatusNotFound {
				t.Fatalf("probe %d of future code %s: %d %v; want 404", round+1, code, status, err)
			}
		}
	}

	led := stack.NewLedger()
	for i, code := range future {
		customCode := ""
		if i >= generated {
			customCode = code
		}
		r := createPatiently(c.URL, key, fmt.Sprintf("https://example.com/preseed/%d", i), customCode)
		if r.Status != http.StatusCreated {
			t.Fatalf("create of probed code %s: %d %v %v", code, r.Status, r.Problem, r.Err)
		}
		if r.Code != code {
			t.Fatalf("create %d answered code %s; the probed code was %s: the probe proved nothing", i, r.Code, code)
		}
		if customCode == "" {
			led.Add(r.Code, r.URL, "generated")
		}
		if status, loc, err := stack.Follow(e.URL, r.Code); err != nil || status != http.StatusFound || loc != r.URL {
			t.Fatalf("probed code %s right after its 201: %d %q %v; want 302 %q", r.Code, status, loc, err, r.URL)
		}
	}
	led.CheckUnique(t)
	if n := e.E.Overlay.Len(); n != applied {
		t.Fatalf("the paused feed applied %d links meanwhile: the answers did not have to override negative entries", n-applied)
	}
	e.E.Feed.Resume()
	v := waitApplied(t, e, s.pg.Pool(), time.Minute)
	for _, code := range future {
		if status, _, err := stack.Follow(e.URL, code); err != nil || status != http.StatusFound {
			t.Fatalf("%s after the feed caught up: %d %v; want 302", code, status, err)
		}
	}

	evidence.Record(t, evidence.ContractUnderLag,
		"negative-cache pre-seed through the control binary: %d future generated codes (%s … %s, IDs %d … %d) and %d custom codes were probed twice (404) with the edge's feed paused, then created: each was handed out as probed and 302'd right after its 201; after the feed resumed (version %d) all still 302",
		generated, future[0], future[generated-1], id0+1, id0+generated, custom, v)
	evidence.Record(t, evidence.Jumpable,
		"%d creates of pre-probed codes (generated and custom) each 302'd on the edge right after its 201, with the edge's change feed paused", len(future))
}
