package importer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/domains"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// apiEnv is control's creator API on a real, fresh PostgreSQL over loopback
// HTTP. IDs come from a counter instead of the segment allocator (which has
// its own tests; deploy/local's import test runs the real one).
type apiEnv struct {
	pool *pgxpool.Pool
	st   *postgres.Store
	url  string
}

type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + s.n.Add(1), nil
}
func (seqIDs) Done(uint64, bool) {}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	// What control does at start: the platform's domain is named by the
	// public URL's host.
	if _, err := st.EnsureDefaultDomain(context.Background(), "sho.rt"); err != nil {
		t.Fatal(err)
	}
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: api.Routes})
	srv := httptest.NewServer(api.New(st, svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1}))
	t.Cleanup(srv.Close)
	return &apiEnv{pool: pool, st: st, url: srv.URL}
}

func (e *apiEnv) client(t *testing.T, tenant string) (*apiclient.Client, int64) {
	t.Helper()
	id, key, err := e.st.CreateTenantWithKey(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	c, err := apiclient.New(e.url, key)
	if err != nil {
		t.Fatal(err)
	}
	return c, id
}

// addDomain gives tenant a domain of its own on host, with sequential
// codes (FF1 needs a key file, which these tests have no use for).
func (e *apiEnv) addDomain(t *testing.T, tenant int64, host string) {
	t.Helper()
	if _, err := domains.New(e.st, domains.Config{}).Create(context.Background(), tenant, domains.Input{Host: host, CodeMode: link.CodesSequential}); err != nil {
		t.Fatalf("add domain %s: %v", host, err)
	}
}

func (e *apiEnv) count(t *testing.T, tenant int64) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM links WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:16])
}

func runImport(t *testing.T, input string, c Client, o Options) (*Summary, error) {
	t.Helper()
	rd, err := NewReader(strings.NewReader(input), Auto)
	if err != nil {
		t.Fatal(err)
	}
	if o.Digest == "" {
		o.Digest = digest(input)
	}
	return Run(context.Background(), rd, c, o)
}

// mixedExport exercises every outcome; see wantOutcomes.
const mixedExport = `keyword,url,title,timestamp,ip,clicks
keep-me,https://example.com/keep,t,2020-01-01,::1,0
ab,https://example.com/short-code,t,2020-01-01,::1,0
abc123,https://example.com/generated-looking,t,2020-01-01,::1,0
livez,https://example.com/reserved,t,2020-01-01,::1,0
theirs7,https://example.com/taken,t,2020-01-01,::1,0
mine-1,https://example.com/mine,t,2020-01-01,::1,0
ftp-code,ftp://example.com/bad-scheme,t,2020-01-01,::1,0
keep-me,https://example.com/keep,t,2020-01-01,::1,0
keep-me,https://example.com/other,t,2020-01-01,::1,0
"broken,https://example.com/broken,t,2020-01-01,::1,0
good-2,https://example.com/good 2,t,2020-01-01,::1,0
good-3,https://EXAMPLE.com/good3,t,2020-01-01,::1,0
`

var wantOutcomes = map[int]Kind{
	2: Kept, 3: Recoded, 4: Recoded, 5: Recoded, 6: Recoded, 7: Existing, 8: Rejected,
	9: Duplicate, 10: Rejected, 11: Rejected, 12: Rejected, 13: Kept,
}

func outcomeKinds(s *Summary) map[int]Kind {
	m := make(map[int]Kind)
	for _, o := range s.Outcomes {
		m[o.Line] = o.Kind
	}
	return m
}

// TestImportOutcomes: codes that fit are kept, the rest re-coded, bad rows
// rejected with reasons, and running the same import again replays every
// chunk and creates nothing.
func TestImportOutcomes(t *testing.T) {
	e := newAPIEnv(t)
	other, _ := e.client(t, "other")
	c, tenant := e.client(t, "importer")
	ctx := context.Background()
	if _, _, err := other.Create(ctx, apiclient.CreateRequest{URL: "https://elsewhere.example/", Code: "theirs7"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Create(ctx, apiclient.CreateRequest{URL: "https://example.com/mine", Code: "mine-1"}, ""); err != nil {
		t.Fatal(err)
	}
	before := e.count(t, tenant)

	for _, batch := range []int{1000, 3} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			input := mixedExport
			if batch != 1000 { // another file: other keys, and codes now taken by this tenant
				input = strings.ReplaceAll(mixedExport, "2020-01-01", "2021-01-01")
			}
			start := e.count(t, tenant)
			s, err := runImport(t, input, c, Options{BatchSize: batch, Concurrency: 3})
			if err != nil {
				t.Fatal(err)
			}
			got := outcomeKinds(s)
			want := wantOutcomes
			if batch != 1000 {
				// The first run created these; the second file finds
				// them (kept codes) or creates them again (new codes:
				// a different file is a different import).
				want = map[int]Kind{}
				for l, k := range wantOutcomes {
					want[l] = k
				}
				want[2], want[13] = Existing, Existing
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				for _, o := range s.Outcomes {
					t.Logf("%+v", o)
				}
				t.Fatalf("outcomes\n got %v\nwant %v", got, want)
			}
			created := s.Kept + s.Recoded
			if n := e.count(t, tenant); n != start+created {
				t.Errorf("tenant has %d links, %d before + %d created", n, start, created)
			}
			for _, o := range s.Outcomes {
				switch o.Kind {
				case Kept, Existing:
					if o.NewCode != o.OldCode {
						t.Errorf("line %d kept %q as %q", o.Line, o.OldCode, o.NewCode)
					}
				case Recoded:
					if o.NewCode == "" || o.NewCode == o.OldCode || o.Reason == "" {
						t.Errorf("line %d re-coded without a new code or reason: %+v", o.Line, o)
					}
				case Rejected, Duplicate:
					if o.Reason == "" || o.NewCode != "" {
						t.Errorf("line %d: %+v", o.Line, o)
					}
				}
			}
			// The mapping points at the right targets.
			for _, o := range s.Outcomes {
				if o.NewCode == "" {
					continue
				}
				l, err := c.Get(ctx, o.NewCode)
				if err != nil || l.URLOriginal != o.URL {
					t.Errorf("line %d: %s answers %+v %v; want %s", o.Line, o.NewCode, l, err, o.URL)
				}
			}

			// Again: every chunk replays, nothing new.
			n := e.count(t, tenant)
			again, err := runImport(t, input, c, Options{BatchSize: batch, Concurrency: 2})
			if err != nil {
				t.Fatal(err)
			}
			if e.count(t, tenant) != n || again.Replayed != again.Chunks || again.Chunks != s.Chunks {
				t.Errorf("re-run: %d links (was %d), %d of %d chunks replayed", e.count(t, tenant), n, again.Replayed, again.Chunks)
			}
			if fmt.Sprint(outcomeKinds(again)) != fmt.Sprint(got) {
				t.Errorf("re-run outcomes %v; first run %v", outcomeKinds(again), got)
			}
		})
	}
	if e.count(t, tenant) <= before {
		t.Fatal("nothing imported")
	}
}

// TestImportChangedOptionsRefused: the same file with another redirect
// type is another request under the same keys: refused, reported, and
// nothing created.
func TestImportChangedOptionsRefused(t *testing.T) {
	e := newAPIEnv(t)
	c, tenant := e.client(t, "importer")
	input := "keyword,url\nchg-1,https://example.com/1\nchg-2,https://example.com/2\n"
	if _, err := runImport(t, input, c, Options{}); err != nil {
		t.Fatal(err)
	}
	n := e.count(t, tenant)
	for _, o := range []Options{{RedirectType: 301}, {BatchSize: 1}} {
		s, err := runImport(t, input, c, o)
		if err == nil || s.Failed == 0 || s.Kept+s.Recoded != 0 || !strings.Contains(s.Outcomes[0].Reason, "different") {
			t.Fatalf("changed options %+v: %v %+v", o, err, s)
		}
		if e.count(t, tenant) != n {
			t.Errorf("a re-run with %+v created links", o)
		}
	}
}

// flaky fails every batch after the first `ok` ones, as an import killed
// midway would leave things: a fault injected in the client because a
// real interruption cannot be placed between two chunks deterministically.
type flaky struct {
	*apiclient.Client
	ok    int
	calls atomic.Int64
}

func (f *flaky) CreateBatch(ctx context.Context, reqs []apiclient.CreateRequest, key string) (*apiclient.BatchAnswer, error) {
	if int(f.calls.Add(1)) > f.ok {
		return nil, errors.New("connection reset (injected)")
	}
	return f.Client.CreateBatch(ctx, reqs, key)
}

// TestImportResumes: an import that stops after some chunks, run again,
// ends with exactly one link per row: the chunks done before replay, the
// rest are created.
func TestImportResumes(t *testing.T) {
	e := newAPIEnv(t)
	c, tenant := e.client(t, "importer")
	var b strings.Builder
	b.WriteString("createdAt,shortUrl,shortCode,longUrl\n")
	const rows = 250
	for i := range rows {
		code := fmt.Sprintf("res-%d", i)
		if i%5 == 0 {
			code = fmt.Sprintf("r%d", i) // too short for some: re-coded
		}
		fmt.Fprintf(&b, "2024-01-01,https://s.test/%s,%s,https://example.com/%d\n", code, code, i)
	}
	input := b.String()
	s1, err := runImport(t, input, &flaky{Client: c, ok: 4}, Options{BatchSize: 20, Concurrency: 1})
	if err == nil || s1.Failed == 0 {
		t.Fatalf("interrupted import: %v %+v", err, s1.Failed)
	}
	partial := e.count(t, tenant)
	if partial == 0 || partial >= rows {
		t.Fatalf("after the interruption %d links; want some but not all of %d", partial, rows)
	}
	s2, err := runImport(t, input, c, Options{BatchSize: 20, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, tenant); n != rows || s2.Imported() != rows || s2.Replayed == 0 {
		t.Fatalf("after resuming: %d links, %d imported, %d chunks replayed; want %d links, none twice", n, s2.Imported(), s2.Replayed, rows)
	}
	var dups int
	if err := e.pool.QueryRow(context.Background(),
		`SELECT count(*) - count(DISTINCT url_original) FROM links WHERE tenant_id = $1`, tenant).Scan(&dups); err != nil || dups != 0 {
		t.Fatalf("%d targets imported twice (%v)", dups, err)
	}
}

// failingGet answers every lookup with a transport error: a fault injected
// in the client because a real one cannot be timed to hit just the lookup.
type failingGet struct{ *apiclient.Client }

func (failingGet) Lookup(context.Context, string, string) (*apiclient.Link, error) {
	return nil, errors.New("connection refused (injected)")
}

// TestImportTakenCodeLookupFails: when a taken code cannot be looked up,
// its chunk's second batch is not sent (its rows would depend on the
// failure); the next run sends it, and every row ends with one link.
func TestImportTakenCodeLookupFails(t *testing.T) {
	e := newAPIEnv(t)
	other, _ := e.client(t, "other")
	c, tenant := e.client(t, "importer")
	if _, _, err := other.Create(context.Background(), apiclient.CreateRequest{URL: "https://elsewhere.example/", Code: "taken-1"}, ""); err != nil {
		t.Fatal(err)
	}
	input := "keyword,url\nfree-1,https://example.com/1\ntaken-1,https://example.com/2\nab,https://example.com/3\n"
	s, err := runImport(t, input, failingGet{c}, Options{})
	// "ab" is re-coded in the first batch; "taken-1" waits for the second.
	if err == nil || s.Failed != 1 || s.Kept != 1 || s.Recoded != 1 || s.Rejected != 1 {
		t.Fatalf("first run: %v %+v", err, s)
	}
	if n := e.count(t, tenant); n != 2 {
		t.Fatalf("after the first run %d links; want 2 (the second batch held back)", n)
	}
	s, err = runImport(t, input, c, Options{})
	if err != nil || s.Kept != 1 || s.Recoded != 2 {
		t.Fatalf("second run: %v %+v", err, s)
	}
	if n := e.count(t, tenant); n != 3 {
		t.Fatalf("after the second run %d links; want 3", n)
	}
}
