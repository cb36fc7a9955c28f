package snapshots

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestBuildCarriesExtras: a snapshot of links with rules, passwords and
// click limits is format 4 and gives each link its extras as the outbox
// would; a disabled link's are left out (410 needs none), and a snapshot
// of plain links is format 3.
func TestBuildCarriesExtras(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	build := func() *snapshot.Snapshot {
		t.Helper()
		publishAll(t, pool, js)
		var buf bytes.Buffer
		if _, err := New(st, js, nil).Build(ctx, &buf, nil); err != nil {
			t.Fatal(err)
		}
		s, err := snapshot.Open(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	create := func(code string, x link.Extras) *link.Link {
		l := &link.Link{ID: uint64(len(code)*1000 + int(code[0])), Code: code, TenantID: tenant, Namespace: "default", RedirectType: 302,
			URL: "https://example.com/" + code, URLOriginal: "x", Extras: x}
		if err := st.CreateLink(ctx, l, true); err != nil {
			t.Fatal(err)
		}
		return l
	}
	create("plain-1", link.Extras{})
	if s := build(); s.Format() != 3 {
		t.Fatalf("a snapshot of plain links is format %d; want 3", s.Format())
	}
	const hash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$RdescudvJCsgt3ub+b+dWRWJTmaaJObGRdescudvJCs"
	rules := []link.Rule{{Languages: []string{"fr"}, URL: "https://example.fr/"}}
	withAll := create("all-of-them", link.Extras{Rules: rules, PasswordHash: hash, MaxClicks: 9})
	limited := create("limited", link.Extras{MaxClicks: 1})
	off := create("disabled", link.Extras{PasswordHash: hash})
	if _, err := pool.Exec(ctx, `UPDATE links SET status = 'disabled' WHERE code = $1`, off.Code); err != nil {
		t.Fatal(err)
	}
	s := build()
	if s.Format() != 4 {
		t.Fatalf("a snapshot with extras is format %d; want 4", s.Format())
	}
	for _, tc := range []struct {
		code string
		want link.Extras
	}{{"plain-1", link.Extras{}}, {withAll.Code, withAll.Extras}, {limited.Code, limited.Extras}, {off.Code, link.Extras{}}} {
		e, ok := s.Lookup(link.DefaultDomain, []byte(tc.code))
		if !ok {
			t.Fatalf("%s is not in the snapshot", tc.code)
		}
		want, _ := link.AppendExtras(nil, &tc.want)
		if !bytes.Equal(e.Extras, want) || (want == nil) != (e.Extras == nil) {
			t.Errorf("%s: extras %x; want %x", tc.code, e.Extras, want)
		}
		x, err := link.DecodeExtras(e.Extras)
		if err != nil || fmt.Sprint(x) != fmt.Sprint(tc.want) {
			t.Errorf("%s: decoded %+v, %v; want %+v", tc.code, x, err, tc.want)
		}
	}
}
