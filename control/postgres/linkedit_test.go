package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// linkState is what an edit may change: the link's target, version and
// tags, and how many change events it has.
type linkState struct {
	url     string
	version uint64
	tags    string
	events  int
}

func stateOf(t *testing.T, st *Store, tenant int64, code string) linkState {
	t.Helper()
	ctx := context.Background()
	l, err := st.GetLink(ctx, tenant, link.DefaultDomain, code)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE code = $1`, code).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return linkState{l.URL, l.Version, strings.Join(l.Tags, ","), n}
}

// TestUpdateWithTagsIsOneChange: an edit of fields and tags is one
// transaction — one version and one change event, with the new tags; tags
// alone take no version and no event; and when any part fails (a fault
// PostgreSQL raises while the tags are written, after the lock; a deleted
// link), nothing of the edit is written.
func TestUpdateWithTagsIsOneChange(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	l := &link.Link{ID: 7, Code: "edit-me", TenantID: tenant, Namespace: "default",
		URL: "https://example.com/0", URLOriginal: "https://example.com/0", RedirectType: 302}
	if err := st.CreateLink(ctx, l, true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TagLinks(ctx, tenant, link.DefaultDomain, links.TagChange{Codes: []string{"edit-me"}, Add: []string{"old", "keep"}}); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, st, tenant, "edit-me")

	u := "https://example.com/1"
	got, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "edit-me",
		links.Change{SetURL: true, URL: u, URLOriginal: u, SetTags: true, Tags: []string{"keep", "new"}})
	if err != nil {
		t.Fatal(err)
	}
	after := stateOf(t, st, tenant, "edit-me")
	if after.url != u || after.tags != "keep,new" || after.version <= before.version || after.events != before.events+1 {
		t.Fatalf("fields and tags: %+v (was %+v); want the new target, tags keep,new, a newer version, one more event", after, before)
	}
	if strings.Join(got.Tags, ",") != "keep,new" || got.Version != after.version {
		t.Errorf("the answer: tags %v version %d; want what was stored, %+v", got.Tags, got.Version, after)
	}

	got, err = st.UpdateLink(ctx, tenant, link.DefaultDomain, "edit-me", links.Change{SetTags: true, Tags: nil})
	if err != nil {
		t.Fatal(err)
	}
	tagsOff := stateOf(t, st, tenant, "edit-me")
	if tagsOff.tags != "" || tagsOff.version != after.version || tagsOff.events != after.events || got.Tags != nil {
		t.Fatalf("tags alone: %+v, answered %v (was %+v); want no tags, the same version, no event", tagsOff, got.Tags, after)
	}

	// A fault inside the transaction, after the lock and the delete of
	// old tags: PostgreSQL refuses one tag on insert.
	if _, err := st.Pool().Exec(ctx, `
		CREATE FUNCTION refuse_tag() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.tag = 'boom' THEN RAISE EXCEPTION 'refused tag boom'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER refuse_tag BEFORE INSERT ON link_tags FOR EACH ROW EXECUTE FUNCTION refuse_tag();`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TagLinks(ctx, tenant, link.DefaultDomain, links.TagChange{Codes: []string{"edit-me"}, Add: []string{"keep"}}); err != nil {
		t.Fatal(err)
	}
	kept := stateOf(t, st, tenant, "edit-me")
	u2 := "https://example.com/2"
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "edit-me",
		links.Change{SetURL: true, URL: u2, URLOriginal: u2, SetTags: true, Tags: []string{"boom"}}); err == nil || !strings.Contains(err.Error(), "refused tag boom") {
		t.Fatalf("an edit whose tags fail: %v; want the fault", err)
	}
	if now := stateOf(t, st, tenant, "edit-me"); now != kept {
		t.Fatalf("a failed edit wrote %+v; want nothing changed from %+v", now, kept)
	}

	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "edit-me", links.Change{SetStatus: true, Status: link.Deleted}); err != nil {
		t.Fatal(err)
	}
	deleted := stateOf(t, st, tenant, "edit-me")
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "edit-me",
		links.Change{SetTitle: true, Title: "x", SetTags: true, Tags: []string{"late"}}); !errors.Is(err, link.ErrDeleted) {
		t.Fatalf("an edit of a deleted link: %v; want ErrDeleted", err)
	}
	if now := stateOf(t, st, tenant, "edit-me"); now != deleted {
		t.Fatalf("an edit of a deleted link wrote %+v; want %+v", now, deleted)
	}
	if _, err := st.UpdateLink(ctx, tenant+1, link.DefaultDomain, "edit-me", links.Change{SetTags: true, Tags: []string{"x"}}); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("another tenant's edit: %v; want ErrNotFound", err)
	}
}

// TestFieldsSet: every Set flag of links.Change but SetTags is a change of
// fields, so none is ever mistaken for a change of tags alone.
func TestFieldsSet(t *testing.T) {
	if fieldsSet(links.Change{SetTags: true, Tags: []string{"a"}}) {
		t.Error("tags alone read as a change of fields")
	}
	for _, c := range []links.Change{{SetURL: true}, {SetRedirect: true}, {SetExpiry: true}, {SetStatus: true}, {SetTitle: true, SetTags: true}} {
		if !fieldsSet(c) {
			t.Errorf("%+v read as no change of fields", c)
		}
	}
}
