package snapshots

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/outbox"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// publishAll runs a relay until the stream holds every outbox row.
func publishAll(t *testing.T, pool *pgxpool.Pool, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = outbox.New(postgres.New(pool), js, outbox.Config{PollInterval: 20 * time.Millisecond}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	var n int
	if err := poll.Wait(ctx, "every outbox row published", 30*time.Second, func() bool {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE version >= (SELECT next_version FROM outbox_published)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	}); err != nil {
		t.Fatalf("%d outbox rows still unpublished: %v", n, err)
	}
}

func TestBuildIsConsistentAndComplete(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := idalloc.New(ctx, allocstore.New(pool), idalloc.Config{
		Namespaces: []idalloc.Namespace{{Name: "default", Start: 1, End: base62.Space, Step: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer alloc.Close(ctx)
	create := func(i int, expires time.Time) *link.Link {
		id, err := alloc.Next(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		code, _ := base62.Encode(id)
		l := &link.Link{ID: id, Code: code, TenantID: tenant, Namespace: "default", RedirectType: 302, ExpiresAt: expires,
			URL: fmt.Sprintf("https://shop%d.example.com/p/%d?utm_source=x", i%3, i), URLOriginal: "x"}
		err = st.CreateLink(ctx, l, false)
		alloc.Done(id, err == nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var links []*link.Link
	for i := range 45 {
		var exp time.Time
		if i%7 == 0 {
			exp = time.Now().Add(time.Hour).Truncate(time.Millisecond)
		}
		links = append(links, create(i, exp))
	}
	// A disabled and a deleted link: the file must say 410 for them, not 404.
	for _, x := range []struct {
		l      *link.Link
		status link.Status
	}{{links[3], link.Disabled}, {links[4], link.Deleted}} {
		if _, err := pool.Exec(ctx, `UPDATE links SET status = $1 WHERE code = $2`, x.status, x.l.Code); err != nil {
			t.Fatal(err)
		}
		x.l.Status = x.status
	}
	publishAll(t, pool, js)
	// Created after the stream's newest event: in the file with its version.
	late := create(100, time.Time{})
	links = append(links, late)

	var buf bytes.Buffer
	var lastDone, lastTotal int64
	h, err := New(postgres.New(pool), js, nil).Build(ctx, &buf, func(d, n int64) { lastDone, lastTotal = d, n })
	if err != nil {
		t.Fatal(err)
	}
	if lastDone != int64(len(links)) || lastTotal != int64(len(links)) {
		t.Errorf("progress ended at %d/%d, want %d", lastDone, lastTotal, len(links))
	}
	snap, err := snapshot.Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h.ChangeVersion >= late.Version {
		t.Errorf("header version %d; the late link has %d and must be newer", h.ChangeVersion, late.Version)
	}
	if snap.Header.StreamSeq == 0 || snap.Header.Entries != uint64(len(links)) {
		t.Errorf("header %+v", snap.Header)
	}
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(bytes.NewReader(snap.Bloom(link.DefaultDomain))); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		e, ok := snap.Lookup(link.DefaultDomain, []byte(l.Code))
		if !ok {
			t.Fatalf("%s missing from the snapshot", l.Code)
		}
		if !f.TestString(l.Code) {
			t.Errorf("%s missing from the bloom", l.Code)
		}
		want := l.URL
		if l.Status != link.Active {
			want = ""
		}
		if got := string(e.AppendURL(nil)); got != want || e.Status != l.Status || e.ExpiresAt != l.ExpiresAt.UnixMilli() && !l.ExpiresAt.IsZero() {
			t.Errorf("%s: snapshot %q %s %d; authority %q %s %v", l.Code, got, e.Status, e.ExpiresAt, want, l.Status, l.ExpiresAt)
		}
		if l == late && e.Version != late.Version {
			t.Errorf("late link recorded at version %d, want %d", e.Version, late.Version)
		}
		if l != late && e.Version != h.ChangeVersion {
			t.Errorf("%s recorded at version %d, want the header's %d", l.Code, e.Version, h.ChangeVersion)
		}
	}
	// Segments are sealed once every ID handed out from them is done: the
	// four full segments of ten are.
	var sealedIDs uint64
	for _, s := range snap.Sealed() {
		for _, iv := range s.Intervals {
			sealedIDs += iv.End - iv.Start
		}
	}
	if sealedIDs < 40 {
		t.Errorf("only %d sealed IDs in the snapshot: %v", sealedIDs, snap.Sealed())
	}

	// Publishing keeps the newest three, byte-identical.
	for i := range 4 {
		var b bytes.Buffer
		if _, err := New(postgres.New(pool), js, nil).Build(ctx, &b, nil); err != nil {
			t.Fatal(err)
		}
		data := b.Bytes()
		if i < 3 { // make each a distinct version
			create(200+i, time.Time{})
			publishAll(t, pool, js)
		}
		name, err := Publish(ctx, js, data, 1)
		if err != nil {
			t.Fatal(err)
		}
		obs, err := js.ObjectStore(ctx, snapshot.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		r, err := obs.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("fetched %s differs from what was published (%v)", name, err)
		}
	}
	obs, _ := js.ObjectStore(ctx, snapshot.Bucket)
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != Keep {
		t.Errorf("bucket keeps %d snapshots, want %d", len(infos), Keep)
	}
	if _, err := Publish(ctx, js, []byte("not a snapshot"), 1); err == nil {
		t.Error("an invalid snapshot was published")
	}
}

// hotList ranks a fixed list, standing in for click rollups.
type hotList []snapshot.Key

func (h hotList) Hottest(_ context.Context, n int) ([]snapshot.Key, error) {
	return h[:min(n, len(h))], nil
}

func key(d link.DomainID, code string) snapshot.Key { return snapshot.Key{Domain: d, Code: code} }

// TestBudgetKeepsHottestAndBloomsAll: in memory-budget mode the entries are
// the hottest links only, flagged partial, and the bloom still covers every
// code.
func TestBudgetKeepsHottestAndBloomsAll(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	var tenant int64
	if err := pool.QueryRow(ctx, `INSERT INTO tenants (name) VALUES ('t') RETURNING id`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	var codes []string
	for i := range 20 {
		code, _ := base62.Encode(uint64(1000 + i))
		codes = append(codes, code)
		if _, err := pool.Exec(ctx, `INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
			VALUES ($1, $2, $3, 'generated', 'https://example.com/x', 'https://example.com/x', $1)`, 1000+i, code, tenant); err != nil {
			t.Fatal(err)
		}
	}
	hot := hotList{key(0, codes[7]), key(0, "unknown-code"), key(0, codes[3]), key(0, codes[11]), key(0, codes[0])}
	var buf bytes.Buffer
	h, err := New(postgres.New(pool), js, nil).WithBudget(3, hot).Build(ctx, &buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Open(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if h.Flags&snapshot.FlagPartial == 0 || snap.Header.Flags&snapshot.FlagPartial == 0 || snap.Header.BloomCount != 20 {
		t.Fatalf("header %+v: want partial, bloom of 20", snap.Header)
	}
	f := new(bloom.BloomFilter)
	if _, err := f.ReadFrom(bytes.NewReader(snap.Bloom(link.DefaultDomain))); err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		_, in := snap.Lookup(link.DefaultDomain, []byte(c))
		if want := c == codes[7] || c == codes[3]; in != want {
			t.Errorf("%s in the entries: %v, want %v", c, in, want)
		}
		if !f.TestString(c) {
			t.Errorf("%s missing from the bloom", c)
		}
	}
	if snap.Len() != 2 {
		t.Errorf("%d entries, want the 2 known codes among the 3 hottest", snap.Len())
	}
}

// TestBuildPositionsInBatchedRuns: snapshots built while a relay publishes
// runs of events per message (many messages a page, pages under load) sit
// on a message boundary: the message at the snapshot's stream sequence ends
// at its change version, the next message continues from it, and the file
// plus every message after that sequence is exactly the authority.
func TestBuildPositionsInBatchedRuns(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	_, js := natstest.Start(t).Connect(t)
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	relayCtx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = outbox.New(st, js, outbox.Config{PollInterval: 20 * time.Millisecond, MessageEvents: 7, Batch: 50}).Run(relayCtx)
	}()
	t.Cleanup(func() { stopRelay(); <-relayDone })

	// Writers create links and change some while snapshots are built.
	const writers, perWriter = 3, 120
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				id := uint64(w*perWriter + i + 1)
				l := &link.Link{ID: id, Code: fmt.Sprintf("w%d-%04d", w, i), TenantID: tenant, Namespace: "default",
					URL: fmt.Sprintf("https://example.com/%d", id), URLOriginal: "x", RedirectType: 302}
				if err := st.CreateLink(ctx, l, true); err != nil {
					errs <- err
					return
				}
				if i%5 == 4 { // a change of an earlier link: the replay must override the file
					c := links.Change{SetURL: true, URL: fmt.Sprintf("https://example.com/changed/%d", id), URLOriginal: "x"}
					if _, err := st.UpdateLink(ctx, tenant, link.DefaultDomain, fmt.Sprintf("w%d-%04d", w, i-2), c); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	var snaps []*snapshot.Snapshot
	for len(snaps) < 6 {
		var buf bytes.Buffer
		if _, err := New(st, js, nil).Build(ctx, &buf, nil); err != nil {
			t.Fatal(err)
		}
		snap, err := snapshot.Open(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	publishAll(t, pool, js)

	type state struct {
		url     string
		status  link.Status
		version uint64
	}
	truth := map[string]state{}
	rows, err := pool.Query(ctx, `SELECT code, url, status, version FROM links`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var code, url, status string
		var v int64
		if err := rows.Scan(&code, &url, &status, &v); err != nil {
			t.Fatal(err)
		}
		truth[code] = state{url, link.Status(status), uint64(v)}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	msgs := natstest.ChangeMessages(t, js)
	inRuns := 0
	for _, snap := range snaps {
		h := snap.Header
		got := map[string]state{}
		for code := range truth {
			if e, ok := snap.Lookup(link.DefaultDomain, []byte(code)); ok {
				got[code] = state{string(e.AppendURL(nil)), e.Status, e.Version}
			}
		}
		var next *natstest.ChangeMessage
		for i, m := range msgs {
			if m.Seq == h.StreamSeq {
				if last := m.Events[len(m.Events)-1].Version; last != h.ChangeVersion || m.Version != h.ChangeVersion {
					t.Fatalf("snapshot at sequence %d says version %d; that message ends at %d (header %d)", h.StreamSeq, h.ChangeVersion, last, m.Version)
				}
				if i+1 < len(msgs) {
					next = &msgs[i+1]
				}
			}
			if m.Seq <= h.StreamSeq {
				continue
			}
			for _, ev := range m.Events {
				if cur, ok := got[ev.Code]; ev.Kind == linkevent.KindLink && (!ok || ev.Version > cur.version) {
					got[ev.Code] = state{ev.URL, ev.Status, ev.Version}
				}
			}
		}
		if h.StreamSeq > 0 && next != nil {
			if next.Events[0].Prev != h.ChangeVersion {
				t.Fatalf("the message after the snapshot's sequence %d starts after version %d, not the snapshot's %d", h.StreamSeq, next.Events[0].Prev, h.ChangeVersion)
			}
			inRuns++
		}
		for code, want := range truth {
			if g, ok := got[code]; !ok || g.url != want.url || g.status != want.status || g.version < want.version {
				t.Fatalf("snapshot at %d/%d plus the stream after it: %s is %+v (%v), authority %+v", h.StreamSeq, h.ChangeVersion, code, g, ok, want)
			}
		}
	}
	if inRuns == 0 {
		t.Fatal("no snapshot was built while the relay had more to publish")
	}
	for _, m := range msgs {
		if len(m.Events) > 1 {
			return
		}
	}
	t.Fatal("the relay never put two events in one message")
}
