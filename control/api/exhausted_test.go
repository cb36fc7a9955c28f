package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/shared/link"
)

// failingIDs is the allocator when it cannot hand out an ID, its error
// wrapped as control's wiring wraps every allocation failure.
type failingIDs struct{ err error }

func (f failingIDs) NextID(context.Context, link.DomainID) (uint64, error) {
	return 0, fmt.Errorf("%w: %w", link.ErrUnavailable, f.err)
}

func (failingIDs) Done(uint64, bool) {}

// TestCreateWhenIDsRunOut: an exhausted namespace is a 507 without
// Retry-After (retrying cannot help), unlike an allocator that is only
// unavailable (503 with Retry-After), for single and batch creates.
func TestCreateWhenIDsRunOut(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter bool
	}{
		{"exhausted", fmt.Errorf("lease segment: %w", link.ErrExhausted), http.StatusInsufficientStorage, false},
		{"unavailable", fmt.Errorf("%w: lock wait", idalloc.ErrUnavailable), http.StatusServiceUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := envWithIDs(t, failingIDs{tc.err})
			key := e.tenant(t, "acme")
			r := e.do(t, "POST", "/api/v1/links", key, []byte(`{"url": "https://example.com/"}`))
			if r.status != tc.status || (r.header.Get("Retry-After") != "") != tc.retryAfter {
				t.Fatalf("create: %v Retry-After %q; want %d, Retry-After %v", r, r.header.Get("Retry-After"), tc.status, tc.retryAfter)
			}
			r = e.do(t, "POST", "/api/v1/links/batch", key, []byte(`{"links": [{"url": "https://example.com/a"}]}`))
			items, _ := r.json(t)["results"].([]any)
			if r.status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["status"] != float64(tc.status) {
				t.Fatalf("batch: %v; want 200 with one item of status %d", r, tc.status)
			}
			if n := e.count(t, "links"); n != 0 {
				t.Fatalf("%d links written", n)
			}
		})
	}
}
