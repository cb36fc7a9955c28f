package domains

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/gate/evidence"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/stack"
)

// TestNewDomainRedirectsAtOnce: a domain added while the edge's change
// feed is paused (its change event cannot reach the edge) still serves its
// links at once: each link created on it is followed right after its 201
// on its host and redirects, because the edge asks the authority about a
// host its table lacks before any 404. A host no domain has is still the
// platform's 404.
func TestNewDomainRedirectsAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	parts := e.edge.Parts()
	acme := e.tenant(t, "acme")

	// A domain the edge receives through its feed, so its table is one the
	// edge holds (not the upgrade path that serves every host as the
	// platform's), before the feed is paused.
	addDomain(t, acme, `{"host":"known.acme.test"}`)
	poll.Until(t, "the edge to apply known.acme.test", 30*time.Second, func() bool {
		_, ok := parts.Domains.ByHost([]byte("known.acme.test"))
		return ok
	})
	parts.Feed.Pause()
	t.Cleanup(parts.Feed.Resume)
	asksBefore := parts.Handler.Counters.HostAsks.Load()

	fresh := []string{"fresh.acme.test", "second.acme.test"}
	for _, h := range fresh {
		addDomain(t, acme, fmt.Sprintf(`{"host":%q}`, h))
		if _, ok := parts.Domains.ByHost([]byte(h)); ok {
			t.Fatalf("%s reached the edge's table through the paused feed", h)
		}
	}

	perDomain := scale(20, 200)
	var (
		mu       sync.Mutex
		wrong    []string
		followed int
	)
	var wg sync.WaitGroup
	for di, host := range fresh {
		wg.Go(func() {
			v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(20+di))
			defer v.Close()
			for i := range perDomain {
				target := fmt.Sprintf("https://example.com/fresh/%d/%d", di, i)
				r := acme.CreatePatiently(ctx, stack.Link{URL: target, Domain: host})
				if r.Status != http.StatusCreated {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("create on %s: %d %v", host, r.Status, r.Problem))
					mu.Unlock()
					return
				}
				status, loc, err := v.FollowHost(host, r.Code)
				mu.Lock()
				followed++
				if (err != nil || status != http.StatusFound || loc != target) && len(wrong) < 10 {
					wrong = append(wrong, fmt.Sprintf("%s/%s right after its 201: %d %q %v", host, r.Code, status, loc, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d follows: first wrong answers: %s", followed, strings.Join(wrong, "; "))
	}

	v := stack.NewVisitor(e.edge.URL, stack.LoopbackIP(30))
	t.Cleanup(v.Close)
	for _, h := range []string{"invented.acme.test", "nobody.test"} {
		if status, loc, err := v.FollowHost(h, "abc123"); err != nil || status != http.StatusNotFound {
			t.Fatalf("invented host %s: %d %q %v; want 404", h, status, loc, err)
		}
	}
	asks := parts.Handler.Counters.HostAsks.Load() - asksBefore
	if asks < uint64(len(fresh)) {
		t.Errorf("%d host asks; want at least one per new domain", asks)
	}
	evidence.Record(t, evidence.DomainIsolation, "with the edge's change feed paused, %d domains were added through the API and %d links created on them; each was followed right after its 201 on its own host: all 302 to its target, the edge learning each domain from the authority (%d host asks); two invented hosts still 404",
		len(fresh), followed, asks)
}
