package apiclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests answer from a stub server: the statuses they need (a 503 or
// 429 followed by success, a proxy's HTML error) cannot be produced on
// demand by the real control API. The importer's and the CLI's tests run
// this client against the real API.

func stub(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) (*Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("request without the key: %v", r.Header)
		}
		answers[min(i, len(answers)-1)](w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	c.MaxBackoff = 10 * time.Millisecond
	return c, &n
}

func problem(status int, detail string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"` + http.StatusText(status) + `","status":` + strconv.Itoa(status) + `,"detail":"` + detail + `","request_id":"r1"}`))
	}
}

func created(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"code":"abcd","url":"https://e.com/"}`))
}

func TestKeyedCreateRetriesUnavailable(t *testing.T) {
	c, n := stub(t, problem(503, "temporarily unavailable"), problem(429, "slow down"), created)
	l, replayed, err := c.Create(context.Background(), CreateRequest{URL: "https://e.com/"}, "key-1")
	if err != nil || l.Code != "abcd" || !replayed || n.Load() != 3 {
		t.Fatalf("got %+v replayed=%v err=%v after %d requests; want abcd, replayed, 3 requests", l, replayed, err, n.Load())
	}
}

func TestUnkeyedCreateIsNotRetried(t *testing.T) {
	c, n := stub(t, problem(503, "temporarily unavailable"), created)
	_, _, err := c.Create(context.Background(), CreateRequest{URL: "https://e.com/"}, "")
	if StatusOf(err) != 503 || n.Load() != 1 {
		t.Fatalf("err %v after %d requests; want the 503, one request", err, n.Load())
	}
	if !strings.Contains(err.Error(), "temporarily unavailable (request r1)") {
		t.Errorf("error %q lacks the problem's detail and request id", err)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	c, n := stub(t, problem(409, "that code is already taken"))
	_, err := c.Get(context.Background(), "abcd")
	if StatusOf(err) != 409 || n.Load() != 1 {
		t.Fatalf("err %v after %d requests", err, n.Load())
	}
}

func TestNonProblemBody(t *testing.T) {
	c, _ := stub(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>bad gateway</html>"))
	})
	c.Attempts = 2
	_, err := c.Get(context.Background(), "abcd")
	if StatusOf(err) != 502 || !strings.Contains(err.Error(), "<html>bad gateway</html>") {
		t.Fatalf("err %v; want a 502 problem carrying the body", err)
	}
}

func TestBatchAnswerMustMatch(t *testing.T) {
	c, _ := stub(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"created":1,"failed":0,"results":[{"index":0,"status":201,"link":{"code":"x"}}]}`))
	})
	if _, err := c.CreateBatch(context.Background(), []CreateRequest{{URL: "a"}, {URL: "b"}}, "k"); err == nil {
		t.Fatal("an answer with fewer results than links was accepted")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct{ url, key string }{{"ftp://x", "k"}, {"http://", "k"}, {"http://x", ""}} {
		if _, err := New(tc.url, tc.key); err == nil {
			t.Errorf("New(%q, %q) accepted", tc.url, tc.key)
		}
	}
}

// TestWithDomain: a client WithDomain names its domain on every link call
// (the query of the link routes, the body of creates and tag changes) and
// the client it came from still names none.
func TestWithDomain(t *testing.T) {
	var got []string
	c, _ := stub(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+strings.TrimSpace(string(b)))
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/qr"):
			_, _ = w.Write([]byte("png"))
		case r.URL.Path == "/api/v1/links" && r.Method == http.MethodGet, r.URL.Path == "/api/v1/links/tags":
			_, _ = w.Write([]byte(`{"links":[],"next_cursor":null}`))
		default:
			_, _ = w.Write([]byte(`{"code":"abcd"}`))
		}
	})
	ctx := context.Background()
	d := c.WithDomain("go.acme.example")
	_, _, _ = d.Create(ctx, CreateRequest{URL: "https://e.com/"}, "")
	_, _, _ = d.Create(ctx, CreateRequest{URL: "https://e.com/", Domain: "other.example"}, "")
	_, _ = d.Get(ctx, "a/b")
	_, _ = d.Patch(ctx, "abcd", map[string]any{"status": "disabled"})
	_ = d.Delete(ctx, "abcd")
	_, _, _ = d.QR(ctx, "abcd", QROptions{Format: "svg"})
	_, _ = d.TagLinks(ctx, []string{"abcd"}, []string{"x"}, nil)
	_, _ = d.List(ctx, ListRequest{Limit: 5})
	_, _ = c.Get(ctx, "abcd")
	want := []string{
		`POST /api/v1/links {"domain":"go.acme.example","url":"https://e.com/"}`,
		`POST /api/v1/links {"domain":"other.example","url":"https://e.com/"}`,
		`GET /api/v1/links/a%2Fb?domain=go.acme.example `,
		`PATCH /api/v1/links/abcd?domain=go.acme.example {"status":"disabled"}`,
		`DELETE /api/v1/links/abcd?domain=go.acme.example `,
		`GET /api/v1/links/abcd/qr?domain=go.acme.example&format=svg `,
		`POST /api/v1/links/tags {"add":["x"],"codes":["abcd"],"domain":"go.acme.example"}`,
		`GET /api/v1/links?domain=go.acme.example&limit=5 `,
		`GET /api/v1/links/abcd `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
