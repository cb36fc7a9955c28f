package importer

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// row is a Record as the tests compare it: Err reduced to "ERR".
type row struct {
	Line      int
	Code, URL string
	Err       string
}

func readAll(t testing.TB, input string, f Format) (Format, []row) {
	t.Helper()
	rd, err := NewReader(strings.NewReader(input), f)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []row
	for i := 0; ; i++ {
		if i > len(input)+2 {
			t.Fatalf("Next did not reach EOF after %d records", i)
		}
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		r := row{Line: rec.Line, Code: rec.Code, URL: rec.URL}
		if rec.Err != nil {
			r = row{Line: rec.Line, Err: rec.Err.Error()}
		}
		out = append(out, r)
	}
	return rd.Format(), out
}

func TestReadFormats(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		input  string
		want   Format
		rows   []row
	}{
		{
			name: "bitly csv with BOM and CRLF",
			input: "\ufeffid,link,long_url,title,created_at\r\n" +
				"bit.ly/3AbcDeF,https://bit.ly/3AbcDeF,https://example.com/a?x=1&y=2,\"Title, with comma\",2023-01-02T03:04:05+0000\r\n" +
				"bit.ly/xyz,https://bit.ly/xyz,https://example.com/b,,2023\r\n",
			want: Bitly,
			rows: []row{{2, "3AbcDeF", "https://example.com/a?x=1&y=2", ""}, {3, "xyz", "https://example.com/b", ""}},
		},
		{
			name:  "bitly csv with spreadsheet headers",
			input: "Title,Bitlink,Long URL\nT,bit.ly/promo-2024,https://example.com/p\n",
			want:  Bitly,
			rows:  []row{{2, "promo-2024", "https://example.com/p", ""}},
		},
		{
			name: "bitly json (v4 bitlinks page)",
			input: `{"links": [{"created_at": "2023-01-01T00:00:00+0000", "id": "bit.ly/abcd1", "link": "https://bit.ly/abcd1",
				"custom_bitlinks": [], "long_url": "https://example.com/1", "title": "x", "archived": false, "tags": []},
				{"id": "bit.ly/abcd2", "link": "https://bit.ly/abcd2", "long_url": "https://example.com/2"}],
				"pagination": {"next": "", "size": 50}}`,
			want: Bitly,
			rows: []row{{1, "abcd1", "https://example.com/1", ""}, {2, "abcd2", "https://example.com/2", ""}},
		},
		{
			name:  "yourls csv",
			input: "keyword,url,title,timestamp,ip,clicks\nabc1,https://example.com/1,One,2020-01-01 10:00:00,127.0.0.1,5\nz,http://example.com/z,,2020-01-01 10:00:00,::1,0\n",
			want:  YOURLS,
			rows:  []row{{2, "abc1", "https://example.com/1", ""}, {3, "z", "http://example.com/z", ""}},
		},
		{
			name:   "yourls csv without a header",
			format: YOURLS,
			input:  "abc1,https://example.com/1,One,2020-01-01 10:00:00,127.0.0.1,5\nabc2,https://example.com/2,Two,2020-01-01 10:00:00,127.0.0.1,5\n",
			want:   YOURLS,
			rows:   []row{{1, "abc1", "https://example.com/1", ""}, {2, "abc2", "https://example.com/2", ""}},
		},
		{
			name:  "yourls json array with a numeric keyword",
			input: `[{"keyword": 1234, "url": "https://example.com/n", "title": "n", "clicks": 3}, {"keyword": "ab-c", "url": "https://example.com/s"}]`,
			want:  YOURLS,
			rows:  []row{{1, "1234", "https://example.com/n", ""}, {2, "ab-c", "https://example.com/s", ""}},
		},
		{
			name: "yourls api stats answer",
			input: `{"links": {"link_1": {"shorturl": "https://sho.rt/first", "url": "https://example.com/1", "title": "t", "timestamp": "2020-01-01", "ip": "::1", "clicks": "2"},
				"link_2": {"shorturl": "https://sho.rt/second", "url": "https://example.com/2"}}, "stats": {"total_links": "2"}}`,
			want: YOURLS,
			rows: []row{{1, "first", "https://example.com/1", ""}, {2, "second", "https://example.com/2", ""}},
		},
		{
			name:  "shlink web client csv",
			input: "createdAt,title,shortUrl,domain,shortCode,longUrl,tags,visits\n2024-01-01T00:00:00+00:00,,https://s.test/Ab12x,,Ab12x,https://example.com/1,a|b,3\n",
			want:  Shlink,
			rows:  []row{{2, "Ab12x", "https://example.com/1", ""}},
		},
		{
			name:  "older shlink csv without shortCode",
			input: "createdAt,title,shortUrl,longUrl,tags,visits\n2024-01-01,,https://s.test/q9Zz1,https://example.com/1,,0\n",
			want:  Shlink,
			rows:  []row{{2, "q9Zz1", "https://example.com/1", ""}},
		},
		{
			name:  "shlink api json",
			input: `{"shortUrls": {"data": [{"shortCode": "abc12", "shortUrl": "https://s.test/abc12", "longUrl": "https://example.com/x", "tags": [], "meta": {"validUntil": null}}], "pagination": {"currentPage": 1}}}`,
			want:  Shlink,
			rows:  []row{{1, "abc12", "https://example.com/x", ""}},
		},
		{
			name:  "semicolon separated",
			input: "keyword;url;title\nsemi;https://example.com/a,b;x\n",
			want:  YOURLS,
			rows:  []row{{2, "semi", "https://example.com/a,b", ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.format
			if f == "" {
				f = Auto
			}
			got, rows := readAll(t, tt.input, f)
			if got != tt.want {
				t.Errorf("format %q; want %q", got, tt.want)
			}
			if fmt.Sprint(rows) != fmt.Sprint(tt.rows) {
				t.Errorf("rows\n got %v\nwant %v", rows, tt.rows)
			}
		})
	}
}

// TestHostileCSV: every malformed row is reported at its line and skipped;
// every good row around it is read.
func TestHostileCSV(t *testing.T) {
	huge := strings.Repeat("x", MaxRecordBytes+10)
	input := strings.Join([]string{
		"keyword,url,title",                            // 1
		`good1,https://example.com/1,"multi`,           // 2: a quoted title over two lines
		`line title, with ""quotes"""`,                 // 3
		`open1,https://example.com/open,"never closed`, // 4: the quote swallows nothing good
		`good2,https://example.com/2,t`,                // 5
		`bad1,https://example.com/b,"x"y`,              // 6: text after a closing quote
		`good3,https://exa"mple.com/3,bare quote kept`, // 7
		`wide,https://example.com/w,t,extra,fields`,    // 8: more fields than the header
		`short-row`,                             // 9: no URL
		"",                                      // 10: blank
		`big,https://example.com/big,` + huge,   // 11: oversized
		`good4,https://example.com/4,t`,         // 12
		`"quoted, code",https://example.com/q,`, // 13: a code with a comma (re-coded later)
		"\x00nul,https://example.com/nul,t",     // 14: NUL kept as data; the API judges it
		`good5,https://example.com/5`,           // 15: fewer fields than the header, URL present
	}, "\n")
	_, rows := readAll(t, input, Auto)
	want := []row{
		{2, "good1", "https://example.com/1", ""},
		{4, "", "", "ERR"},
		{5, "good2", "https://example.com/2", ""},
		{6, "", "", "ERR"},
		{7, "good3", `https://exa"mple.com/3`, ""},
		{8, "", "", "ERR"},
		{9, "", "", "ERR"},
		{11, "", "", "ERR"},
		{12, "good4", "https://example.com/4", ""},
		{13, "quoted, code", "https://example.com/q", ""},
		{14, "\x00nul", "https://example.com/nul", ""},
		{15, "good5", "https://example.com/5", ""},
	}
	for i := range rows {
		if rows[i].Err != "" {
			t.Logf("line %d: %s", rows[i].Line, rows[i].Err)
			rows[i].Err = "ERR"
		}
	}
	if fmt.Sprintf("%+v", rows) != fmt.Sprintf("%+v", want) {
		t.Errorf("rows\n got %+v\nwant %+v", rows, want)
	}
}

func TestUnterminatedQuoteAtEOF(t *testing.T) {
	_, rows := readAll(t, "keyword,url\nok,https://example.com/ok\n\"open,https://example.com/x\nafter,https://example.com/after", Auto)
	want := []row{{2, "ok", "https://example.com/ok", ""}, {3, "", "", "quoted field is never closed"}, {4, "after", "https://example.com/after", ""}}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("rows\n got %v\nwant %v", rows, want)
	}
}

func TestTruncatedJSONKeepsWhatWasRead(t *testing.T) {
	_, rows := readAll(t, `[{"keyword":"a1b2","url":"https://example.com/1"}, {"keyword": "x", "url": 5}, "str", {"keyword":"c3d4","url":"https://exa`, Auto)
	if len(rows) != 4 || rows[0].Code != "a1b2" || rows[1].Err == "" || rows[2].Err == "" || rows[3].Err == "" {
		t.Fatalf("rows %v; want the first, then three errors (wrong type, not an object, truncated)", rows)
	}
}

func TestUnreadableInputs(t *testing.T) {
	for name, input := range map[string]string{
		"empty":          "",
		"blank":          "\n\r\n  \n",
		"utf-16":         "\xff\xfek\x00e\x00y\x00",
		"unknown header": "foo,bar\n1,2\n",
		"json scalar":    `"just a string"`,
		"json no list":   `{"meta": {}}`,
		"broken json":    `{"links": [`,
	} {
		t.Run(name, func(t *testing.T) {
			rd, err := NewReader(strings.NewReader(input), Auto)
			if err == nil {
				// Some shapes only fail on the first element.
				_, err = rd.Next()
				if err == nil || errors.Is(err, io.EOF) {
					rec, _ := rd.Next()
					_ = rec
				}
			}
			if err == nil {
				t.Errorf("%q was read without an error", input)
			} else {
				t.Logf("%s: %v", name, err)
			}
		})
	}
	// A forced format whose columns are missing names them.
	_, err := NewReader(strings.NewReader("id,link,title\n1,2,3\n"), Shlink)
	if err == nil || !strings.Contains(err.Error(), "longUrl") {
		t.Errorf("shlink without longUrl: %v", err)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": Auto, "AUTO": Auto, "Bitly": Bitly, "yourls": YOURLS, " shlink ": Shlink} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseFormat("kutt"); err == nil {
		t.Error("kutt accepted")
	}
}

// FuzzReader: no input makes the reader panic or loop; every record it
// calls good has a URL; lines never go backwards.
func FuzzReader(f *testing.F) {
	f.Add([]byte("keyword,url,title\nabc,https://e.com/,t\n"), uint8(0))
	f.Add([]byte("\ufeffid,link,long_url\r\nbit.ly/x,https://bit.ly/x,https://e.com\r\n\"open\n"), uint8(1))
	f.Add([]byte("createdAt,shortUrl,shortCode,longUrl\n,\"a\"\"b\",c,\"d\ne\"\n"), uint8(3))
	f.Add([]byte(`{"links":{"link_1":{"shorturl":"https://s/x","url":"https://e.com"}}}`), uint8(0))
	f.Add([]byte(`{"shortUrls":{"data":[{"shortCode":"x","longUrl":"y"}]}}`), uint8(0))
	f.Add([]byte("shortCode,longUrl,domain\nabc,https://e.com/,\"acme.link\nnext,https://e.com/2,x\n"), uint8(3))
	f.Add([]byte(`[{"keyword":1,"url":"u"},{"keyword":`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, fsel uint8) {
		formats := []Format{Auto, Bitly, YOURLS, Shlink}
		rd, err := NewReader(bytes.NewReader(data), formats[int(fsel)%len(formats)])
		if err != nil {
			return
		}
		last := 0
		for i := 0; ; i++ {
			if i > len(data)+2 {
				t.Fatalf("more records than bytes: %d", i)
			}
			rec, err := rd.Next()
			if err != nil {
				break
			}
			if rec.Err == nil && rec.URL == "" {
				t.Fatalf("record without URL and without error: %+v", rec)
			}
			if rd.Encoding() == "csv" && rec.Line < last {
				t.Fatalf("line went back from %d to %d", last, rec.Line)
			}
			if rd.Encoding() == "csv" && rec.Err == nil && strings.Contains(rec.Code+rec.URL+rec.Domain, "\n") {
				t.Fatalf("a good record's code, URL or domain spans lines: %+v", rec)
			}
			last = rec.Line
		}
	})
}

// FuzzCSVRoundTrip: what encoding/csv writes, the reader reads back
// (fields are trimmed, as the reader does).
func FuzzCSVRoundTrip(f *testing.F) {
	f.Add("abc", "https://example.com/a,b", "title \"q\"\nline")
	f.Add(" sp ", "https://e.com/\"x\"", "")
	f.Fuzz(func(t *testing.T, code, url, title string) {
		if strings.ContainsAny(code+url+title, "\r") || len(code)+len(url)+len(title) > 4096 {
			return // csv.Writer and the reader both rewrite CR
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		_ = w.Write([]string{"keyword", "url", "title"})
		_ = w.Write([]string{code, url, title})
		_ = w.Write([]string{"next", "https://example.com/next", ""})
		w.Flush()
		rd, err := NewReader(&buf, YOURLS)
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		for {
			rec, err := rd.Next()
			if err != nil {
				break
			}
			got = append(got, rec)
		}
		wantURL := strings.TrimSpace(url)
		if len(got) == 0 || got[len(got)-1].Code != "next" {
			t.Fatalf("the row after %q was lost: %+v", []string{code, url, title}, got)
		}
		if wantURL == "" || strings.TrimSpace(code+url+title) == "" || strings.Contains(code+url, "\n") {
			return // an empty row, one without URL or one with a newline in its code or URL: reported, not compared
		}
		if len(got) != 2 || got[0].Err != nil || got[0].Code != strings.TrimSpace(code) || got[0].URL != wantURL {
			t.Fatalf("wrote %q, read %+v", []string{code, url, title}, got)
		}
	})
}

// TestManyOpenQuotes: rows that each open a quote never closed, between
// good rows: each is reported on its own line and every good row is read
// (the span of an open quote is bounded, so this stays linear).
func TestManyOpenQuotes(t *testing.T) {
	var b strings.Builder
	b.WriteString("keyword,url\n")
	const n = 5000
	for i := range n {
		fmt.Fprintf(&b, "\"open-%d,https://example.com/x%s\n", i, strings.Repeat("y", 200))
		fmt.Fprintf(&b, "good-%d,https://example.com/%d\n", i, i)
	}
	_, rows := readAll(t, b.String(), Auto)
	good, bad := 0, 0
	for _, r := range rows {
		if r.Err != "" {
			bad++
		} else if r.Code == fmt.Sprintf("good-%d", good) {
			good++
		}
	}
	if good != n || bad != n {
		t.Fatalf("%d good rows (want %d in order), %d reported (want %d)", good, n, bad, n)
	}
}
