package console_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	jobstore "github.com/edgelink/edgelink/control/importjobs/pgstore"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/internal/poll"
)

// lateImports is the console's Imports, bound once the test's database
// (made with the console) exists.
type lateImports struct{ console.Imports }

// bulkEnv is the console with bulk uploads: a job store on the env's
// database and, when run is set, a runner importing through the links
// service, stopped when the test ends.
func newBulkEnv(t *testing.T, cfg console.Config, run bool) (*env, *jobstore.Store) {
	t.Helper()
	li := &lateImports{}
	cfg.Imports = li
	e := newEnv(t, cfg)
	store := jobstore.New(e.store.Pool())
	q := importjobs.Queue{Store: store}
	if run {
		short, err := links.NewShortURLs("http://sho.rt")
		if err != nil {
			t.Fatal(err)
		}
		q.Runner = importjobs.NewRunner(store, e.svc, short, importjobs.Config{Poll: 50 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); q.Runner.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	li.Imports = q
	return e, store
}

// upload posts the upload form as a browser does: multipart, the fields
// in order, then the file (when name is not empty or data is set).
func (b *browser) upload(t *testing.T, fields [][2]string, name string, data []byte) *httptest.ResponseRecorder {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if name != "" || data != nil {
		fw, err := mw.CreateFormFile("file", name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.raw("POST", "/console/imports", mw.FormDataContentType(), body.Bytes())
}

// raw sends a request with a body of its own, with b's cookies.
func (b *browser) raw(method, path, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.RemoteAddr = b.from + ":4711"
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.e.h.ServeHTTP(w, r)
	return w
}

// signInToImports signs b in with key and returns the session's CSRF
// token, read from the bulk upload page.
func (b *browser) signInToImports(t *testing.T, key string) string {
	t.Helper()
	w := b.do("GET", "/console/sign-in", nil)
	w = b.do("POST", "/console/sign-in", url.Values{"csrf": {csrf(t, w)}, "key": {key}})
	wantRedirect(t, w, "/console/links")
	w = b.do("GET", "/console/imports", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("bulk upload page after sign-in: %d\n%.2000s", w.Code, w.Body.String())
	}
	return csrf(t, w)
}

var regexpJob = regexp.MustCompile(`^/console/imports/([0-9a-f-]{36})$`)

// jobOf is the job id a 303 after an upload names.
func jobOf(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	m := regexpJob.FindStringSubmatch(w.Header().Get("Location"))
	if w.Code != http.StatusSeeOther || m == nil {
		t.Fatalf("upload answered %d, Location %q; want 303 to a job\n%.2000s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	return m[1]
}

// hostileExport has a row of each thing a page or a spreadsheet must not
// run: a script in a title and in a rejected code, a formula as a code.
const hostileExport = "keyword,url,title\n" +
	"bulk-0001,https://example.com/1,<script>alert(1)</script>\n" +
	"=cmd|' /C calc'!A0,https://example.com/formula,\"=HYPERLINK(\"\"http://evil\"\")\"\n" +
	"<script>alert(2)</script>,ftp://example.com/bad,t\n" +
	"bulk-0001,https://example.com/1,again\n"

// TestBulkUploadRunsAndShowsItsOutcome: an upload becomes a job of the
// session's tenant, which runs to its end; its page shows the counts, the
// first rejects (hostile values as text), and the files download with
// formula cells guarded.
func TestBulkUploadRunsAndShowsItsOutcome(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, true)
	b := e.browser("10.0.9.1")
	token := b.signInToImports(t, e.key)
	page := b.do("GET", "/console/imports", nil)
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `enctype="multipart/form-data"`) || !strings.Contains(page.Body.String(), `href="/console/imports"`) {
		t.Fatalf("the upload page: %d\n%.2000s", page.Code, page.Body.String())
	}
	w := b.upload(t, [][2]string{{"csrf", token}, {"format", "auto"}, {"domain", ""}, {"redirect", "307"}, {"default_domains", ""}}, "links.csv", []byte(hostileExport))
	id := jobOf(t, w)
	var j importjobs.Job
	poll.Until(t, "the job done", time.Minute, func() bool {
		var err error
		j, err = store.Job(context.Background(), e.tenant, id)
		return err == nil && j.State.Finished()
	})
	want := importjobs.Counts{Rows: 4, Kept: 1, Recoded: 1, Duplicates: 1, Rejected: 1, Chunks: 1}
	if j.State != importjobs.Done || j.Counts != want || j.RedirectType != 307 || j.KeyID == 0 || j.FileName != "links.csv" {
		t.Fatalf("job %+v; want done with %+v", j, want)
	}
	l, err := e.svc.Get(context.Background(), e.tenant, "", "bulk-0001")
	if err != nil || l.RedirectType != 307 {
		t.Fatalf("imported link: %+v, %v", l, err)
	}
	body := b.do("GET", "/console/imports/"+id, nil).Body.String()
	for _, s := range []string{`id="sum-kept">1<`, `id="sum-recoded">1<`, `id="sum-duplicates">1<`, `id="sum-rejected">1<`, `id="mapping-link"`, `id="rejects-link"`,
		"&lt;script&gt;alert(2)&lt;/script&gt;", "YOURLS (told from the file)"} {
		if !strings.Contains(body, s) {
			t.Errorf("the job page lacks %s:\n%s", s, body)
		}
	}
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "http-equiv") || strings.Contains(body, "hx-trigger") {
		t.Errorf("the finished job's page runs a script or refreshes itself:\n%s", body)
	}
	hx := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/console/imports/"+id, nil)
	r.Header.Set("HX-Request", "true")
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	e.h.ServeHTTP(hx, r)
	if hx.Code != 286 || strings.Contains(hx.Body.String(), "<html") || !strings.Contains(hx.Body.String(), `id="job-summary"`) {
		t.Errorf("htmx's poll of a finished job: %d\n%s; want 286 and the status block alone", hx.Code, hx.Body.String())
	}

	mw := b.do("GET", "/console/imports/"+id+"/mapping.csv", nil)
	if mw.Code != http.StatusOK || !strings.HasPrefix(mw.Header().Get("Content-Type"), "text/csv") ||
		mw.Header().Get("Content-Disposition") != `attachment; filename="import-`+id[:8]+`-mapping.csv"` {
		t.Fatalf("mapping download: %d %v", mw.Code, mw.Header())
	}
	recs, err := csv.NewReader(mw.Body).ReadAll()
	if err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != strings.Join(importer.MappingHeader, ",") {
		t.Fatalf("mapping %q, %v", recs, err)
	}
	if recs[1][0] != "bulk-0001" || recs[1][1] != "bulk-0001" || recs[2][0] != "'=cmd|' /C calc'!A0" || recs[2][2] != "recoded" {
		t.Errorf("mapping rows %q; want the kept code, then the formula code guarded with a quote", recs[1:])
	}
	rw := b.do("GET", "/console/imports/"+id+"/rejects.csv", nil)
	recs, err = csv.NewReader(rw.Body).ReadAll()
	if rw.Code != http.StatusOK || err != nil || len(recs) != 3 || recs[1][1] != "<script>alert(2)</script>" || recs[2][2] != "duplicate" {
		t.Errorf("rejects %d %q %v", rw.Code, recs, err)
	}
	list := b.do("GET", "/console/imports", nil).Body.String()
	if !strings.Contains(list, `href="/console/imports/`+id+`"`) || !strings.Contains(list, ">done<") {
		t.Errorf("the recent imports do not list the job:\n%s", list)
	}
}

// TestBulkJobPageWhileWaiting: a job not finished refreshes itself, with
// htmx (polling its status block) and without (a meta refresh inside
// noscript, and a reload link), and htmx's poll answers 200 until it is.
func TestBulkJobPageWhileWaiting(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, false)
	b := e.browser("10.0.9.2")
	b.signInToImports(t, e.key)
	var keyID int64
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT id FROM api_keys WHERE tenant_id = $1`, e.tenant).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	j, err := store.Create(context.Background(), importjobs.NewJob{TenantID: e.tenant, KeyID: keyID, FileName: "wait.csv", File: []byte("keyword,url\nab-12,https://example.com/\n"),
		Options: importjobs.Options{Format: importer.Auto}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	body := b.do("GET", "/console/imports/"+j.ID, nil).Body.String()
	for _, s := range []string{`<noscript><meta http-equiv="refresh" content="2"></noscript>`, `hx-get="/console/imports/` + j.ID + `"`, `hx-trigger="every 1s"`,
		`id="job-reload"`, `id="job-progress"`, "waiting to start"} {
		if !strings.Contains(body, s) {
			t.Errorf("the waiting job's page lacks %s:\n%s", s, body)
		}
	}
	r := httptest.NewRequest("GET", "/console/imports/"+j.ID, nil)
	r.Header.Set("HX-Request", "true")
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	hx := httptest.NewRecorder()
	e.h.ServeHTTP(hx, r)
	if hx.Code != http.StatusOK || !strings.Contains(hx.Body.String(), `id="job-counts"`) || strings.Contains(hx.Body.String(), "<html") {
		t.Errorf("htmx's poll of a waiting job: %d\n%s", hx.Code, hx.Body.String())
	}
	if w := b.do("GET", "/console/imports/"+j.ID+"/mapping.csv", nil); w.Code != http.StatusNotFound {
		t.Errorf("the mapping of a waiting job: %d; want 404", w.Code)
	}
}

// jobCount is how many jobs the tenant has.
func jobCount(t *testing.T, store *jobstore.Store, tenant int64) int {
	t.Helper()
	js, err := store.Jobs(context.Background(), tenant, 100)
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// TestBulkUploadRefusals: a bad upload is refused with its reason and the
// form as typed (all but the file), and nothing is queued.
func TestBulkUploadRefusals(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{MaxUploadBytes: 2 << 10, MaxActiveImports: 1}, false)
	e.addDomain(t, e.tenant, "go.acme.test")
	b := e.browser("10.0.9.3")
	token := b.signInToImports(t, e.key)
	good := []byte("keyword,url\nab-12,https://example.com/\n")
	form := func(kv ...string) [][2]string {
		f := [][2]string{{"csrf", token}, {"format", "shlink"}, {"domain", "go.acme.test"}, {"redirect", "301"}, {"default_domains", "s.test"}}
		for i := 0; i+1 < len(kv); i += 2 {
			for j := range f {
				if f[j][0] == kv[i] {
					f[j][1] = kv[i+1]
				}
			}
		}
		return f
	}
	for _, c := range []struct {
		name   string
		fields [][2]string
		file   string
		data   []byte
		status int
		says   string
	}{
		{"no file", form(), "", nil, http.StatusBadRequest, "Choose a file to upload."},
		{"empty", form(), "e.csv", []byte{}, http.StatusBadRequest, "The file is empty"},
		{"blank", form(), "e.csv", []byte(" \n\r\n\t"), http.StatusBadRequest, "The file is empty"},
		{"oversized", form(), "big.csv", bytes.Repeat([]byte("a"), 2<<10+1), http.StatusRequestEntityTooLarge, "larger than 2.0 KiB"},
		{"wrong format", form(), "y.csv", good, http.StatusBadRequest, "a Shlink export needs longUrl and shortCode"},
		{"unknown columns", form("format", "auto"), "notes.csv", []byte("name,colour\nfoo,blue\n"), http.StatusBadRequest, "choose the file&#39;s format"},
		{"utf-16", form("format", "auto"), "u.csv", []byte{0xFF, 0xFE, 'k', 0, 'e', 0}, http.StatusBadRequest, "This file cannot be imported"},
		{"binary", form("format", "auto"), "x.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), http.StatusBadRequest, "This file cannot be imported"},
		{"bad format field", form("format", "excel"), "y.csv", good, http.StatusBadRequest, "The format must be"},
		{"bad redirect", form("format", "auto", "redirect", "303"), "y.csv", good, http.StatusBadRequest, "Redirect type must be"},
		{"another's domain", form("format", "auto", "domain", "evil.test"), "y.csv", good, http.StatusBadRequest, "not one of this tenant"},
		{"hostile domain", form("format", "auto", "domain", `"><script>alert(1)</script>`), "y.csv", good, http.StatusBadRequest, "not one of this tenant"},
		{"bad default domain", form("format", "auto", "default_domains", "not a host!"), "y.csv", good, http.StatusBadRequest, "is not a host name"},
	} {
		w := b.upload(t, c.fields, c.file, c.data)
		body := w.Body.String()
		if w.Code != c.status || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d; want %d saying %q\n%.3000s", c.name, w.Code, c.status, c.says, body)
			continue
		}
		// The form comes back as typed.
		typed := map[string]string{}
		for _, f := range c.fields {
			typed[f[0]] = f[1]
		}
		kept := []string{`id="default_domains" name="default_domains" type="text" value="` + typed["default_domains"] + `"`}
		if typed["format"] == "shlink" {
			kept = append(kept, `<option value="shlink" selected>`)
		}
		if typed["redirect"] == "301" {
			kept = append(kept, `<option value="301" selected>`)
		}
		for _, k := range kept {
			if !strings.Contains(body, k) {
				t.Errorf("%s: the form lost %s", c.name, k)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s: a value is written unescaped", c.name)
		}
	}
	if n := jobCount(t, store, e.tenant); n != 0 {
		t.Fatalf("%d jobs after refused uploads; want none", n)
	}

	// Without the session's CSRF token, or with another, nothing is read
	// into a job.
	for name, fields := range map[string][][2]string{"missing": {{"format", "auto"}}, "wrong": {{"csrf", "x" + token}, {"format", "auto"}}} {
		if w := b.upload(t, fields, "y.csv", good); w.Code != http.StatusForbidden {
			t.Errorf("CSRF %s: %d; want 403", name, w.Code)
		}
	}
	// Not a multipart form, a body over every bound, a form of too many
	// parts.
	if w := b.do("POST", "/console/imports", url.Values{"csrf": {token}, "format": {"auto"}}); w.Code != http.StatusBadRequest {
		t.Errorf("a urlencoded post: %d; want 400", w.Code)
	}
	huge := b.upload(t, [][2]string{{"csrf", token}, {"note", strings.Repeat("n", 100<<10)}}, "y.csv", good)
	if huge.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body past the bound: %d; want 413", huge.Code)
	}
	var many [][2]string
	for i := range 20 {
		many = append(many, [2]string{fmt.Sprintf("f%d", i), "x"})
	}
	if w := b.upload(t, append([][2]string{{"csrf", token}}, many...), "y.csv", good); w.Code != http.StatusBadRequest {
		t.Errorf("a form of too many parts: %d; want 400", w.Code)
	}
	if n := jobCount(t, store, e.tenant); n != 0 {
		t.Fatalf("%d jobs after forged or malformed posts; want none", n)
	}

	// A hostile file name is kept as text; past the tenant's bound of
	// active imports, the next upload waits.
	w := b.upload(t, form("format", "auto", "domain", "", "default_domains", ""), `"><img src=x onerror=alert(3)>.csv`, good)
	id := jobOf(t, w)
	list := b.do("GET", "/console/imports", nil).Body.String()
	if strings.Contains(list, "<img") || !strings.Contains(list, "&#34;&gt;&lt;img src=x onerror=alert(3)&gt;.csv") {
		t.Errorf("the hostile file name is not shown as text:\n%s", list)
	}
	w = b.upload(t, form("format", "auto", "domain", ""), "second.csv", good)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "1 imports waiting or running") || w.Header().Get("Retry-After") == "" {
		t.Errorf("past the bound: %d\n%.2000s", w.Code, w.Body.String())
	}
	if n := jobCount(t, store, e.tenant); n != 1 {
		t.Errorf("%d jobs; want the one, %s", n, id)
	}
}

// TestBulkJobsAreTheTenantsOnly: another tenant's job, its files and its
// htmx block are 404 with nothing of it shown; a signed-out browser or a
// revoked key reads nothing.
func TestBulkJobsAreTheTenantsOnly(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, true)
	owner := e.browser("10.0.9.4")
	token := owner.signInToImports(t, e.key)
	id := jobOf(t, owner.upload(t, [][2]string{{"csrf", token}, {"format", "auto"}}, "secret-plans.csv", []byte("keyword,url\nsecret-1,https://secret.example/\n")))
	poll.Until(t, "the job done", time.Minute, func() bool {
		j, err := store.Job(context.Background(), e.tenant, id)
		return err == nil && j.State == importjobs.Done
	})
	_, rivalKey, err := e.store.CreateTenantWithKey(context.Background(), "rival")
	if err != nil {
		t.Fatal(err)
	}
	rival := e.browser("10.0.9.5")
	rival.signInToImports(t, rivalKey)
	for _, path := range []string{"/console/imports/" + id, "/console/imports/" + id + "/mapping.csv", "/console/imports/" + id + "/rejects.csv",
		"/console/imports/not-a-job", "/console/imports/00000000-0000-0000-0000-000000000000", "/console/imports/" + id + "x"} {
		w := rival.do("GET", path, nil)
		if w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "secret") {
			t.Errorf("rival GET %s: %d; want 404 and nothing of the job\n%.1000s", path, w.Code, w.Body.String())
		}
	}
	if list := rival.do("GET", "/console/imports", nil).Body.String(); strings.Contains(list, id) || strings.Contains(list, "secret-plans") {
		t.Errorf("the rival's list shows the owner's job")
	}
	// Signed out: every page and post goes to sign-in, reading nothing.
	anon := e.browser("10.0.9.6")
	for _, path := range []string{"/console/imports", "/console/imports/" + id, "/console/imports/" + id + "/mapping.csv"} {
		wantRedirect(t, anon.do("GET", path, nil), "/console/sign-in")
	}
	wantRedirect(t, anon.upload(t, [][2]string{{"format", "auto"}}, "y.csv", []byte("keyword,url\nab-12,https://example.com/\n")), "/console/sign-in")
	// The owner's key revoked: its session reads nothing more.
	if _, err := e.store.Pool().Exec(context.Background(), `UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1`, e.tenant); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, owner.do("GET", "/console/imports/"+id+"/mapping.csv", nil), "/console/sign-in")
	wantRedirect(t, owner.upload(t, [][2]string{{"csrf", token}, {"format", "auto"}}, "y.csv", []byte("keyword,url\nab-13,https://example.com/\n")), "/console/sign-in")
	if n := jobCount(t, store, e.tenant); n != 1 {
		t.Errorf("%d jobs; want the first alone", n)
	}
}

// TestBulkUploadOntoADomain: with domains of its own the tenant chooses
// where rows without a domain go; the job's links are made there.
func TestBulkUploadOntoADomain(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, true)
	e.addDomain(t, e.tenant, "go.acme.test")
	b := e.browser("10.0.9.7")
	token := b.signInToImports(t, e.key)
	if page := b.do("GET", "/console/imports", nil).Body.String(); !strings.Contains(page, `<option value="go.acme.test">go.acme.test</option>`) {
		t.Fatalf("the upload form does not offer the domain:\n%s", page)
	}
	id := jobOf(t, b.upload(t, [][2]string{{"csrf", token}, {"format", "shlink"}, {"domain", "GO.acme.test"}, {"default_domains", "s.test"}}, "shlink.csv",
		[]byte("shortCode,longUrl,domain\ndom-1,https://example.com/1,s.test\ndom-2,https://example.com/2,\n")))
	var j importjobs.Job
	poll.Until(t, "the job done", time.Minute, func() bool {
		var err error
		j, err = store.Job(context.Background(), e.tenant, id)
		return err == nil && j.State == importjobs.Done
	})
	if j.Domain != "go.acme.test" || j.Counts.Kept != 2 {
		t.Fatalf("job %+v", j)
	}
	for _, code := range []string{"dom-1", "dom-2"} {
		if _, err := e.svc.Get(context.Background(), e.tenant, "go.acme.test", code); err != nil {
			t.Errorf("%s on go.acme.test: %v", code, err)
		}
	}
}
