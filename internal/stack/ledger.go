package stack

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/shared/base62"
)

// Ledger records every 201 a test saw: the code, the target and the ID it
// decodes to, and who answered. Duplicate IDs are what the allocator must
// never hand out; the unique index would hide them in the table, so they
// are caught here. It is safe for concurrent use.
type Ledger struct {
	mu     sync.Mutex
	byCode map[string]Issued
	byID   map[uint64]string
	dups   []string
	bad    []string
}

// Issued is one recorded 201.
type Issued struct {
	ID  uint64
	URL string
	By  string
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{byCode: map[string]Issued{}, byID: map[uint64]string{}}
}

// Add records a generated code's 201.
func (l *Ledger) Add(code, url, by string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id, err := base62.Decode(code)
	if err != nil || len(code) != base62.Length || id > base62.MaxID {
		l.bad = append(l.bad, fmt.Sprintf("%q (%v)", code, err))
		return
	}
	if prev, ok := l.byID[id]; ok {
		l.dups = append(l.dups, fmt.Sprintf("ID %d answered as %s (by %s) and %s (by %s)", id, prev, l.byCode[prev].By, code, by))
		return
	}
	l.byID[id] = code
	l.byCode[code] = Issued{ID: id, URL: url, By: by}
}

// Len is how many codes are recorded.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byCode)
}

// Codes returns the recorded codes in ID order.
func (l *Ledger) Codes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.byCode))
	for c := range l.byCode {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return l.byCode[out[i]].ID < l.byCode[out[j]].ID })
	return out
}

// Get returns what was recorded for code.
func (l *Ledger) Get(code string) Issued {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byCode[code]
}

// Dups lists the IDs answered twice.
func (l *Ledger) Dups() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.dups...)
}

// CheckUnique fails the test on a duplicate or malformed ID.
func (l *Ledger) CheckUnique(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 || len(l.bad) > 0 {
		t.Fatalf("IDs handed out twice: %v; codes outside the 6-character space: %v", l.dups, l.bad)
	}
}

// CheckInDatabase fails the test unless every recorded link is in the
// links table with the ID and target its 201 named.
func (l *Ledger) CheckInDatabase(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	codes := l.Codes()
	rows, err := pool.Query(context.Background(), `SELECT code, id, url FROM links WHERE code = ANY($1)`, codes)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id  int64
		url string
	}
	got := map[string]row{}
	var code string
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&code, &r.id, &r.url}, func() error { got[code] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, c := range codes {
		want := l.Get(c)
		if g, ok := got[c]; !ok || uint64(g.id) != want.ID || g.url != want.URL {
			if bad++; bad <= 10 {
				t.Errorf("201 for %s (ID %d, %s): the links table has %+v (present %v)", c, want.ID, want.URL, g, ok)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d answered links are not in the database as answered", bad, len(codes))
	}
}

// CheckRedirects fails the test unless every code in codes answers 302
// with its recorded target on the edge at once.
func (l *Ledger) CheckRedirects(t testing.TB, edgeURL string, codes []string) {
	t.Helper()
	wrong := 0
	for _, c := range codes {
		want := l.Get(c).URL
		status, loc, err := Follow(edgeURL, c)
		if err != nil || status != http.StatusFound || loc != want {
			if wrong++; wrong <= 10 {
				t.Errorf("GET /%s on the edge: %d %q %v; want 302 %q", c, status, loc, err, want)
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d answered links do not redirect on the edge", wrong, len(codes))
	}
}

// NewestVersion is the newest change version in the outbox: what an edge
// that received every committed change has applied.
func NewestVersion(ctx context.Context, pool *pgxpool.Pool) (uint64, error) {
	var v int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM outbox`).Scan(&v); err != nil {
		return 0, fmt.Errorf("newest outbox version: %w", err)
	}
	return uint64(v), nil
}

// WaitApplied waits until the edge has applied the outbox's newest version
// (read once, now) and returns the version it applied.
func WaitApplied(t testing.TB, e *Edge, pool *pgxpool.Pool, within time.Duration) uint64 {
	t.Helper()
	want, err := NewestVersion(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var applied uint64
	if err := Poll(context.Background(), "edge applies the outbox's newest version", within, func() bool {
		if p := e.Parts(); p != nil {
			applied = p.Feed.Position().Version
		}
		return applied >= want
	}); err != nil {
		t.Fatalf("%v: the edge applied version %d; the outbox's newest is %d", err, applied, want)
	}
	return applied
}
