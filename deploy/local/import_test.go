package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/shared/base62"
)

// exportFile is a generated export and what importing it must give.
type exportFile struct {
	name    string
	body    string
	rows    int
	kept    int // rows whose code must be kept
	recoded int // rows whose code cannot be kept (a new one is given)
	bad     int // malformed rows, rejected
}

// genYOURLS writes n YOURLS rows: mostly custom codes that fit (kept), every
// 50th a 6-character base62 code (left to the generator: re-coded), every
// 97th a code too short for the namespace (re-coded), every 1000th a
// malformed row (rejected).
func genYOURLS(n int) exportFile {
	var b strings.Builder
	b.WriteString("\ufeffkeyword,url,title,timestamp,ip,clicks\r\n")
	f := exportFile{name: "yourls.csv", rows: n}
	for i := 1; i <= n; i++ {
		code := fmt.Sprintf("yl-%d", i)
		url := fmt.Sprintf("https://example.com/p/%d?src=import&n=%d", i, i)
		switch {
		case i%1000 == 1:
			fmt.Fprintf(&b, "\"bad-%d\"x,%s,t,2020-01-01 00:00:00,::1,0\r\n", i, url)
			f.bad++
			continue
		case i%50 == 0:
			c, _ := base62.Encode(uint64(900_000_000 + i))
			code = c
			f.recoded++
		case i%97 == 0:
			c, _ := base62.Encode(uint64(i))
			code = c[3:] // 3 characters: too short for a custom code
			f.recoded++
		default:
			f.kept++
		}
		fmt.Fprintf(&b, "%s,%s,\"Title %d, with a comma\",2020-01-01 00:00:00,127.0.0.1,%d\r\n", code, url, i, i%7)
	}
	f.body = b.String()
	return f
}

func genBitlyJSON(n int) exportFile {
	var b strings.Builder
	b.WriteString(`{"links": [`)
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"created_at": "2023-01-01T00:00:00+0000", "id": "bit.ly/bj-%d", "link": "https://bit.ly/bj-%d", "long_url": "https://example.org/bitly/%d", "title": "t", "tags": []}`, i, i, i)
	}
	b.WriteString(`], "pagination": {"next": ""}}`)
	return exportFile{name: "bitly.json", body: b.String(), rows: n, kept: n}
}

func genShlinkCSV(n int) exportFile {
	var b strings.Builder
	b.WriteString("createdAt,title,shortUrl,domain,shortCode,longUrl,tags,visits\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "2024-01-01T00:00:00+00:00,,https://s.test/sh-%d,,sh-%d,https://example.net/shlink/%d,a|b,%d\n", i, i, i, i)
	}
	return exportFile{name: "shlink.csv", body: b.String(), rows: n, kept: n}
}

// TestImportThenEveryLinkRedirects imports generated Bitly, YOURLS and
// Shlink exports through the batch API into the whole local stack (real
// allocator, PostgreSQL, JetStream, edge), then follows every imported link
// on the edge: each answers 302 to its target under its kept or new code,
// and the database holds exactly one link per imported row. Running the
// same imports again replays every batch and creates nothing.
//
// 100,000 YOURLS rows with EDGELINK_GATE=1 (about 2 minutes on 2 shared
// cores); 10,000 otherwise, to keep `go tool task test` short.
func TestImportThenEveryLinkRedirects(t *testing.T) {
	n := 10_000
	if os.Getenv("EDGELINK_GATE") == "1" {
		n = 100_000
	}
	r, edge := startEdgeStack(t, "", nil)
	client, err := apiclient.New(r.ControlURL, r.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := []exportFile{genYOURLS(n), genBitlyJSON(1000), genShlinkCSV(1000)}
	ctx := context.Background()

	importAll := func() []*importer.Summary {
		var out []*importer.Summary
		for _, f := range files {
			path := filepath.Join(dir, f.name)
			if err := os.WriteFile(path, []byte(f.body), 0o644); err != nil {
				t.Fatal(err)
			}
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := importer.NewReader(fh, importer.Auto)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			s, err := importer.Run(ctx, rd, client, importer.Options{Digest: digestOf(f.body), Concurrency: 4})
			fh.Close()
			if err != nil {
				t.Fatalf("import %s: %v", f.name, err)
			}
			t.Logf("%s: %d rows in %s: kept %d, re-coded %d, rejected %d, %d batches (%d replayed)",
				f.name, s.Rows, time.Since(start).Round(time.Millisecond), s.Kept, s.Recoded, s.Rejected, s.Chunks, s.Replayed)
			if s.Rows != f.rows || s.Kept != f.kept || s.Recoded != f.recoded || s.Rejected != f.bad || s.Existing != 0 || s.Dups != 0 {
				t.Fatalf("%s: %d rows, kept %d, re-coded %d, rejected %d; want %d, %d, %d, %d",
					f.name, s.Rows, s.Kept, s.Recoded, s.Rejected, f.rows, f.kept, f.recoded, f.bad)
			}
			out = append(out, s)
		}
		return out
	}
	sums := importAll()

	pool := dbPool(t, r)
	var want, links int
	for _, s := range sums {
		want += s.Imported()
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM links`).Scan(&links); err != nil {
		t.Fatal(err)
	}
	if links != want {
		t.Fatalf("the database holds %d links; %d rows were imported", links, want)
	}

	// Let the edge apply every change, then follow every link on it.
	var top int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM links`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, edge, "imported links", func() bool { return int64(edge.Feed.Position().Version) >= top })

	type check struct{ code, url string }
	var todo []check
	for _, s := range sums {
		for _, o := range s.Outcomes {
			if o.NewCode != "" {
				if o.Kind == importer.Kept && o.NewCode != o.OldCode {
					t.Fatalf("line %d: kept code %q became %q", o.Line, o.OldCode, o.NewCode)
				}
				todo = append(todo, check{o.NewCode, o.URL})
			}
		}
	}
	if len(todo) != want {
		t.Fatalf("%d codes to follow; %d imported", len(todo), want)
	}
	hc := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	start := time.Now()
	var next, followed atomic.Int64
	var mu sync.Mutex
	var wrong []string
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				c := todo[i]
				resp, err := hc.Get(r.EdgeURL + "/" + c.code)
				if err != nil {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %v", c.code, err))
					mu.Unlock()
					continue
				}
				resp.Body.Close()
				if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != c.url {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %d %q, want 302 %q", c.code, resp.StatusCode, loc, c.url))
					mu.Unlock()
					continue
				}
				followed.Add(1)
			}
		}()
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d of %d links did not redirect right, e.g. %v", len(wrong), len(todo), wrong[:min(5, len(wrong))])
	}
	t.Logf("followed all %d imported links on the edge in %s: every one 302 to its target", followed.Load(), time.Since(start).Round(time.Millisecond))

	// The same imports again: every batch replays, nothing is created (no
	// link and no link change; the allocator does lease: see the report).
	var versions int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'link'`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	again := importAll()
	for i, s := range again {
		if s.Replayed != s.Chunks || s.Chunks != sums[i].Chunks {
			t.Errorf("%s again: %d of %d batches replayed (first run %d)", files[i].name, s.Replayed, s.Chunks, sums[i].Chunks)
		}
		for j, o := range s.Outcomes {
			if o != sums[i].Outcomes[j] {
				t.Fatalf("%s again: line %d became %+v; first run %+v", files[i].name, o.Line, o, sums[i].Outcomes[j])
			}
		}
	}
	var links2, versions2 int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM links), (SELECT count(*) FROM outbox WHERE kind = 'link')`).Scan(&links2, &versions2); err != nil {
		t.Fatal(err)
	}
	if links2 != int64(links) || versions2 != versions {
		t.Fatalf("the re-run changed the database: %d links (was %d), %d outbox rows (was %d)", links2, links, versions2, versions)
	}
}

func digestOf(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))
}
