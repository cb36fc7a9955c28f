package api

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/apiwire"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/shared/link"
)

// batchAnswer and listAnswer are the answers the handlers write by hand,
// as the OpenAPI document describes them: what encoding/json would write
// for them is what the handlers must.
type batchAnswer struct {
	Created int                   `json:"created"`
	Failed  int                   `json:"failed"`
	Results []apiwire.BatchResult `json:"results"`
}

type listAnswer struct {
	Links      []apiwire.Link `json:"links"`
	NextCursor *string        `json:"next_cursor"`
}

// wireLink is l as an apiwire.Link with its state at now: the oracle
// appendLink is held to.
func wireLink(public string, l *links.Link, now time.Time) apiwire.Link {
	domain, short := wireShortURL(public, l)
	b := apiwire.Link{
		Code: l.Code, Domain: domain, ShortURL: short, URL: l.URL, URLOriginal: l.URLOriginal,
		RedirectType: int(l.RedirectType), Status: string(links.State(&l.Link, now)), Namespace: l.Namespace,
		Version: l.Version, CreatedAt: l.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: l.UpdatedAt.UTC().Format(time.RFC3339Nano),
		Tags: append([]string{}, l.Tags...),
	}
	if l.Title != "" {
		b.Title = &l.Title
	}
	if !l.ExpiresAt.IsZero() {
		e := l.ExpiresAt.UTC().Format(time.RFC3339Nano)
		b.ExpiresAt = &e
	}
	b.Rules = []apiwire.Rule{}
	for _, r := range l.Extras.Rules {
		w := apiwire.Rule{URL: r.URL, Country: r.Countries, Language: r.Languages}
		for _, d := range r.Devices {
			w.Device = append(w.Device, d.String())
		}
		for _, q := range r.Query {
			c := apiwire.QueryCondition{Param: q.Param}
			if q.Equals {
				c.Equals = &q.Value
			}
			w.Query = append(w.Query, c)
		}
		b.Rules = append(b.Rules, w)
	}
	b.PasswordProtected = l.PasswordProtected || l.Extras.PasswordHash != ""
	if l.Extras.MaxClicks > 0 {
		b.MaxClicks, b.ClicksCounted = &l.Extras.MaxClicks, &l.Extras.ClicksCounted
	}
	return b
}

// wireShortURL is the host of l's domain and l's short URL: on the
// platform's domain public's host and public + "/" + code, on another the
// code on its host with public's scheme and port.
func wireShortURL(public string, l *links.Link) (domain, short string) {
	pu, err := url.Parse(public)
	if err != nil {
		panic(err)
	}
	if l.DomainID == link.DefaultDomain {
		return strings.ToLower(pu.Hostname()), strings.TrimSuffix(public, "/") + "/" + l.Code
	}
	host := l.Domain
	if p := pu.Port(); p != "" {
		host = net.JoinHostPort(host, p)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return l.Domain, (&url.URL{Scheme: pu.Scheme, Host: host}).String() + "/" + l.Code
}

// encodingJSON is v as writeJSON writes it.
func encodingJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hardStrings need escaping in JSON, or by encoding/json's HTML rules, or
// are not UTF-8.
var hardStrings = []string{
	"", "plain", `q"uote`, `back\slash`, "<script>&amp;</script>", "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
	"caf\u00e9 \u65e5\u672c \U0001F600", "line\u2028para\u2029", "bad\xffutf8\xc3", "https://a.example/p?x=1&y=<2>#f",
}

// TestEncodeIsEncodingJSON: every answer written by hand is byte for byte
// what encoding/json writes for the same value: links in every state
// (expired, with and without an expiry, times with and without a
// fraction), strings that need escaping, batch answers with problems, list
// pages with and without a cursor.
func TestEncodeIsEncodingJSON(t *testing.T) {
	for _, public := range []string{"https://sho.rt/", "http://127.0.0.1:8081"} {
		t.Run(public, func(t *testing.T) { testEncodeIsEncodingJSON(t, public) })
	}
}

func testEncodeIsEncodingJSON(t *testing.T, public string) {
	s := New(oneTenant{}, echoLinks{}, Config{PublicURL: public})
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.FixedZone("x", 3600))
	var ls []*links.Link
	for i, str := range hardStrings {
		l := &links.Link{Link: link.Link{ID: uint64(i + 1), Code: str, URL: str, URLOriginal: "o" + str, Namespace: str,
			RedirectType: link.RedirectType(301 + i), Status: link.Active, Version: uint64(1) << (i * 5),
			CreatedAt: created.Add(time.Duration(i) * 1234567 * time.Nanosecond), UpdatedAt: created.Add(time.Hour)},
			Title: str, Tags: hardStrings[:i%4]}
		// Links on the platform's domain, on another and on an IPv6
		// literal's.
		switch i % 4 {
		case 1, 2:
			l.DomainID, l.Domain = link.DomainID(i), "go.acme.example"
		case 3:
			l.DomainID, l.Domain = 7, "::1"
		}
		switch i % 3 {
		case 1:
			l.ExpiresAt = created.Add(time.Minute) // expired at now below
		case 2:
			l.ExpiresAt = created.Add(48 * time.Hour)
			l.Status = link.Disabled
		}
		// Rules of every condition, strings that need escaping in their
		// targets and query values; a password (as a read or a create
		// holds it), a click limit.
		switch i % 5 {
		case 1:
			l.Extras.Rules = []link.Rule{{Devices: []link.Device{link.DeviceIOS, link.DeviceDesktop}, URL: "https://x.example/" + str},
				{Countries: []string{"DE", "US"}, Languages: []string{"en"}, Query: []link.QueryMatch{{Param: str}, {Param: "q", Equals: true, Value: str}}, URL: str}}
			l.Extras.MaxClicks = int64(i) << 40
		case 2:
			l.PasswordProtected = true
		case 3:
			l.Extras.PasswordHash = "$argon2id$x"
			l.Extras.Rules = []link.Rule{{Query: []link.QueryMatch{{Param: "e", Equals: true}}, URL: str}}
		case 4:
			l.Extras.MaxClicks = 1
		}
		ls = append(ls, l)
	}
	now := created.Add(time.Hour)
	for _, l := range ls {
		want, _ := json.Marshal(wireLink(s.public, l, now))
		if got := s.appendLink(nil, l, now); !bytes.Equal(got, want) {
			t.Errorf("appendLink(%q):\n got %s\nwant %s", l.Code, got, want)
		}
		p := &apiwire.Problem{Type: "about:blank", Title: l.URL, Status: 400, Detail: l.Code, RequestID: l.Namespace}
		want, _ = json.Marshal(p)
		if got := appendProblem(nil, p); !bytes.Equal(got, want) {
			t.Errorf("appendProblem(%+v):\n got %s\nwant %s", p, got, want)
		}
	}

	// Whole answers, through the handlers.
	reqs := []links.CreateRequest{{URL: "https://a.example/<1>&"}, {Rejected: link.ErrInvalidURL}, {URL: "https://b.example/\u2028"}}
	res, _ := echoLinks{}.CreateBatch(t.Context(), 1, "", reqs)
	res.Items[1] = links.ItemResult{Err: link.ErrInvalidURL}
	want := batchAnswer{Created: 2, Failed: 1, Results: make([]apiwire.BatchResult, 3)}
	for i, it := range res.Items {
		want.Results[i].Index = i
		if it.Err != nil {
			p := s.itemProblem(it.Err)
			want.Results[i].Status, want.Results[i].Error = p.Status, &p
			continue
		}
		b := wireLink(s.public, it.Link, it.Link.CreatedAt)
		want.Results[i].Status, want.Results[i].Link = 201, &b
	}
	w := httptest.NewRecorder()
	s.writeBody(w, http.StatusOK, func(b []byte) []byte {
		return s.appendBatch(b, res, []*apiwire.Problem{nil, want.Results[1].Error, nil}, 2)
	})
	if wantB := encodingJSON(t, want); !bytes.Equal(w.Body.Bytes(), wantB) {
		t.Errorf("batch answer:\n got %s\nwant %s", w.Body, wantB)
	}
	if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(w.Body.Len()) {
		t.Errorf("Content-Length %s for %d bytes", cl, w.Body.Len())
	}

	for _, next := range []uint64{0, 42} {
		want := listAnswer{Links: []apiwire.Link{}}
		for _, l := range ls {
			want.Links = append(want.Links, wireLink(s.public, l, now))
		}
		if next != 0 {
			c := encodeCursor(next)
			want.NextCursor = &c
		}
		got := s.appendList(nil, ls, next, now)
		if wantB := encodingJSON(t, want); !bytes.Equal(append(got, '\n'), wantB) {
			t.Errorf("list page (next %d):\n got %s\nwant %s", next, got, wantB)
		}
	}
	if got, want := s.appendList(nil, nil, 0, now), encodingJSON(t, listAnswer{Links: []apiwire.Link{}}); !bytes.Equal(append(got, '\n'), want) {
		t.Errorf("empty list page:\n got %s\nwant %s", got, want)
	}
}

// FuzzAppendString: any string, valid UTF-8 or not, is written exactly as
// encoding/json writes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range hardStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s; want %s", s, got, want)
		}
	})
}

// TestBatchRequestAllocations: a batch of 100 is read and answered with
// few allocations beyond the strings the request brings: not a token, a
// map and a path string per value, an apiwire.Link, two time strings and
// encoding/json's reflection per link, as before (about 27 a link).
func TestBatchRequestAllocations(t *testing.T) {
	h := benchServer()
	body := benchBody(100)
	allocs := testing.AllocsPerRun(20, func() {
		req := httptest.NewRequest("POST", "/api/v1/links/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	if allocs > 400 {
		t.Errorf("a batch of 100 through the handler allocates %.0f times; want at most 400", allocs)
	}
}
