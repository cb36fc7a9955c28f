package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// roller applies rollups to a store as the click roller does: one stream
// position after another, each rollup in its own transaction.
type roller struct {
	t   *testing.T
	st  *Store
	pos uint64
}

// add counts clicks (bots among them) of code on the platform's domain on
// day, and returns the rollup applied.
func (r *roller) add(code string, day time.Time, n, bots int64) *clickroll.Rollup {
	r.t.Helper()
	ru := &clickroll.Rollup{Stream: clicks.Stream, Prev: r.pos, Last: r.pos + 1,
		Links: []clickroll.LinkDay{{Domain: link.DefaultDomain, Code: code, Day: day, Clicks: n, BotClicks: bots}}}
	if err := r.st.ApplyClicks(context.Background(), ru); err != nil {
		r.t.Fatalf("apply %d clicks of %s: %v", n, code, err)
	}
	r.pos++
	return ru
}

// limitState is what the authority says of a link's limit: its version,
// the count, and the newest outbox event's view of it.
type limitState struct {
	version uint64
	counted int64
	event   linkevent.Event
	view    link.ExtrasView
}

func stateOfLimit(t *testing.T, st *Store, tenant int64, code string) limitState {
	t.Helper()
	l, err := st.GetLink(context.Background(), tenant, link.DefaultDomain, code)
	if err != nil {
		t.Fatal(err)
	}
	e := outboxByCode(t, st)[code]
	return limitState{version: l.Version, counted: l.Extras.ClicksCounted, event: e, view: link.ViewExtras([]byte(e.Extras))}
}

func newLimited(t *testing.T, st *Store, tenant int64, id uint64, code string, max int64) {
	t.Helper()
	l := &link.Link{ID: id, Code: code, TenantID: tenant, Namespace: "default", URL: "https://example.com/" + code,
		URLOriginal: "https://example.com/" + code, RedirectType: 302, Extras: link.Extras{MaxClicks: max}}
	if err := st.CreateLink(context.Background(), l, true); err != nil {
		t.Fatal(err)
	}
}

// TestLimitReachedInTheRollupsTransaction: the roller's transaction that
// brings a limited link's count (bots included) to its limit gives the
// link a new version whose outbox event edges take as reached; the ones
// before and after it write no version; raising, lowering and removing
// the limit are changes whose events carry the count; the snapshot and the
// authority's answers carry it too.
func TestLimitReachedInTheRollupsTransaction(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	newLimited(t, st, tenant, 10, "lim-a", 10)
	newLimited(t, st, tenant, 11, "lim-b", 10)
	plain := &link.Link{ID: 12, Code: "plain", TenantID: tenant, Namespace: "default", URL: "https://example.com/p",
		URLOriginal: "https://example.com/p", RedirectType: 302}
	if err := st.CreateLink(ctx, plain, true); err != nil {
		t.Fatal(err)
	}
	created := stateOfLimit(t, st, tenant, "lim-a")
	if created.counted != 0 || created.view.MaxClicks() != 10 || created.view.LimitReached() {
		t.Fatalf("created: %+v", created)
	}
	r := &roller{t: t, st: st}
	day1 := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)

	r.add("lim-a", day1, 6, 2)
	r.add("plain", day1, 1000, 0)
	s := stateOfLimit(t, st, tenant, "lim-a")
	if s.counted != 6 || s.version != created.version {
		t.Fatalf("after 6 clicks: counted %d at v%d; want 6 at v%d (no change below the limit)", s.counted, s.version, created.version)
	}
	// Another day's clicks reach the limit: the count is every day's.
	r.add("lim-a", day2, 4, 0)
	s = stateOfLimit(t, st, tenant, "lim-a")
	if s.counted != 10 || s.version <= created.version {
		t.Fatalf("after 10 clicks: counted %d at v%d; want 10 at a version past v%d", s.counted, s.version, created.version)
	}
	if s.event.Version != s.version || s.event.Status != link.Active || !s.view.LimitReached() || s.view.ClicksCounted() != 10 {
		t.Fatalf("reached: event v%d %s counted %d reached %v; want v%d active, 10 counted, reached",
			s.event.Version, s.event.Status, s.view.ClicksCounted(), s.view.LimitReached(), s.version)
	}
	if s.event.URL != "https://example.com/lim-a" || s.event.RedirectType != 302 {
		t.Fatalf("the reached event lost the link: %+v", s.event)
	}
	reached := s.version
	// Clicks served before the edges learned it are counted, and no
	// further version is written.
	r.add("lim-a", day2, 3, 3)
	if s = stateOfLimit(t, st, tenant, "lim-a"); s.counted != 13 || s.version != reached {
		t.Fatalf("past the limit: counted %d at v%d; want 13 at v%d", s.counted, s.version, reached)
	}
	// The other limited link and the plain one were never touched.
	if b := stateOfLimit(t, st, tenant, "lim-b"); b.counted != 0 || b.view.LimitReached() {
		t.Fatalf("lim-b: %+v", b)
	}
	if p, _ := st.GetLink(ctx, tenant, link.DefaultDomain, "plain"); p.Version != plain.Version || p.Extras.ClicksCounted != 0 {
		t.Fatalf("the plain link took a version (v%d, was v%d) or a count (%d)", p.Version, plain.Version, p.Extras.ClicksCounted)
	}

	// Raising the limit re-enables the link with a change carrying the
	// count; lowering it below the count reaches it at once; removing it
	// leaves a plain link.
	for _, step := range []struct {
		max     int64
		reached bool
	}{{20, false}, {13, true}, {50, false}, {5, true}, {0, false}} {
		l, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "lim-a", links.Change{SetMaxClicks: true, MaxClicks: step.max})
		if err != nil {
			t.Fatal(err)
		}
		s := stateOfLimit(t, st, tenant, "lim-a")
		wantCounted := int64(13)
		if step.max == 0 {
			wantCounted = 0
		}
		if s.event.Version != l.Version || s.view.MaxClicks() != step.max || s.view.LimitReached() != step.reached ||
			s.view.ClicksCounted() != wantCounted || s.counted != wantCounted {
			t.Fatalf("limit %d: event v%d (answer v%d) max %d counted %d/%d reached %v; want reached %v, %d counted",
				step.max, s.event.Version, l.Version, s.view.MaxClicks(), s.view.ClicksCounted(), s.counted, s.view.LimitReached(), step.reached, wantCounted)
		}
	}
	// A limit set again on a link with clicks takes their count.
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "lim-a", links.Change{SetMaxClicks: true, MaxClicks: 14}); err != nil {
		t.Fatal(err)
	}
	v := stateOfLimit(t, st, tenant, "lim-a").version
	r.add("lim-a", day2, 1, 0)
	s = stateOfLimit(t, st, tenant, "lim-a")
	if s.counted != 14 || s.version <= v || !s.view.LimitReached() {
		t.Fatalf("re-limited at 14: counted %d at v%d (from v%d), reached %v", s.counted, s.version, v, s.view.LimitReached())
	}

	// The snapshot and the authority carry the count with the limit.
	var snapX []byte
	if err := st.ReadLinks(ctx, func(map[link.DomainID]int64, []snapshot.Sealed, []link.Domain) error { return nil },
		func(l snapshot.Link) error {
			if l.Code == "lim-a" {
				snapX = l.Extras
			}
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	if v := link.ViewExtras(snapX); v.ClicksCounted() != 14 || !v.LimitReached() {
		t.Errorf("snapshot: counted %d, reached %v", v.ClicksCounted(), v.LimitReached())
	}
	replies, _, err := st.LookupCodes(ctx, nil, []string{"lim-a", "lim-b"})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := link.ViewExtras([]byte(replies[0].Extras)), link.ViewExtras([]byte(replies[1].Extras)); !a.LimitReached() || a.ClicksCounted() != 14 ||
		b.LimitReached() || b.MaxClicks() != 10 {
		t.Errorf("authority: lim-a counted %d reached %v, lim-b max %d reached %v", a.ClicksCounted(), a.LimitReached(), b.MaxClicks(), b.LimitReached())
	}
}

// TestLimitReachedWhileDisabled: a disabled link that reaches its limit
// (clicks still in flight when it was disabled) takes no version; enabling
// it again is a change edges take as reached.
func TestLimitReachedWhileDisabled(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	newLimited(t, st, tenant, 10, "lim", 5)
	l, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "lim", links.Change{SetStatus: true, Status: link.Disabled})
	if err != nil {
		t.Fatal(err)
	}
	r := &roller{t: t, st: st}
	r.add("lim", time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC), 7, 0)
	if s := stateOfLimit(t, st, tenant, "lim"); s.version != l.Version || s.counted != 7 {
		t.Fatalf("disabled: v%d counted %d; want v%d, 7", s.version, s.counted, l.Version)
	}
	if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, "lim", links.Change{SetStatus: true, Status: link.Active}); err != nil {
		t.Fatal(err)
	}
	if s := stateOfLimit(t, st, tenant, "lim"); s.event.Status != link.Active || !s.view.LimitReached() {
		t.Fatalf("enabled again: %s, reached %v", s.event.Status, s.view.LimitReached())
	}
}

// TestLimitCountedOnceAtAPosition: a rollup the store refuses (the stream
// position moved: another roller applied it) counts nothing against a
// limit; applied, it counts once.
func TestLimitCountedOnceAtAPosition(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	newLimited(t, st, tenant, 10, "lim", 5)
	r := &roller{t: t, st: st}
	day := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	applied := r.add("lim", day, 5, 0)
	v := stateOfLimit(t, st, tenant, "lim").version
	if err := st.ApplyClicks(ctx, applied); !errors.Is(err, clickroll.ErrPositionMoved) {
		t.Fatalf("the same rollup again: %v, want ErrPositionMoved", err)
	}
	if s := stateOfLimit(t, st, tenant, "lim"); s.counted != 5 || s.version != v {
		t.Fatalf("after a refused rollup: counted %d at v%d; want 5 at v%d", s.counted, s.version, v)
	}
}

// TestLimitAndCreatorChangeConcurrently: the creator raising the limit
// while the roller brings the link to its old one, many times over on
// separate connections: whichever commits first, the link ends with the
// count of every click applied, and the newest event says reached exactly
// when that count is at the limit it ends with.
func TestLimitAndCreatorChangeConcurrently(t *testing.T) {
	ctx := context.Background()
	st, tenant := storeWithTenant(t)
	const n = 20
	for i := range n {
		newLimited(t, st, tenant, uint64(100+i), fmt.Sprintf("race-%d", i), 3)
	}
	day := time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC)
	r := &roller{t: t, st: st}
	var wg sync.WaitGroup
	wg.Add(1)
	errs := make(chan error, n)
	go func() {
		defer wg.Done()
		for i := range n {
			_, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, fmt.Sprintf("race-%d", i), links.Change{SetMaxClicks: true, MaxClicks: 6})
			if err != nil {
				errs <- err
			}
		}
	}()
	for i := range n {
		r.add(fmt.Sprintf("race-%d", i), day, 3, 0)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One more click each, counted after both: the count is then exact
	// whatever the order was, and the link below its raised limit.
	for i := range n {
		r.add(fmt.Sprintf("race-%d", i), day, 1, 0)
	}
	for i := range n {
		s := stateOfLimit(t, st, tenant, fmt.Sprintf("race-%d", i))
		if s.counted != 4 || s.view.MaxClicks() != 6 || s.view.LimitReached() {
			t.Errorf("race-%d: counted %d, max %d, reached %v; want 4 of 6, not reached", i, s.counted, s.view.MaxClicks(), s.view.LimitReached())
		}
	}
}
