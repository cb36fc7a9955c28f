package security

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowClients holds n connections to addr that send head and then one
// header byte at a time, never finishing their request.
type slowClients struct {
	n       int
	stop    chan struct{}
	open    sync.WaitGroup
	results chan []byte // what each got before the server closed it
}

func startSlowClients(t *testing.T, addr, head string, n int) *slowClients {
	t.Helper()
	sc := &slowClients{n: n, stop: make(chan struct{}), results: make(chan []byte, n)}
	var stopOnce sync.Once
	t.Cleanup(func() { stopOnce.Do(func() { close(sc.stop) }) })
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, head+"X-Slow: "); err != nil {
			t.Fatal(err)
		}
		sc.open.Add(1)
		go func() { // a byte at a time, until the server hangs up
			for {
				select {
				case <-sc.stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := c.Write([]byte("a")); err != nil {
					return
				}
			}
		}()
		go func() {
			defer sc.open.Done()
			b, _ := io.ReadAll(c)
			sc.results <- b
		}()
	}
	return sc
}

// stillOpen is how many connections the server has not closed yet.
func (sc *slowClients) stillOpen() int { return sc.n - len(sc.results) }

// waitClosed waits for the server to close every connection and returns
// the first lines of what they got, counted.
func (sc *slowClients) waitClosed(t *testing.T, what string) map[string]int {
	t.Helper()
	closed := make(chan struct{})
	go func() { sc.open.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%d slow connections to %s still open after 2 minutes: no read timeout", sc.stillOpen(), what)
	}
	answers := map[string]int{}
	for range sc.n {
		got := <-sc.results
		first, _, _ := bytes.Cut(got, []byte("\r\n"))
		answers[string(first)]++
		if bytes.Contains(got, []byte("Location")) || bytes.Contains(got, []byte(" 302 ")) || bytes.Contains(got, []byte(" 200 ")) {
			t.Errorf("a slow connection to %s that never finished its headers was served: %q", what, got)
		}
	}
	return answers
}

// testSlowClientsAreTimedOut is slowloris: 50 connections to the
// edge (and 20 to control) each send a request line and then header bytes
// one at a time, never finishing. While they hang, ordinary requests are
// answered (redirects on the edge, reads on control); every slow
// connection is then closed by the server's read timeout without being
// served.
func testSlowClientsAreTimedOut(t *testing.T, s *env) {
	_, key := s.tenant(t, "acme")
	code, target := s.create(t, key, `{"url": "https://example.com/slow"}`)
	if a := s.follow(t, "/"+code); a.status != http.StatusFound {
		t.Fatalf("GET /%s: %v", code, a)
	}
	edge := startSlowClients(t, s.edgeAddr, "GET /"+code+" HTTP/1.1\r\nHost: 127.0.0.1\r\n", 50)
	control := startSlowClients(t, strings.TrimPrefix(s.controlURL, "http://"),
		"GET /api/v1/links/"+code+" HTTP/1.1\r\nHost: control\r\nAuthorization: Bearer "+key+"\r\n", 20)

	// Served while the slow connections hang. Whether they still hang is
	// read after the first answers, not after all 20: on a busy machine
	// the 20 may outlast the read timeout, which proves nothing either way.
	var edgeOpen, controlOpen int
	for i := range 20 {
		a := s.follow(t, fmt.Sprintf("/%s?i=%d", code, i))
		if a.status != http.StatusFound || a.header.Get("Location") != target {
			t.Fatalf("request %d beside %d slow connections: %v Location %q; want 302 %q", i, edge.n, a, a.header.Get("Location"), target)
		}
		if a := s.call(t, "GET", "/api/v1/links/"+code, key, ""); a.status != http.StatusOK {
			t.Fatalf("control request %d beside %d slow connections: %v", i, control.n, a)
		}
		if i == 0 {
			edgeOpen, controlOpen = edge.stillOpen(), control.stillOpen()
		}
	}
	t.Logf("after the first ordinary request each: %d of %d slow connections to the edge and %d of %d to control still open",
		edgeOpen, edge.n, controlOpen, control.n)
	if edgeOpen == 0 || controlOpen == 0 {
		t.Fatalf("every slow connection had closed before the ordinary requests were answered: nothing was shown")
	}
	t.Logf("slow connections closed by the edge; first lines of what they got: %v", edge.waitClosed(t, "the edge"))
	t.Logf("slow connections closed by control; first lines of what they got: %v", control.waitClosed(t, "control"))
}

// testOversizedRequestsOnTheEdge: a request line or headers larger than
// the edge reads, and bodies larger than it accepts, are refused (431 or
// 400/413) or the connection is closed; never served. The edge then still
// answers ordinary requests.
func testOversizedRequestsOnTheEdge(t *testing.T, s *env) {
	_, key := s.tenant(t, "acme")
	code, target := s.create(t, key, `{"url": "https://example.com/big"}`)
	if a := s.follow(t, "/"+code); a.status != http.StatusFound {
		t.Fatalf("GET /%s: %v", code, a)
	}
	var manyHeaders strings.Builder
	for i := range 600 {
		fmt.Fprintf(&manyHeaders, "X-H%d: %s\r\n", i, strings.Repeat("v", 20))
	}
	for _, tc := range []struct{ name, request string }{
		{"16 KB request line", "GET /" + code + "?q=" + strings.Repeat("a", 16<<10) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
		{"64 KB header", "GET /" + code + " HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"},
		{"600 headers", "GET /" + code + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + manyHeaders.String() + "\r\n"},
		{"64 KB cookie", "GET /" + code + " HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: a=" + strings.Repeat("b", 64<<10) + "\r\n\r\n"},
		{"1 MB body", "GET /" + code + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\n" + strings.Repeat("x", 1<<20)},
		{"1 MB chunked body", "GET /" + code + " HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n" + strings.Repeat("x", 1<<20) + "\r\n0\r\n\r\n"},
	} {
		a := raw(t, s.edgeAddr, tc.request)
		switch a.status {
		case 0, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge, http.StatusRequestURITooLong:
		default:
			t.Errorf("%s: %v; want 400, 413, 414, 431 or a closed connection", tc.name, a)
		}
		if a.header.Get("Location") != "" {
			t.Errorf("%s: served a redirect to %q", tc.name, a.header.Get("Location"))
		}
		t.Logf("%s: %d", tc.name, a.status)
	}
	if a := s.follow(t, "/"+code); a.status != http.StatusFound || a.header.Get("Location") != target {
		t.Errorf("GET /%s afterwards: %v", code, a)
	}
}

// testOversizedRequestsOnControl: bodies over the API's limits answer a
// 413 problem, headers over the server's limit a 431 (written by net/http
// before any handler runs, so plain text, not problem+json), an oversized
// Idempotency-Key a 400 problem; none of them writes a link, an outbox row
// or an idempotency key.
func testOversizedRequestsOnControl(t *testing.T, s *env) {
	_, key := s.tenant(t, "acme")
	host := strings.TrimPrefix(s.controlURL, "http://")
	create := func(headers, body string) string {
		return "POST /api/v1/links HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\n" + headers + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	tables := []string{"links", "outbox WHERE kind = 'link'", "idempotency_keys"}
	var before []int
	for _, table := range tables {
		before = append(before, s.count(t, table))
	}
	small := `{"url": "https://example.com/small"}`
	big := `{"url": "https://example.com/` + strings.Repeat("a", 100<<10) + `"}`
	bigBatch := `{"links": [` + strings.Repeat(`{"url": "https://example.com/`+strings.Repeat("b", 1000)+`"},`, 6000) + `{"url": "https://example.com/"}]}`
	for _, tc := range []struct {
		name, request string
		status        int
		problem       bool
	}{
		{"100 KB create body", create("", big), 413, true},
		{"100 KB chunked create body", "POST /api/v1/links HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big), 413, true},
		{"6 MB batch body", "POST /api/v1/links/batch HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(bigBatch)) + bigBatch, 413, true},
		{"64 KB header", create("X-Big: "+strings.Repeat("a", 64<<10)+"\r\n", small), 431, false},
		{"64 KB Idempotency-Key", create("Idempotency-Key: "+strings.Repeat("k", 64<<10)+"\r\n", small), 431, false},
		{"10 KB Idempotency-Key", create("Idempotency-Key: "+strings.Repeat("k", 10<<10)+"\r\n", small), 400, true},
		{"64 KB request line", "GET /api/v1/links?cursor=" + strings.Repeat("9", 64<<10) + " HTTP/1.1\r\nHost: " + host +
			"\r\nAuthorization: Bearer " + key + "\r\n\r\n", 431, false},
	} {
		a := raw(t, host, tc.request)
		if a.status != tc.status {
			t.Errorf("%s: %v; want %d", tc.name, a, tc.status)
			continue
		}
		if tc.problem {
			if ct := a.header.Get("Content-Type"); ct != "application/problem+json" || a.json(t)["status"] != float64(tc.status) {
				t.Errorf("%s: %s %v; want a %d problem+json", tc.name, ct, a, tc.status)
			}
		}
	}
	for i, table := range tables {
		if n := s.count(t, table); n != before[i] {
			t.Errorf("oversized requests wrote %d rows to %s", n-before[i], table)
		}
	}
	if a := raw(t, host, create("", small)); a.status != http.StatusCreated {
		t.Errorf("an ordinary create afterwards: %v", a)
	}
}
