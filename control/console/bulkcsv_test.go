package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/console"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/internal/poll"
)

// TestBulkUploadPlainCSV: a plain CSV of 1,000 rows (url, code, title,
// tags, redirect_type, expires_at, max_clicks and a column the format
// does not read) uploaded with the format told from the file goes
// through: every row a link with its cells, the unread column named once
// on the job's page.
func TestBulkUploadPlainCSV(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, true)
	b := e.browser("10.0.9.21")
	token := b.signInToImports(t, e.key)
	var file strings.Builder
	file.WriteString("URL,Code,Title,Tags,Redirect Type,Expires At,Max Clicks,Notes\n")
	for i := range 1000 {
		rt, exp, limit := "", "", ""
		if i%2 == 0 {
			rt, exp, limit = "301", "2031-06-01T12:00:00Z", fmt.Sprint(i+1)
		}
		fmt.Fprintf(&file, "https://example.com/p/%d,plain-%04d,Row %d,batch|n%d,%s,%s,%s,internal note %d\n", i, i, i, i%3, rt, exp, limit, i)
	}
	w := b.upload(t, [][2]string{{"csrf", token}, {"format", "auto"}, {"domain", ""}, {"redirect", "307"}, {"default_domains", ""}}, "mine.csv", []byte(file.String()))
	id := jobOf(t, w)
	var j importjobs.Job
	poll.Until(t, "the job done", 2*time.Minute, func() bool {
		var err error
		j, err = store.Job(context.Background(), e.tenant, id)
		return err == nil && j.State.Finished()
	})
	if j.State != importjobs.Done || j.Counts.Rows != 1000 || j.Counts.Kept != 1000 || j.DetectedFormat != importer.CSV {
		t.Fatalf("job %+v; want done, 1,000 rows kept, told to be csv", j)
	}
	for _, tc := range []struct {
		code    string
		rt      int
		expires string
		limit   int64
	}{
		{"plain-0000", 301, "2031-06-01T12:00:00Z", 1},
		{"plain-0001", 307, "", 0},
		{"plain-0998", 301, "2031-06-01T12:00:00Z", 999},
		{"plain-0999", 307, "", 0},
	} {
		l, err := e.svc.Get(context.Background(), e.tenant, "", tc.code)
		if err != nil {
			t.Fatalf("%s: %v", tc.code, err)
		}
		exp := ""
		if !l.ExpiresAt.IsZero() {
			exp = l.ExpiresAt.UTC().Format(time.RFC3339)
		}
		if int(l.RedirectType) != tc.rt || exp != tc.expires || l.Extras.MaxClicks != tc.limit || !strings.HasPrefix(l.Title, "Row ") || len(l.Tags) != 2 {
			t.Errorf("%s: redirect %d, expires %q, max clicks %d, title %q, tags %q; want %d, %q, %d",
				tc.code, l.RedirectType, exp, l.Extras.MaxClicks, l.Title, l.Tags, tc.rt, tc.expires, tc.limit)
		}
	}
	page := b.do("GET", "/console/imports/"+id, nil).Body.String()
	for _, s := range []string{"a CSV of your own (told from the file)", `id="sum-kept">1,000<`, "Columns not read (the csv format has no such column): Notes."} {
		if !strings.Contains(page, s) {
			t.Errorf("the job page lacks %q:\n%s", s, page)
		}
	}
	if n := strings.Count(page, "Notes"); n != 1 {
		t.Errorf("the unread column is named %d times; want once", n)
	}
}

// TestBulkUploadPlainCSVRefusals: a plain CSV with a password column, one
// without a url column, and the csv format asked for by name are refused
// on the form with the reason and nothing queued.
func TestBulkUploadPlainCSVRefusals(t *testing.T) {
	e, store := newBulkEnv(t, console.Config{}, false)
	b := e.browser("10.0.9.22")
	token := b.signInToImports(t, e.key)
	for _, tc := range []struct {
		name, format, file, want string
	}{
		{"password column", "auto", "url,code,password\nhttps://example.com/,abc-1,hunter22\n", "does not read passwords"},
		{"no url column", "auto", "code,target\nabc-1,https://example.com/\n", "a url column"},
		{"csv by name", "csv", "url\nhttps://example.com/\n", "told from its header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := b.upload(t, [][2]string{{"csrf", token}, {"format", tc.format}, {"domain", ""}, {"redirect", "302"}, {"default_domains", ""}}, "f.csv", []byte(tc.file))
			body := w.Body.String()
			if w.Code != http.StatusBadRequest || !strings.Contains(body, tc.want) || !strings.Contains(body, `id="upload-problem"`) {
				t.Errorf("answered %d; want 400 saying %q\n%.3000s", w.Code, tc.want, body)
			}
			if strings.Contains(body, "hunter22") {
				t.Error("the refusal repeats a password from the file")
			}
		})
	}
	if n := jobCount(t, store, e.tenant); n != 0 {
		t.Errorf("%d jobs queued; want none", n)
	}
}
