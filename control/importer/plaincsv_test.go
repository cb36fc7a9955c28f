package importer

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/shared/link"
)

// readRecords reads every record of input in format f.
func readRecords(t testing.TB, input string, f Format) (*Reader, []Record) {
	t.Helper()
	rd, err := NewReader(strings.NewReader(input), f)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []Record
	for i := 0; ; i++ {
		if i > len(input)+2 {
			t.Fatalf("Next did not reach EOF after %d records", i)
		}
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rd, out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, rec)
	}
}

// TestPlainCSVColumns: every column of the csv format is read, whatever
// the header's case and spelling, in any order.
func TestPlainCSVColumns(t *testing.T) {
	input := "\ufeffTags;Max Clicks;EXPIRES_AT;redirect-type;Title;Domain;Code;URL\r\n" +
		"sale|q2,100,2031-05-06T07:08:09+02:00,301,Spring sale,go.acme.test,spring,https://example.com/spring\r\n" +
		",,,,,,,https://example.com/bare\r\n"
	// ';' separates fields when the header has more of them than ','.
	input = strings.ReplaceAll(input, ",", ";")
	input = strings.Replace(input, "sale|q2", "\"sale,q2;x\"", 1)
	rd, recs := readRecords(t, input, Auto)
	if rd.Format() != CSV {
		t.Fatalf("format %q; want csv", rd.Format())
	}
	if ig := rd.Ignored(); ig != nil {
		t.Errorf("ignored %q; want none", ig)
	}
	want := []Record{
		{Line: 2, Code: "spring", URL: "https://example.com/spring", Domain: "go.acme.test", Title: "Spring sale",
			Tags: []string{"sale", "q2", "x"}, RedirectType: 301, ExpiresAt: time.Date(2031, 5, 6, 5, 8, 9, 0, time.UTC), MaxClicks: 100},
		{Line: 3, URL: "https://example.com/bare"},
	}
	if fmt.Sprintf("%+v", recs) != fmt.Sprintf("%+v", want) {
		t.Errorf("records\n got %+v\nwant %+v", recs, want)
	}
}

// TestPlainCSVDetection: a header with url and none of the other formats'
// markers is the csv format; the markers still win, so YOURLS-style
// files (keyword,url) read as before.
func TestPlainCSVDetection(t *testing.T) {
	for header, want := range map[string]Format{
		"url":                        CSV,
		"URL,code,title":             CSV,
		"code,url,shorturl":          CSV, // a YOURLS API key in JSON only
		"keyword,url,title":          YOURLS,
		"url,keyword":                YOURLS,
		"long_url,link":              Bitly,
		"shortCode,longUrl,url":      Shlink,
		"createdAt,shortUrl,longUrl": Shlink,
	} {
		rd, err := NewReader(strings.NewReader(header+"\n"), Auto)
		if err != nil {
			t.Errorf("%q: %v", header, err)
			continue
		}
		if rd.Format() != want {
			t.Errorf("%q read as %q; want %q", header, rd.Format(), want)
		}
	}
	// Without a url column nothing is guessed, and the error says what
	// a CSV of one's own needs.
	_, err := NewReader(strings.NewReader("code,target_url\nx,https://example.com/\n"), Auto)
	if err == nil || !strings.Contains(err.Error(), "url column") {
		t.Errorf("no url column: %v; want the error to name the url column", err)
	}
	// Chosen explicitly, a header without url is refused by name, and a
	// headerless file (its first row a link) too: the header is required.
	for _, input := range []string{"code,title\nx,y\n", "abc,https://example.com/\n"} {
		if _, err := NewReader(strings.NewReader(input), CSV); err == nil || !strings.Contains(err.Error(), "header row with a url column") {
			t.Errorf("%q as csv: %v; want the header row asked for", input, err)
		}
	}
	if _, err := NewReader(strings.NewReader(`[{"url":"https://example.com/"}]`), CSV); err == nil || !strings.Contains(err.Error(), "JSON") {
		t.Errorf("JSON as csv: %v; want it refused as JSON", err)
	}
	if f, err := ParseFormat(" CSV "); err != nil || f != CSV {
		t.Errorf("ParseFormat(CSV) = %q, %v", f, err)
	}
}

// TestPlainCSVIgnoredColumns: unknown, unnamed and repeated columns are
// named once and every row is read without them.
func TestPlainCSVIgnoredColumns(t *testing.T) {
	var b strings.Builder
	b.WriteString("url,Notes,,owner,URL,code\n")
	for i := range 50 {
		fmt.Fprintf(&b, "https://example.com/%d,note %d,,me,https://other.example/%d,c-%d\n", i, i, i, i)
	}
	rd, recs := readRecords(t, b.String(), Auto)
	if want := []string{"Notes", "column 3 (no name)", "owner", "URL (a second time)"}; !slices.Equal(rd.Ignored(), want) {
		t.Errorf("ignored %q; want %q", rd.Ignored(), want)
	}
	if len(recs) != 50 {
		t.Fatalf("%d records; want 50", len(recs))
	}
	for i, r := range recs {
		if r.Err != nil || r.URL != fmt.Sprintf("https://example.com/%d", i) || r.Code != fmt.Sprintf("c-%d", i) {
			t.Fatalf("record %d: %+v; want the first url column's target and its code", i, r)
		}
	}
	// The other formats read what they know and name nothing.
	rd, _ = readRecords(t, "keyword,url,title,timestamp,ip,clicks,whatever\nx,https://example.com/,t,,,0,\n", Auto)
	if rd.Ignored() != nil {
		t.Errorf("YOURLS named %q", rd.Ignored())
	}
}

// TestPlainCSVRefusesPasswords: a password column refuses the whole file,
// saying why and what to do, however it is spelled.
func TestPlainCSVRefusesPasswords(t *testing.T) {
	for _, header := range []string{"url,password", "URL,Password", "url,pass word"} {
		for _, f := range []Format{Auto, CSV} {
			_, err := NewReader(strings.NewReader(header+"\nhttps://example.com/,hunter22\n"), f)
			if err == nil || !strings.Contains(err.Error(), "password") || !strings.Contains(err.Error(), "--password-file") {
				t.Errorf("%q (%s): %v; want the file refused over its passwords", header, f, err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter22") {
				t.Errorf("the error repeats a password: %v", err)
			}
		}
	}
}

// TestPlainCSVBadCells: a cell its column cannot take rejects its row,
// naming every bad cell; the rows around it are read.
func TestPlainCSVBadCells(t *testing.T) {
	huge := strings.Repeat("9", 400)
	input := "url,code,redirect_type,expires_at,max_clicks\n" +
		"https://example.com/ok1,ok1,302,2031-01-01T00:00:00Z,1\n" +
		"https://example.com/rt,rt,303,,\n" +
		"https://example.com/exp,exp,,2031-01-01,\n" +
		"https://example.com/exp2,exp2,,31/12/2031 10:00,\n" +
		"https://example.com/mc,mc,,,0\n" +
		"https://example.com/mc2,mc2,,,-5\n" +
		"https://example.com/mc3,mc3,,,1.5\n" +
		"https://example.com/mc4,mc4,,," + huge + "\n" +
		"https://example.com/mc5,mc5,,,9007199254740992\n" +
		"https://example.com/all,all,abc,tomorrow,lots\n" +
		"https://example.com/ok2,ok2,308,2031-01-01T00:00:00.123456789-05:00,9007199254740991\n"
	_, recs := readRecords(t, input, CSV)
	wantErr := map[string][]string{
		"rt":   {"redirect_type \"303\""},
		"exp":  {"expires_at \"2031-01-01\" is not an RFC 3339 time"},
		"exp2": {"expires_at"},
		"mc":   {"max_clicks \"0\""},
		"mc2":  {"max_clicks \"-5\""},
		"mc3":  {"max_clicks \"1.5\""},
		"mc4":  {"max_clicks \"" + huge[:24] + "\" is not"},
		"mc5":  {"max_clicks \"9007199254740992\" is not a whole number from 1 to 9007199254740991"},
		"all":  {"redirect_type", "expires_at", "max_clicks"},
	}
	if len(recs) != 11 {
		t.Fatalf("%d records; want 11", len(recs))
	}
	for _, r := range recs {
		want, bad := wantErr[r.Code]
		if !bad {
			if r.Err != nil {
				t.Errorf("%s: %v", r.Code, r.Err)
			}
			continue
		}
		if r.Err == nil {
			t.Errorf("%s: read without an error: %+v", r.Code, r)
			continue
		}
		for _, w := range want {
			if !strings.Contains(r.Err.Error(), w) {
				t.Errorf("%s: %q; want it to say %q", r.Code, r.Err, w)
			}
		}
		if r.URL == "" {
			t.Errorf("%s: a bad row keeps its URL for the rejects file", r.Code)
		}
	}
	last := recs[len(recs)-1]
	if last.RedirectType != 308 || last.MaxClicks != link.MaxClicksLimit ||
		!last.ExpiresAt.Equal(time.Date(2031, 1, 1, 5, 0, 0, 123456789, time.UTC)) || last.ExpiresAt.Location() != time.UTC {
		t.Errorf("last row %+v", last)
	}
}

// TestImportPlainCSV: a plain CSV through control's API on a real
// PostgreSQL: each row's redirect type, expiry, click limit, title, tags
// and domain reach its link; rows the API refuses (an expiry past) are
// rejects with its reason; a re-run replays.
func TestImportPlainCSV(t *testing.T) {
	e := newAPIEnv(t)
	c, tenant := e.client(t, "plain")
	e.addDomain(t, tenant, "go.acme.test")
	input := "url,code,domain,title,tags,redirect_type,expires_at,max_clicks,campaign\n" +
		"https://example.com/1,first-1,,One,a|b,301,2031-01-02T03:04:05Z,10,x\n" +
		"https://example.com/2,second-2,go.acme.test,,,,,,y\n" +
		"https://example.com/3,,,,,,,,\n" +
		"https://example.com/4,past-4,,,,,2001-01-01T00:00:00Z,,\n" +
		"https://example.com/5,bad-5,,,,,,many,\n"
	sum, err := runImport(t, input, c, Options{RedirectType: 307})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Format != CSV || sum.Kept != 2 || sum.Recoded != 1 || sum.Rejected != 2 {
		t.Fatalf("summary %+v", sum)
	}
	ctx := context.Background()
	one, err := c.Get(ctx, "first-1")
	if err != nil {
		t.Fatal(err)
	}
	if one.RedirectType != 301 || one.ExpiresAt == nil || *one.ExpiresAt != "2031-01-02T03:04:05Z" ||
		one.MaxClicks == nil || *one.MaxClicks != 10 || one.Title == nil || *one.Title != "One" || !slices.Equal(one.Tags, []string{"a", "b"}) {
		t.Errorf("first-1: %+v", one)
	}
	two, err := c.WithDomain("go.acme.test").Get(ctx, "second-2")
	if err != nil {
		t.Fatal(err)
	}
	if two.RedirectType != 307 || two.MaxClicks != nil || two.ExpiresAt != nil {
		t.Errorf("second-2 takes the import's redirect type and nothing else: %+v", two)
	}
	reasons := map[int]string{}
	for _, o := range sum.Outcomes {
		if o.Kind == Rejected {
			reasons[o.Line] = o.Reason
		}
	}
	if !strings.Contains(reasons[5], "expires_at") || !strings.Contains(reasons[6], "max_clicks") {
		t.Errorf("rejects %v; want line 5 refused for its past expiry, line 6 for its click limit", reasons)
	}
	again, err := runImport(t, input, c, Options{RedirectType: 307})
	if err != nil || again.Replayed != again.Chunks || again.Kept != 2 {
		t.Errorf("second run: %+v, %v; want every chunk replayed", again, err)
	}
	if n := e.count(t, tenant); n != 3 {
		t.Errorf("%d links; want 3", n)
	}
}

// FuzzPlainCSV: no input makes the csv format panic or loop; a record
// without an error has a URL and only values its columns allow.
func FuzzPlainCSV(f *testing.F) {
	f.Add([]byte("url,code,redirect_type,expires_at,max_clicks\nhttps://e.com/,c,301,2031-01-01T00:00:00Z,5\n"))
	f.Add([]byte("URL;Tags\n\"https://e.com/a;b\";x|y\n"))
	f.Add([]byte("url,,url,x\n\"open,1,2\nhttps://e.com/,a,b,c\n"))
	f.Add([]byte("url,max_clicks\nhttps://e.com/,99999999999999999999\n"))
	f.Add([]byte("url,expires_at\nhttps://e.com/,2031-02-30T25:61:00+99:00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(bytes.NewReader(data), CSV)
		if err != nil {
			return
		}
		for i := 0; ; i++ {
			if i > len(data)+2 {
				t.Fatalf("more records than bytes: %d", i)
			}
			rec, err := rd.Next()
			if err != nil {
				break
			}
			if rec.Err != nil {
				continue
			}
			if rec.URL == "" {
				t.Fatalf("record without URL and without error: %+v", rec)
			}
			if rec.RedirectType != 0 && !link.RedirectType(rec.RedirectType).Valid() {
				t.Fatalf("redirect type %d read", rec.RedirectType)
			}
			if rec.MaxClicks < 0 || rec.MaxClicks > link.MaxClicksLimit {
				t.Fatalf("max clicks %d read", rec.MaxClicks)
			}
			if !rec.ExpiresAt.IsZero() && rec.ExpiresAt.Location() != time.UTC {
				t.Fatalf("expiry %v not in UTC", rec.ExpiresAt)
			}
		}
	})
}

// FuzzPlainCSVRoundTrip: what encoding/csv writes in the csv format, the
// reader reads back, cell for cell.
func FuzzPlainCSVRoundTrip(f *testing.F) {
	f.Add("https://example.com/a,b", "code", "Title, \"quoted\"", "a|b", int64(5))
	f.Fuzz(func(t *testing.T, url, code, title, tags string, maxClicks int64) {
		if strings.ContainsAny(url+code+title+tags, "\r\n") || len(url)+len(code)+len(title)+len(tags) > 4096 {
			return // newlines in cells have their own tests (FuzzReader)
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		_ = w.Write([]string{"url", "code", "title", "tags", "max_clicks"})
		_ = w.Write([]string{url, code, title, tags, fmt.Sprint(maxClicks)})
		_ = w.Write([]string{"https://example.com/next", "next", "", "", ""})
		w.Flush()
		_, recs := readRecords(t, buf.String(), CSV)
		if len(recs) == 0 || recs[len(recs)-1].Code != "next" {
			t.Fatalf("the row after %q was lost: %+v", url, recs)
		}
		if strings.TrimSpace(url) == "" || len(recs) != 2 {
			return
		}
		r := recs[0]
		if maxClicks < 1 || maxClicks > link.MaxClicksLimit {
			if r.Err == nil {
				t.Fatalf("max_clicks %d read without an error: %+v", maxClicks, r)
			}
			return
		}
		if r.Err != nil || r.URL != strings.TrimSpace(url) || r.Code != strings.TrimSpace(code) || r.Title != strings.TrimSpace(title) ||
			!slices.Equal(r.Tags, splitTags(tags)) || r.MaxClicks != maxClicks {
			t.Fatalf("wrote %q %q %q %q %d, read %+v", url, code, title, tags, maxClicks, r)
		}
	})
}
