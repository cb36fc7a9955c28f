package console

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelink/edgelink/internal/stack"
)

// bulkCSV writes a 1,000-row CSV with YOURLS's columns into dir: 990
// rows with codes of their own (bulk-0000 …), 5 without a code (new
// ones), 3 whose target is no http(s) URL (rejected) and 2 that repeat
// earlier rows (duplicates).
func bulkCSV(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("keyword,url,title\n")
	for i := range 990 {
		fmt.Fprintf(&b, "bulk-%04d,https://example.com/bulk/%d,Row %d\n", i, i, i)
	}
	for i := range 5 {
		fmt.Fprintf(&b, ",https://example.com/fresh/%d,Fresh %d\n", i, i)
	}
	for i := range 3 {
		fmt.Fprintf(&b, "bad-%04d,ftp://example.com/bad/%d,Bad %d\n", i, i, i)
	}
	b.WriteString("bulk-0000,https://example.com/bulk/0,Again\nbulk-0001,https://example.com/bulk/1,Again\n")
	path := filepath.Join(dir, "links.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBulkUploadInChromium uploads a 1,000-row CSV in the console with
// JavaScript on, watches the job's page (htmx polls its status in place)
// until it is done, checks the summary, downloads the mapping from the
// page and follows imported links on the edge.
func TestBulkUploadInChromium(t *testing.T) {
	b := newBrowser(t)
	s := startStack(t)
	file := bulkCSV(t, t.TempDir())
	b.signIn(t, s.controlURL, s.key)
	b.do(t, "upload the CSV",
		chromedp.Navigate(s.controlURL+"/console/links"),
		chromedp.Click(chromedp.CSS(`nav a[href="/console/imports"]`)),
		chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}),
		chromedp.Submit(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.ID("job-state")),
	)
	jobURL := run(t, b, "location", chromedp.Location())
	if !strings.HasPrefix(jobURL, s.controlURL+"/console/imports/") {
		t.Fatalf("after the upload at %s; want the job's page. It says: %s", jobURL, b.text(t, "main"))
	}
	b.do(t, "watch the job finish", chromedp.WaitVisible(chromedp.ID("job-summary")))
	if loc := run(t, b, "location", chromedp.Location()); loc != jobURL {
		t.Errorf("the page left %s for %s: htmx should update it in place", jobURL, loc)
	}
	for id, want := range map[string]string{"job-state": "done", "sum-rows": "1,000", "sum-kept": "990", "sum-existing": "0", "sum-recoded": "5",
		"sum-duplicates": "2", "sum-rejected": "3"} {
		if got := b.text(t, "#"+id); got != want {
			t.Errorf("#%s says %q; want %q", id, got, want)
		}
	}
	if n := run(t, b, "rejected rows shown", chromedp.Evaluate[int](`document.querySelectorAll("#job-rejects tbody tr").length`)); n != 5 {
		t.Errorf("%d rejected rows on the page; want 3 rejected and 2 duplicates", n)
	}
	// The mapping, fetched by the page as its link would download it
	// (same origin, the session's cookie).
	mapping := run(t, b, "fetch the mapping", chromedp.Evaluate[string](
		`fetch(document.querySelector("#mapping-link").href).then(r => r.ok ? r.text() : "status " + r.status)`, chromedp.EvalAwaitPromise))
	recs, err := csv.NewReader(strings.NewReader(mapping)).ReadAll()
	if err != nil || len(recs) != 996 {
		t.Fatalf("the mapping has %d records (%v); want a header and 995 rows:\n%.500s", len(recs), err, mapping)
	}
	newCodes := map[string]string{}
	for _, r := range recs[1:] {
		newCodes[r[4]] = r[1] // url → code now
		if r[2] == "kept" && r[0] != r[1] {
			t.Errorf("a kept row changed its code: %q", r)
		}
	}
	for _, c := range []struct{ url, code string }{
		{"https://example.com/bulk/0", "bulk-0000"},
		{"https://example.com/bulk/989", "bulk-0989"},
		{"https://example.com/fresh/4", newCodes["https://example.com/fresh/4"]},
	} {
		if newCodes[c.url] != c.code || c.code == "" {
			t.Errorf("the mapping gives %s the code %q; want %q", c.url, newCodes[c.url], c.code)
			continue
		}
		status, loc, err := stack.FollowUntil(s.edgeURL, c.code, time.Minute, func(st int, _ string) bool { return st == http.StatusFound })
		if err != nil || status != http.StatusFound || loc != c.url {
			t.Errorf("edge %s: %d %q %v; want 302 to %s", c.code, status, loc, err, c.url)
		}
	}
	// Every control has an accessible name and no page has an inline
	// script, on the form, the list and the job's page.
	for _, page := range []string{"/console/imports", strings.TrimPrefix(jobURL, s.controlURL)} {
		b.do(t, "open "+page, chromedp.Navigate(s.controlURL+page), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if bad := run(t, b, "unnamed controls", chromedp.Evaluate[[]string](unnamedControls)); len(bad) > 0 {
			t.Errorf("%s has controls without an accessible name: %v", page, bad)
		}
		if n := run(t, b, "inline scripts", chromedp.Evaluate[int](`document.querySelectorAll("script:not([src])").length`)); n != 0 {
			t.Errorf("%s has %d inline scripts", page, n)
		}
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// TestBulkUploadWithoutJavaScript: with scripts off the upload is a plain
// form post, a refused file comes back with the reason, and the job's
// page refreshes itself (meta refresh) until it shows the summary.
func TestBulkUploadWithoutJavaScript(t *testing.T) {
	b := newBrowser(t)
	b.noScript(t)
	s := startStack(t)
	dir := t.TempDir()
	notAnExport := filepath.Join(dir, "notes.csv")
	if err := os.WriteFile(notAnExport, []byte("name,colour\nfoo,blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.signIn(t, s.controlURL, s.key)
	b.do(t, "upload a file that is no export",
		chromedp.Navigate(s.controlURL+"/console/imports"),
		chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.SendKeys(chromedp.ID("default_domains"), "s.test"),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{notAnExport}),
		chromedp.Submit(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.ID("upload-problem")),
	)
	if got := b.text(t, "#upload-problem"); !strings.Contains(got, "choose the file's format") {
		t.Errorf("the refusal says %q", got)
	}
	if got := run(t, b, "the field kept", chromedp.Value(chromedp.ID("default_domains"))); got != "s.test" {
		t.Errorf("the export's domain field came back %q; want it as typed", got)
	}
	var rows strings.Builder
	rows.WriteString("keyword,url\n")
	for i := range 300 {
		fmt.Fprintf(&rows, "nojs-%04d,https://example.com/nojs/%d\n", i, i)
	}
	small := filepath.Join(dir, "small.csv")
	if err := os.WriteFile(small, []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another instance holds one of the tenant's jobs for 10 s (a tenant
	// runs one at a time), so the new one is seen waiting first.
	holdTenant(t, s, 10*time.Second)
	b.do(t, "upload",
		chromedp.Navigate(s.controlURL+"/console/imports"),
		chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{small}),
		chromedp.Submit(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.ID("job-state")),
	)
	if got := b.text(t, "#job-state"); got != "waiting to start" {
		t.Fatalf("the new job is %q; want waiting to start behind the held one", got)
	}
	// No script polls: only the page's own refresh brings the summary.
	b.do(t, "wait for the summary", chromedp.WaitVisible(chromedp.ID("job-summary")))
	if got := b.text(t, "#sum-kept"); got != "300" {
		t.Errorf("kept %q; want 300", got)
	}
	status, loc, err := stack.FollowUntil(s.edgeURL, "nojs-0299", time.Minute, func(st int, _ string) bool { return st == http.StatusFound })
	if err != nil || status != http.StatusFound || loc != "https://example.com/nojs/299" {
		t.Errorf("edge: %d %q %v", status, loc, err)
	}
	b.do(t, "the job in the list",
		chromedp.Navigate(s.controlURL+"/console/imports"),
		chromedp.WaitVisible(chromedp.CSS("table.imports")),
	)
	if got := b.text(t, "table.imports tbody tr"); !strings.Contains(got, "small.csv") || !strings.Contains(got, "done") {
		t.Errorf("the list's row: %q", got)
	}
}

// bulkScreens makes what the bulk screenshots show and returns the paths
// of a finished import (uploaded in the browser: a Shlink export with a
// few rows refused) and of one running (a job row another instance holds,
// half way: a real one would be done before the picture is taken).
func bulkScreens(t *testing.T, b *browser, s *env) (done, running string) {
	t.Helper()
	var rows strings.Builder
	rows.WriteString("createdAt,title,shortUrl,domain,shortCode,longUrl,tags,visits\n")
	for i := range 8 {
		fmt.Fprintf(&rows, "2026-11-%02dT10:00:00+00:00,Spring launch %d,https://s.test/spring-%02d,s.test,spring-%02d,https://shop.example.com/spring/%d,campaign|spring,%d\n", i%28+1, i, i, i, i, i*7)
	}
	rows.WriteString("2026-11-30T10:00:00+00:00,Old FTP mirror,https://s.test/mirror,s.test,mirror,ftp://files.example.com/pub,,0\n")
	rows.WriteString("2026-11-30T10:00:00+00:00,Spring launch 1,https://s.test/spring-01,s.test,spring-01,https://shop.example.com/spring/1,,0\n")
	file := filepath.Join(t.TempDir(), "shlink-export.csv")
	if err := os.WriteFile(file, []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	b.do(t, "upload an export",
		chromedp.Navigate(s.controlURL+"/console/imports"),
		chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.SendKeys(chromedp.ID("default_domains"), "s.test"),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{file}),
		chromedp.Submit(chromedp.ID("upload")),
		chromedp.WaitVisible(chromedp.ID("job-summary")),
	)
	done = strings.TrimPrefix(run(t, b, "location", chromedp.Location()), s.controlURL)
	id, err := heldJob(t.Context(), s, "screenshot", time.Hour)
	if err != nil {
		t.Fatalf("a running job: %v", err)
	}
	return done, "/console/imports/" + id
}

// holdTenant makes a job of s's tenant that another control instance
// holds for d (a row with its lease): the tenant's next import waits that
// long. Once the lease has run out the stack's control takes it over and
// fails it (its file is no export).
func holdTenant(t *testing.T, s *env, d time.Duration) {
	t.Helper()
	if _, err := heldJob(t.Context(), s, "elsewhere", d); err != nil {
		t.Fatalf("hold the tenant: %v", err)
	}
}

// heldJob is the id of a job of s's tenant that the instance owner holds
// for d, half way through a Bitly export, made unless owner holds one
// already.
func heldJob(ctx context.Context, s *env, owner string, d time.Duration) (string, error) {
	pool := s.pg.Pool()
	if _, err := pool.Exec(ctx, `
		INSERT INTO import_jobs (tenant_id, key_id, file_name, file_size, file, digest, batch_size, format, state, lease_owner, lease_until,
			started_at, detected_format, bytes_read, rows_read, rows_done, imported, rejected)
		SELECT $1, k.id, 'bitly-2026-export.csv', 2400000, '\x00'::bytea, repeat('0', 64), 200, 'auto', 'running', $2, now() + $3::interval,
			now(), 'bitly', 1090000, 11600, 11400, 11371, 29
		FROM api_keys k WHERE k.tenant_id = $1
		  AND NOT EXISTS (SELECT 1 FROM import_jobs WHERE tenant_id = $1 AND lease_owner = $2)
		ORDER BY k.id LIMIT 1`, s.tenant, owner, d); err != nil {
		return "", err
	}
	var id string
	err := pool.QueryRow(ctx, `SELECT id::text FROM import_jobs WHERE tenant_id = $1 AND lease_owner = $2`, s.tenant, owner).Scan(&id)
	return id, err
}

// bulkTestdata is the absolute path of a file of testdata/bulk.
func bulkTestdata(name string) string {
	p, err := filepath.Abs(filepath.Join("testdata", "bulk", name))
	if err != nil {
		panic(err) // the working directory is gone
	}
	return p
}

// The bulk screens' steps for the accessibility check (a11yScreens):
// the upload form refusing a file that is no export, an import done
// (uploaded once, then opened from the list), and one running (held by
// another instance).

func bulkRefusedSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(s.controlURL + "/console/imports"), chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{bulkTestdata("notes.csv")}), chromedp.Submit(chromedp.ID("upload")),
	}
}

func bulkDoneSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(s.controlURL + "/console/imports"), chromedp.WaitVisible(chromedp.ID("upload")),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			done, err := chromedp.Evaluate[bool](`document.querySelector("table.imports .state-done") !== null`)(ctx, tg)
			if err != nil {
				return err
			}
			if done {
				_, err = chromedp.Click(chromedp.CSS("table.imports tr:has(.state-done) a"))(ctx, tg)
				return err
			}
			if _, err := chromedp.SetUploadFiles(chromedp.ID("file"), []string{bulkTestdata("export.csv")})(ctx, tg); err != nil {
				return err
			}
			_, err = chromedp.Submit(chromedp.ID("upload"))(ctx, tg)
			return err
		}),
	}
}

func bulkRunningSteps(s *env) []chromedp.Action[chromedp.Void] {
	return []chromedp.Action[chromedp.Void]{
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			id, err := heldJob(ctx, s, "a11y", time.Hour)
			if err != nil {
				return err
			}
			_, err = chromedp.Navigate(s.controlURL+"/console/imports/"+id)(ctx, tg)
			return err
		}),
	}
}
