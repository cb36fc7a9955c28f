package importer

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadDomains: Shlink's domain column and key, and a Bitly link's
// branded host, are the rows' domains; Bitly's own hosts, Shlink's null
// and YOURLS name none.
func TestReadDomains(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  [][2]string // code, domain per row
	}{
		{
			name: "shlink web client csv",
			input: "createdAt,title,shortUrl,domain,shortCode,longUrl,tags,visits\n" +
				"2024-01-01,,https://s.test/Ab12x,s.test,Ab12x,https://example.com/1,,3\n" +
				"2024-01-01,,https://Go.Acme.com/sale,Go.Acme.com,sale,https://example.com/2,,3\n" +
				"2024-01-01,,https://s.test/none1,,none1,https://example.com/3,,3\n",
			want: [][2]string{{"Ab12x", "s.test"}, {"sale", "Go.Acme.com"}, {"none1", ""}},
		},
		{
			name: "shlink csv with a spreadsheet's Domain header",
			input: "Short code;Long URL;Domain\n" +
				"abc12;https://example.com/1;acme.link\n",
			want: [][2]string{{"abc12", "acme.link"}},
		},
		{
			name: "shlink api json",
			input: `[{"shortCode": "abc12", "shortUrl": "https://s.test/abc12", "longUrl": "https://example.com/x", "domain": null},
				{"shortCode": "abc12", "shortUrl": "https://acme.link/abc12", "longUrl": "https://example.com/y", "domain": "acme.link"}]`,
			want: [][2]string{{"abc12", ""}, {"abc12", "acme.link"}},
		},
		{
			name: "bitly csv",
			input: "id,link,long_url\n" +
				"bit.ly/3AbcDeF,https://bit.ly/3AbcDeF,https://example.com/a\n" +
				"acme.co/spring,https://acme.co/spring,https://example.com/b\n" +
				"j.mp/x1,https://j.mp/x1,https://example.com/c\n",
			want: [][2]string{{"3AbcDeF", ""}, {"spring", "acme.co"}, {"x1", ""}},
		},
		{
			name:  "bitly json",
			input: `{"links": [{"id": "acme.co/fall", "link": "https://acme.co/fall", "long_url": "https://example.com/1"}, {"id": "bit.ly/q", "long_url": "https://example.com/2"}]}`,
			want:  [][2]string{{"fall", "acme.co"}, {"q", ""}},
		},
		{
			name:  "yourls",
			input: "keyword,url\nabc,https://example.com/1\n",
			want:  [][2]string{{"abc", ""}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd, err := NewReader(strings.NewReader(tc.input), Auto)
			if err != nil {
				if rd, err = NewReader(strings.NewReader(tc.input), Shlink); err != nil {
					t.Fatal(err)
				}
			}
			var got [][2]string
			for {
				rec, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil || rec.Err != nil {
					t.Fatalf("line %d: %v %v", rec.Line, err, rec.Err)
				}
				got = append(got, [2]string{rec.Code, rec.Domain})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("rows %q; want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("row %d: (code, domain) %q; want %q", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestImportDomains: rows keep their domains — the same code on two
// domains is two links, the export's default domain, Shlink's null and
// the platform's own host are the platform's, hosts are compared canonically (a row repeated in
// another spelling is a duplicate), and a row on a host that is no domain
// of the tenant's, or no host at all, is rejected with the reason while
// every other row is imported. The mapping names each link's domain; a
// second export finds the links the first made on their domains.
func TestImportDomains(t *testing.T) {
	e := newAPIEnv(t)
	c, tenant := e.client(t, "importer")
	e.addDomain(t, tenant, "acme.link")
	_, rival := e.client(t, "rival")
	e.addDomain(t, rival, "rival.link")
	input := "createdAt,shortUrl,domain,shortCode,longUrl\n" +
		"2024-01-01,https://s.test/abc12,s.test,abc12,https://example.com/platform\n" + // 2: the export's default → platform
		"2024-01-01,https://acme.link/abc12,acme.link,abc12,https://example.com/acme\n" + // 3: same code, own domain
		"2024-01-01,https://ACME.link/abc12,ACME.Link.,abc12,https://example.com/acme\n" + // 4: the same row spelled otherwise
		"2024-01-01,https://nowhere.test/zz-1,nowhere.test,zz-1,https://example.com/nowhere\n" + // 5: not the tenant's
		"2024-01-01,https://x/bad,bad host!,bad-1,https://example.com/bad\n" + // 6: not a host
		"2024-01-01,https://s.test/none-1,,none-1,https://example.com/none\n" + // 7: no domain → platform
		"2024-01-01,https://rival.link/rival-1,rival.link,rival-1,https://example.com/rival\n" + // 8: another tenant's
		"2024-01-01,https://sho.rt/plat-1,sho.rt,plat-1,https://example.com/plat\n" // 9: the platform's own host
	// Chunks of two rows, four in flight: the rows of several domains go
	// up concurrently (run under -race).
	sum, err := runImport(t, input, c, Options{DefaultDomains: []string{"S.test"}, BatchSize: 2, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]struct {
		kind   Kind
		domain string
	}{2: {Kept, ""}, 3: {Kept, "acme.link"}, 4: {Duplicate, "acme.link"}, 5: {Rejected, "nowhere.test"}, 6: {Rejected, "bad host!"}, 7: {Kept, ""}, 8: {Rejected, "rival.link"}, 9: {Kept, "sho.rt"}}
	for _, o := range sum.Outcomes {
		w := want[o.Line]
		if o.Kind != w.kind || o.Domain != w.domain {
			t.Errorf("line %d: %s on %q (%s); want %s on %q", o.Line, o.Kind, o.Domain, o.Reason, w.kind, w.domain)
		}
		switch o.Line {
		case 5, 8:
			if !strings.Contains(o.Reason, `domain "`+w.domain+`" is not one of this tenant's domains`) {
				t.Errorf("line %d's reason %q; want it to name the domain", o.Line, o.Reason)
			}
		case 6:
			if !strings.Contains(o.Reason, "not a host name") {
				t.Errorf("line 6's reason %q", o.Reason)
			}
		}
	}
	if len(sum.Outcomes) != len(want) {
		t.Errorf("%d outcomes; want %d: %+v", len(sum.Outcomes), len(want), sum.Outcomes)
	}
	ctx := context.Background()
	for _, tc := range []struct{ domain, code, url string }{
		{"", "abc12", "https://example.com/platform"},
		{"acme.link", "abc12", "https://example.com/acme"},
		{"", "none-1", "https://example.com/none"},
		{"", "plat-1", "https://example.com/plat"},
	} {
		l, err := c.WithDomain(tc.domain).Get(ctx, tc.code)
		if err != nil || l.URL != tc.url {
			t.Errorf("%s on %q: %+v, %v; want %s", tc.code, tc.domain, l, err, tc.url)
		}
	}
	if n := e.count(t, tenant); n != 4 {
		t.Errorf("%d links; want 4", n)
	}

	var m bytes.Buffer
	if err := sum.WriteMapping(&m); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&m).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(recs))
	for _, r := range recs {
		got = append(got, r[0]+">"+r[1]+"@"+r[6])
	}
	if strings.Join(got, " ") != "old_code>new_code@domain abc12>abc12@ abc12>abc12@acme.link none-1>none-1@ plat-1>plat-1@sho.rt" {
		t.Errorf("mapping %q", got)
	}

	// Another export: a row the first made is found on its domain
	// (existing), and a code the domain has for another URL is re-coded
	// on that domain.
	second := "shortCode,longUrl,domain\n" +
		"abc12,https://example.com/acme,acme.link\n" +
		"abc12,https://example.com/other,acme.link\n"
	sum, err = runImport(t, second, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Outcomes) != 2 || sum.Outcomes[0].Kind != Existing || sum.Outcomes[1].Kind != Rejected {
		// Line 3 repeats line 2's code for another URL within one file.
		t.Fatalf("second export: %+v", sum.Outcomes)
	}
	third := "shortCode,longUrl,domain\nabc12,https://example.com/other,acme.link\n"
	sum, err = runImport(t, third, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o := sum.Outcomes[0]; o.Kind != Recoded || o.Domain != "acme.link" || o.NewCode == "abc12" {
		t.Fatalf("a taken code on the domain: %+v; want re-coded on acme.link", o)
	}
	if l, err := c.WithDomain("acme.link").Get(ctx, sum.Outcomes[0].NewCode); err != nil || l.URL != "https://example.com/other" {
		t.Errorf("the re-coded link on acme.link: %+v, %v", l, err)
	}
	if _, err := runImport(t, input, c, Options{DefaultDomains: []string{"not a host"}}); err == nil {
		t.Error("a default domain that is no host was taken")
	}
}

// TestOpenQuoteInDomain: a domain field whose quote is left open, and
// closed by a stray quote lines later, does not swallow the rows between.
func TestOpenQuoteInDomain(t *testing.T) {
	input := "shortCode,longUrl,domain\n" +
		"abc1,https://example.com/1,\"acme.link\n" +
		"abc2,https://example.com/2,acme.link\"\n" +
		"abc3,https://example.com/3,acme.link\n"
	rd, err := NewReader(strings.NewReader(input), Auto)
	if err != nil {
		t.Fatal(err)
	}
	var good []string
	bad := 0
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Err != nil {
			bad++
			continue
		}
		good = append(good, rec.Code+"@"+rec.Domain)
	}
	// Line 3 is read again on its own; its stray quote is part of its
	// domain, which the import then rejects as no host name.
	if bad != 1 || strings.Join(good, " ") != `abc2@acme.link" abc3@acme.link` {
		t.Errorf("%d bad rows, good %q; want line 2 reported, lines 3 and 4 read", bad, good)
	}
}
