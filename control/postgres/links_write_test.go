package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// TestInsertLinksAnswersWhatIsStored: InsertLinks on Autocommit and in a
// transaction, with generated codes all fresh and with one an imported link
// already holds, and with custom codes: every link it reports inserted is
// stored exactly as its answer says (version, times, the original URL
// where it differs from the normalized one, expiry), with one outbox row
// of the same version; the taken one is reported not inserted and writes
// nothing; versions follow the input's order.
func TestInsertLinksAnswersWhatIsStored(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	imported := &link.Link{ID: 900, Code: "0000E8", TenantID: tenant, Namespace: "default",
		URL: "https://imported.example/", URLOriginal: "https://imported.example/", RedirectType: 302}
	if err := st.CreateLink(ctx, imported, true); err != nil {
		t.Fatal(err)
	}
	expires := time.Date(2099, 1, 2, 3, 4, 5, 123456000, time.UTC)
	nextID := uint64(1000)
	batch := func(n int, takenAt int, custom, uniform bool) []links.NewLink {
		ls := make([]links.NewLink, n)
		for i := range ls {
			nextID++
			code, _ := base62.Encode(nextID)
			if i == takenAt {
				code = imported.Code
			}
			if custom {
				code = fmt.Sprintf("custom-%d", nextID)
			}
			l := &link.Link{ID: nextID, Code: code, TenantID: tenant, Namespace: "default",
				URL: fmt.Sprintf("https://example.com/%d", nextID), RedirectType: link.RedirectType(301 + 6*(i%2))}
			l.URLOriginal = l.URL
			if uniform {
				// One redirect type and one expiry for all, every original
				// URL the URL: the columns go as single values.
				l.RedirectType, l.ExpiresAt = 308, expires
				ls[i] = links.NewLink{Link: l}
				continue
			}
			if i%3 == 1 {
				l.URLOriginal = fmt.Sprintf("HTTPS://Example.com:443/%d", nextID)
			}
			if i%4 == 2 {
				l.ExpiresAt = expires
			}
			ls[i] = links.NewLink{Link: l, Custom: custom}
			// Titles and tags go in with their link, or not at all.
			if i%2 == 0 {
				ls[i].Title = fmt.Sprintf("Title <%d> ünïcode", nextID)
			}
			if i%3 == 0 {
				ls[i].Tags = []string{"campaign", fmt.Sprintf("t%d", nextID)}
			}
		}
		return ls
	}
	for _, tc := range []struct {
		name    string
		inTx    bool
		takenAt int // -1: none
		custom  bool
		uniform bool
	}{
		{"autocommit, all fresh", false, -1, false, false},
		{"autocommit, all fresh, uniform", false, -1, false, true},
		{"autocommit, one taken", false, 3, false, false},
		{"autocommit, one taken, uniform", false, 6, false, true},
		{"transaction, all fresh", true, -1, false, false},
		{"transaction, one taken", true, 0, false, false},
		{"autocommit, custom codes", false, -1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := batch(7, tc.takenAt, tc.custom, tc.uniform)
			var got []bool
			insert := func(tx links.Tx) error {
				var err error
				got, err = tx.InsertLinks(ctx, ls)
				return err
			}
			var err error
			if tc.inTx {
				err = st.WriteTx(ctx, insert)
			} else {
				err = insert(st.Autocommit())
			}
			if err != nil {
				t.Fatal(err)
			}
			var last uint64
			for i, nl := range ls {
				l := nl.Link
				if want := i != tc.takenAt; got[i] != want {
					t.Fatalf("link %d (%s): inserted %v; want %v", i, l.Code, got[i], want)
				}
				if !got[i] {
					stored, err := st.GetLink(ctx, tenant, link.DefaultDomain, l.Code)
					if err != nil || stored.ID != imported.ID || stored.Title != "" || stored.Tags != nil {
						t.Fatalf("taken code %s now holds %+v, %v; want the imported link, without the title and tags of the link refused", l.Code, stored, err)
					}
					continue
				}
				if l.Version <= last {
					t.Errorf("link %d has version %d after %d: versions must follow the input's order", i, l.Version, last)
				}
				last = l.Version
				stored, err := st.GetLink(ctx, tenant, link.DefaultDomain, l.Code)
				if err != nil {
					t.Fatal(err)
				}
				if stored.Title != nl.Title || !slices.Equal(stored.Tags, nl.Tags) {
					t.Errorf("link %d: stored with title %q and tags %q; want %q and %q", i, stored.Title, stored.Tags, nl.Title, nl.Tags)
				}
				if diff := cmp.Diff(l, &stored.Link); diff != "" {
					t.Errorf("link %d: the answer differs from what is stored (-answer +stored):\n%s", i, diff)
				}
				var (
					url     string
					rt      int16
					exp     *time.Time
					version uint64
				)
				if err := st.Pool().QueryRow(ctx, `SELECT url, redirect_type, expires_at, version FROM outbox WHERE code = $1`, l.Code).
					Scan(&url, &rt, &exp, &version); err != nil {
					t.Fatalf("outbox row of %s: %v", l.Code, err)
				}
				if url != l.URL || link.RedirectType(rt) != l.RedirectType || (exp != nil) != !l.ExpiresAt.IsZero() || version != l.Version {
					t.Errorf("outbox row of %s: %s %d %v version %d; want %s %d %v version %d", l.Code, url, rt, exp, version, l.URL, l.RedirectType, l.ExpiresAt, l.Version)
				}
			}
		})
	}
	var links, events int
	if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM links), (SELECT count(*) FROM outbox WHERE kind = 'link')`).Scan(&links, &events); err != nil {
		t.Fatal(err)
	}
	if want := 1 + 7*7 - 3; links != want || events != want {
		t.Fatalf("%d links and %d outbox rows; want %d of each", links, events, want)
	}
}
