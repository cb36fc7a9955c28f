package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

const testHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"

func testRules() []link.Rule {
	return []link.Rule{
		{Devices: []link.Device{link.DeviceIOS}, URL: "https://apps.apple.com/app/id1"},
		{Countries: []string{"AT", "DE"}, Languages: []string{"de"}, Query: []link.QueryMatch{{Param: "ref", Equals: true, Value: "mail"}}, URL: "https://example.de/"},
	}
}

// outboxExtras reads the outbox from the first version on and returns each
// link row's event by code.
func outboxByCode(t *testing.T, st *Store) map[string]linkevent.Event {
	t.Helper()
	page, err := st.ReadOutbox(context.Background(), 1, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]linkevent.Event{}
	for _, e := range page.Events {
		if e.Kind == linkevent.KindLink {
			out[e.Code] = e // the last row of a code wins: its newest
		}
	}
	return out
}

func wire(t *testing.T, x link.Extras) string {
	t.Helper()
	b, err := link.AppendExtras(nil, &x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExtrasStored: a link's rules, password hash and click limit go in by
// every insert path (one statement per link, the fresh-codes statement, the
// statement that skips taken codes, and in a transaction), read back for
// the API (rules, the limit, whether there is a password, never the hash),
// and reach the outbox and the snapshot read as the one wire form edges
// take; a plain link's outbox row and snapshot entry carry none.
func TestExtrasStored(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	extras := []link.Extras{
		{},
		{Rules: testRules()},
		{PasswordHash: testHash},
		{MaxClicks: 1},
		{Rules: testRules()[1:], PasswordHash: testHash, MaxClicks: 1 << 40},
	}
	var made []*link.Link
	id := uint64(100)
	mk := func(custom bool, x link.Extras) *link.Link {
		id++
		code, _ := base62.Encode(id)
		if custom {
			code = fmt.Sprintf("custom-%d", id)
		}
		l := &link.Link{ID: id, Code: code, TenantID: tenant, Namespace: "default", URL: fmt.Sprintf("https://example.com/%d", id),
			RedirectType: 302, Extras: x}
		l.URLOriginal = l.URL
		made = append(made, l)
		return l
	}
	// One statement per link.
	for _, x := range extras {
		if err := st.CreateLink(ctx, mk(true, x), true); err != nil {
			t.Fatal(err)
		}
	}
	// Fresh generated codes (Autocommit), custom codes (the statement that
	// skips taken ones), and both in a transaction.
	for _, tc := range []struct {
		custom, inTx bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		var ls []links.NewLink
		for _, x := range extras {
			ls = append(ls, links.NewLink{Link: mk(tc.custom, x), Custom: tc.custom})
		}
		insert := func(tx links.Tx) error {
			ok, err := tx.InsertLinks(ctx, ls)
			if err == nil && strings.Contains(fmt.Sprint(ok), "false") {
				err = fmt.Errorf("inserted %v", ok)
			}
			return err
		}
		var err error
		if tc.inTx {
			err = st.WriteTx(ctx, insert)
		} else {
			err = insert(st.Autocommit())
		}
		if err != nil {
			t.Fatalf("custom %v, in a transaction %v: %v", tc.custom, tc.inTx, err)
		}
	}
	events := outboxByCode(t, st)
	snap := map[string][]byte{}
	err := st.ReadLinks(ctx, func(map[link.DomainID]int64, []snapshot.Sealed, []link.Domain) error { return nil },
		func(l snapshot.Link) error { snap[l.Code] = l.Extras; return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range made {
		got, err := st.GetLink(ctx, tenant, link.DefaultDomain, l.Code)
		if err != nil {
			t.Fatal(err)
		}
		want := l.Extras
		want.PasswordHash = "" // reads never carry it
		if diff := cmp.Diff(want, got.Extras); diff != "" {
			t.Errorf("GetLink(%s).Extras (-want +got):\n%s", l.Code, diff)
		}
		if got.PasswordProtected != (l.Extras.PasswordHash != "") {
			t.Errorf("GetLink(%s).PasswordProtected = %v", l.Code, got.PasswordProtected)
		}
		if e := events[l.Code]; e.Extras != wire(t, l.Extras) {
			t.Errorf("outbox event of %s carries extras %x; want %x", l.Code, e.Extras, wire(t, l.Extras))
		}
		if string(snap[l.Code]) != wire(t, l.Extras) || (l.Extras.IsZero() != (snap[l.Code] == nil)) {
			t.Errorf("snapshot read of %s: extras %x; want %x", l.Code, snap[l.Code], wire(t, l.Extras))
		}
	}
	// Lists read them too.
	ls, err := st.ListLinks(ctx, tenant, nil, links.ListRequest{Limit: 100, Now: made[0].CreatedAt})
	if err != nil {
		t.Fatal(err)
	}
	withRules := 0
	for _, l := range ls {
		if len(l.Extras.Rules) > 0 {
			withRules++
		}
	}
	if withRules != 10 {
		t.Errorf("the list shows %d links with rules; want 10", withRules)
	}
}

// TestUpdateExtras: an update sets, replaces and clears each of rules,
// password and limit on its own, keeping the others, and its outbox row
// carries the link's extras as they are after it.
func TestUpdateExtras(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	l := &link.Link{ID: 7, Code: "000007", TenantID: tenant, Namespace: "default", URL: "https://example.com/", URLOriginal: "https://example.com/", RedirectType: 302}
	if err := st.CreateLink(ctx, l, false); err != nil {
		t.Fatal(err)
	}
	const otherHash = "$argon2id$v=19$m=19456,t=2,p=1$b3RoZXJzYWx0b3RoZXJzYWx0$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"
	for _, step := range []struct {
		name string
		c    links.Change
		want link.Extras // with the hash, as the outbox carries it
	}{
		{"rules", links.Change{SetRules: true, Rules: testRules()}, link.Extras{Rules: testRules()}},
		{"password", links.Change{SetPassword: true, PasswordHash: testHash}, link.Extras{Rules: testRules(), PasswordHash: testHash}},
		{"limit", links.Change{SetMaxClicks: true, MaxClicks: 5}, link.Extras{Rules: testRules(), PasswordHash: testHash, MaxClicks: 5}},
		{"title only", links.Change{SetTitle: true, Title: "t"}, link.Extras{Rules: testRules(), PasswordHash: testHash, MaxClicks: 5}},
		{"new password", links.Change{SetPassword: true, PasswordHash: otherHash}, link.Extras{Rules: testRules(), PasswordHash: otherHash, MaxClicks: 5}},
		{"fewer rules", links.Change{SetRules: true, Rules: testRules()[:1]}, link.Extras{Rules: testRules()[:1], PasswordHash: otherHash, MaxClicks: 5}},
		{"clear rules", links.Change{SetRules: true}, link.Extras{PasswordHash: otherHash, MaxClicks: 5}},
		{"clear password", links.Change{SetPassword: true}, link.Extras{MaxClicks: 5}},
		{"disable", links.Change{SetStatus: true, Status: link.Disabled}, link.Extras{MaxClicks: 5}},
		{"clear limit", links.Change{SetMaxClicks: true}, link.Extras{}},
	} {
		got, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, l.Code, step.c)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want := step.want
		want.PasswordHash = ""
		if diff := cmp.Diff(want, got.Extras); diff != "" || got.PasswordProtected != (step.want.PasswordHash != "") {
			t.Errorf("%s: answer's extras (-want +got):\n%s protected %v", step.name, diff, got.PasswordProtected)
		}
		if e := outboxByCode(t, st)[l.Code]; e.Extras != wire(t, step.want) || e.Version != got.Version {
			t.Errorf("%s: outbox row v%d carries %x; want v%d %x", step.name, e.Version, e.Extras, got.Version, wire(t, step.want))
		}
	}
	var rules, hash, max any
	if err := st.pool.QueryRow(ctx, `SELECT rules, password_hash, max_clicks FROM links WHERE code = $1`, l.Code).Scan(&rules, &hash, &max); err != nil {
		t.Fatal(err)
	}
	if rules != nil || hash != nil || max != nil {
		t.Errorf("a link whose extras were cleared holds %v %v %v; want NULLs", rules, hash, max)
	}
}

// TestExtrasConstraints: the columns refuse what control never writes, so
// a bug or a hand-written statement cannot give edges a hash they would
// refuse or a limit of zero.
func TestExtrasConstraints(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	l := &link.Link{ID: 8, Code: "000008", TenantID: tenant, Namespace: "default", URL: "https://example.com/", URLOriginal: "https://example.com/", RedirectType: 302}
	if err := st.CreateLink(ctx, l, false); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{
		`password_hash = 'plaintext'`,
		`password_hash = '$argon2id$` + strings.Repeat("a", 300) + `'`,
		`max_clicks = 0`,
		`max_clicks = -1`,
		`max_clicks = 9007199254740992`,
		`rules = '\x01'::bytea`,
	} {
		if _, err := st.pool.Exec(ctx, `UPDATE links SET `+set+` WHERE code = $1`, l.Code); err == nil {
			t.Errorf("UPDATE links SET %s was accepted", set)
		}
	}
}
