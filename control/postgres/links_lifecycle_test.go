package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// TestConcurrentUpdatesVersionInCommitOrder: updates of one link racing each
// other take their versions while holding the row lock, so the event with
// the highest version is the state that committed last, which is what an
// edge applying last-writer-wins-by-version ends with.
func TestConcurrentUpdatesVersionInCommitOrder(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	l := &link.Link{ID: 1, Code: "race-me", TenantID: tenant, Namespace: "default",
		URL: "https://example.com/0", URLOriginal: "https://example.com/0", RedirectType: 302}
	if err := st.CreateLink(ctx, l, true); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			u := fmt.Sprintf("https://example.com/%d", i+1)
			if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "race-me", links.Change{SetURL: true, URL: u, URLOriginal: u}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	final, err := st.GetLink(ctx, tenant, link.DefaultDomain, "race-me")
	if err != nil {
		t.Fatal(err)
	}
	var (
		lastURL string
		lastV   int64
		n       int
	)
	if err := st.Pool().QueryRow(ctx, `
		SELECT (SELECT url FROM outbox WHERE code = 'race-me' ORDER BY version DESC LIMIT 1),
		       max(version), count(*) FROM outbox WHERE code = 'race-me'`).Scan(&lastURL, &lastV, &n); err != nil {
		t.Fatal(err)
	}
	if n != 41 || lastURL != final.URL || uint64(lastV) != final.Version {
		t.Fatalf("link ends at %s version %d; outbox has %d events, the newest %s version %d", final.URL, final.Version, n, lastURL, lastV)
	}

	if _, err := st.UpdateLink(ctx, tenant+1, link.DefaultDomain, "race-me", links.Change{SetStatus: true, Status: link.Disabled}); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("another tenant's update: %v; want ErrNotFound", err)
	}
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "race-me", links.Change{SetStatus: true, Status: link.Deleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "race-me", links.Change{SetStatus: true, Status: link.Active}); !errors.Is(err, link.ErrDeleted) {
		t.Errorf("update of a tombstone: %v; want ErrDeleted", err)
	}
}
