package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a fresh database with a job store, and a store of tenants.
type env struct {
	pool *pgxpool.Pool
	st   *postgres.Store
	jobs *Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	return &env{pool: pool, st: postgres.New(pool), jobs: New(pool)}
}

// tenant makes a tenant with a key and returns both ids and the key.
func (e *env) tenant(t *testing.T, name string) (tenant, keyID int64, key string) {
	t.Helper()
	tenant, key, err := e.st.CreateTenantWithKey(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(context.Background(), `SELECT id FROM api_keys WHERE tenant_id = $1`, tenant).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	return tenant, keyID, key
}

// csvRows is a YOURLS CSV of n rows with codes prefix-0000 onwards.
func csvRows(prefix string, n int) []byte {
	var b strings.Builder
	b.WriteString("keyword,url,title\n")
	for i := range n {
		fmt.Fprintf(&b, "%s-%04d,https://example.com/%s/%d,Row %d\n", prefix, i, prefix, i, i)
	}
	return []byte(b.String())
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{"0f8fad5b-d9cb-469f-a165-70867728950e": true, "0F8FAD5B-D9CB-469F-A165-70867728950E": true,
		"": false, "0f8fad5b-d9cb-469f-a165-70867728950": false, "0f8fad5bxd9cb-469f-a165-70867728950e": false,
		"0f8fad5b-d9cb-469f-a165-70867728950g": false, "'; DROP TABLE import_jobs; --": false, "0f8fad5b-d9cb-469f-a165-70867728950e ": false} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v; want %v", id, got, want)
		}
	}
}

func TestJobsAreTheirTenantsOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, acmeKey, _ := e.tenant(t, "acme")
	rival, _, _ := e.tenant(t, "rival")
	j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: acmeKey, FileName: `<script>x</script>.csv`, File: csvRows("a", 3),
		Options: importjobs.Options{Format: importer.Auto, RedirectType: 301}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != importjobs.Queued || j.FileSize == 0 || j.FileName != `<script>x</script>.csv` || j.RedirectType != 301 || !validID(j.ID) {
		t.Fatalf("created %+v", j)
	}
	got, err := e.jobs.Job(ctx, acme, j.ID)
	if err != nil || got.ID != j.ID || got.Progress.BytesTotal != j.FileSize {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	for _, id := range []string{j.ID, "00000000-0000-0000-0000-000000000000", "nope", "'; DROP TABLE import_jobs; --", strings.ToUpper(j.ID) + "x"} {
		if _, err := e.jobs.Job(ctx, rival, id); !errors.Is(err, link.ErrNotFound) {
			t.Errorf("rival reads job %q: %v; want not found", id, err)
		}
		if _, err := e.jobs.Output(ctx, rival, id, importjobs.Mapping); !errors.Is(err, link.ErrNotFound) {
			t.Errorf("rival reads the mapping of %q: %v; want not found", id, err)
		}
	}
	if _, err := e.jobs.Output(ctx, acme, j.ID, importjobs.Mapping); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("the mapping of a queued job: %v; want not found", err)
	}
	if _, err := e.jobs.Output(ctx, acme, j.ID, "file"); !errors.Is(err, link.ErrNotFound) {
		t.Errorf("an output that is none: %v; want not found", err)
	}
	if js, err := e.jobs.Jobs(ctx, rival, 10); err != nil || len(js) != 0 {
		t.Errorf("rival's jobs: %v %v; want none", js, err)
	}
	if js, err := e.jobs.Jobs(ctx, acme, 10); err != nil || len(js) != 1 || js[0].ID != j.ID {
		t.Errorf("acme's jobs: %v %v", js, err)
	}
	if _, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: acmeKey, FileName: "empty.csv"}, 3); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("an empty file: %v; want invalid input", err)
	}
}

// TestActiveJobsAreBounded: a tenant may have maxActive jobs queued or
// running; uploads past it are refused, even when they race.
func TestActiveJobsAreBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	other, otherKey, _ := e.tenant(t, "other")
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			_, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("r", i+1), Options: importjobs.Options{Format: importer.Auto}}, 2)
			errs <- err
		}()
	}
	ok, refused := 0, 0
	for range 6 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, importjobs.ErrTooMany):
			refused++
		default:
			t.Fatal(err)
		}
	}
	if ok != 2 || refused != 4 {
		t.Errorf("%d created, %d refused; want 2 and 4", ok, refused)
	}
	if _, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: other, KeyID: otherKey, FileName: "f.csv", File: csvRows("r", 1), Options: importjobs.Options{Format: importer.Auto}}, 2); err != nil {
		t.Errorf("another tenant is bounded by acme's jobs: %v", err)
	}
}

func TestPurgeKeepsRecentJobs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	var ids []string
	for range 3 {
		j, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("p", 1), Options: importjobs.Options{Format: importer.Auto}}, 5)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// Finished 8 days ago, finished just now, queued 8 days ago.
	if _, err := e.pool.Exec(ctx, `UPDATE import_jobs SET state = 'done', file = NULL, finished_at = now() - interval '8 days' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE import_jobs SET state = 'done', file = NULL, finished_at = now() WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE import_jobs SET created_at = now() - interval '8 days' WHERE id = $1`, ids[2]); err != nil {
		t.Fatal(err)
	}
	n, err := e.jobs.Purge(ctx, 7*24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("purged %d, %v; want 2", n, err)
	}
	for i, want := range []error{link.ErrNotFound, nil, link.ErrNotFound} {
		if _, err := e.jobs.Job(ctx, acme, ids[i]); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("job %d after the purge: %v; want %v", i, err, want)
		}
	}
}

// TestClaimSweepsRevokedAndWornOut: a queued job whose key was revoked,
// and a running job out of resumes whose lease ran out, are failed with
// their reason instead of claimed.
func TestClaimSweepsRevokedAndWornOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acme, key, _ := e.tenant(t, "acme")
	rival, rivalKey, _ := e.tenant(t, "rival")
	revoked, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: rival, KeyID: rivalKey, FileName: "f.csv", File: csvRows("r", 1), Options: importjobs.Options{Format: importer.Auto}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	worn, err := e.jobs.Create(ctx, importjobs.NewJob{TenantID: acme, KeyID: key, FileName: "f.csv", File: csvRows("w", 1), Options: importjobs.Options{Format: importer.Auto}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, rivalKey); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE import_jobs SET state = 'running', lease_owner = 'gone', lease_until = now() - interval '1 second', resumes = 3 WHERE id = $1`, worn.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := e.jobs.Sweep(ctx, 3); err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	if c, err := e.jobs.Claim(ctx, "me", time.Minute, 1); err != nil || c != nil {
		t.Fatalf("claimed %+v, %v; want nothing left", c, err)
	}
	for _, c := range []struct {
		tenant int64
		id     string
		want   string
	}{{rival, revoked.ID, "revoked"}, {acme, worn.ID, "interrupted 4 times"}} {
		j, err := e.jobs.Job(ctx, c.tenant, c.id)
		if err != nil || j.State != importjobs.Failed || !strings.Contains(j.Message, c.want) || j.FinishedAt.IsZero() {
			t.Errorf("job: %+v, %v; want failed saying %q", j, err, c.want)
		}
	}
	var files int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM import_jobs WHERE file IS NOT NULL`).Scan(&files); err != nil || files != 0 {
		t.Errorf("%d failed jobs still hold their file (%v)", files, err)
	}
}
