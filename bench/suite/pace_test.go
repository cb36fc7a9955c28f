package main

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serveTest runs a fasthttp server on loopback until the test ends: 302 to
// https://t.example<path> for paths starting /r, else 404 with a body.
// stall, when set, blocks the request it returns true for.
func serveTest(t *testing.T, stall func(path string) bool) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		p := string(ctx.Path())
		if stall != nil && stall(p) {
			time.Sleep(300 * time.Millisecond)
		}
		if strings.HasPrefix(p, "/r") {
			ctx.Response.Header.Set("Location", "https://t.example"+p)
			ctx.SetStatusCode(302)
			return
		}
		ctx.SetStatusCode(404)
		ctx.SetBodyString("404 not found: " + strings.Repeat("x", 3000))
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

func TestPaceSendsOnScheduleAndChecks(t *testing.T) {
	addr := serveTest(t, nil)
	paths := []string{"/r1", "/r2", "/missing", "/r3"}
	check := func(i, status int, loc []byte) bool {
		p := paths[i%len(paths)]
		if strings.HasPrefix(p, "/r") {
			return status == 302 && string(loc) == "https://t.example"+p
		}
		return status == 404
	}
	start := time.Now()
	res, err := pace(paceConfig{addr: addr, paths: paths, rate: 2000, duration: time.Second, conns: 8, answer: check})
	if err != nil {
		t.Fatal(err)
	}
	if res.sent != 2000 || len(res.latencies) != 2000 || res.errors != 0 || res.wrong != 0 {
		t.Fatalf("sent %d, answered %d, errors %d, wrong %d; want 2000 sent and answered, none failed", res.sent, len(res.latencies), res.errors, res.wrong)
	}
	if res.codes[302] != 1500 || res.codes[404] != 500 {
		t.Fatalf("codes %v; want 1500×302 and 500×404", res.codes)
	}
	// Open loop: the run lasts as long as its schedule, not as long as the
	// server takes.
	if d := time.Since(start); d < 990*time.Millisecond {
		t.Fatalf("2000 requests at 2000/s took %s", d)
	}
	// A checker that rejects the 302s counts them as wrong.
	res, err = pace(paceConfig{addr: addr, paths: paths, rate: 1000, duration: 200 * time.Millisecond, conns: 4,
		answer: func(i, status int, loc []byte) bool { return status != 302 }})
	if err != nil {
		t.Fatal(err)
	}
	// The first wrong answer is the first to arrive, on whichever
	// connection: any of the 302s.
	if res.wrong != 150 || res.firstWrong < 0 || !strings.HasPrefix(paths[res.firstWrong%len(paths)], "/r") ||
		!strings.Contains(res.firstGot, "302") {
		t.Fatalf("wrong %d, first request %d (%s); want 150, the first a 302", res.wrong, res.firstWrong, res.firstGot)
	}
}

// A stall is charged to every request due while it lasted: with one
// connection, requests queue behind the stalled one and their latency
// counts from when they were due, not from when they could be sent.
func TestPaceHasNoCoordinatedOmission(t *testing.T) {
	var stalled atomic.Bool
	addr := serveTest(t, func(p string) bool { return p == "/r-stall" && stalled.CompareAndSwap(false, true) })
	paths := make([]string, 400)
	for i := range paths {
		paths[i] = "/r" + string(rune('a'+i%26))
	}
	paths[100] = "/r-stall"
	res, err := pace(paceConfig{addr: addr, paths: paths, rate: 1000, duration: 400 * time.Millisecond, conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.latencies) != 400 {
		t.Fatalf("answered %d of 400", len(res.latencies))
	}
	// About 300 requests were due during the 300 ms stall; a closed-loop
	// client would time only the one stalled request.
	slow := 0
	for _, l := range res.latencies {
		if l >= 100*time.Millisecond {
			slow++
		}
	}
	if slow < 150 {
		t.Fatalf("%d requests over 100 ms; want the ~200 due during the first 200 ms of the stall", slow)
	}
}

func TestPaceConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := pace(paceConfig{addr: addr, paths: []string{"/x"}, rate: 10, duration: time.Second, conns: 1}); err == nil {
		t.Fatal("no error for a closed port")
	}
}

func TestParseAnswer(t *testing.T) {
	full := "HTTP/1.1 302 Found\r\nServer: x\r\nlocation:  https://a.example/x?y=1 \r\nContent-Length: 5\r\n\r\nhello" + "HTTP/1.1 404"
	for cut := range len(full) - 12 {
		if _, _, _, ok := parseAnswer([]byte(full[:cut])); ok {
			t.Fatalf("complete after %d of %d bytes", cut, len(full)-12)
		}
	}
	st, loc, size, ok := parseAnswer([]byte(full))
	if !ok || st != 302 || string(loc) != "https://a.example/x?y=1" || size != len(full)-12 {
		t.Fatalf("parseAnswer = %d %q %d %v", st, loc, size, ok)
	}
	if _, _, _, ok := parseAnswer([]byte("HTTP/1.1 2x0 OK\r\n\r\n")); ok {
		t.Fatal("a malformed status parsed")
	}
	b := []byte(full)
	if n := testing.AllocsPerRun(100, func() { parseAnswer(b) }); n != 0 {
		t.Fatalf("parseAnswer allocated %v times", n)
	}
}

// TestPaceFromManyAddresses: with sources set, the connections come from
// that many loopback addresses, as many clients would.
func TestPaceFromManyAddresses(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		seen[ctx.RemoteIP().String()] = true
		mu.Unlock()
		ctx.SetStatusCode(404)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown() })
	// At this rate one connection could carry it all: the idle ones take
	// turns, so all six (three addresses) are used.
	res, err := pace(paceConfig{addr: ln.Addr().String(), paths: []string{"/x"}, rate: 500, duration: 200 * time.Millisecond, conns: 6, sources: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.errors != 0 || len(res.latencies) != res.sent {
		t.Fatalf("sent %d, answered %d, errors %d", res.sent, len(res.latencies), res.errors)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]bool{"127.1.0.0": true, "127.1.0.1": true, "127.1.0.2": true}
	if len(seen) != 3 || !seen["127.1.0.0"] || !seen["127.1.0.1"] || !seen["127.1.0.2"] {
		t.Fatalf("requests came from %v; want %v", seen, want)
	}
}

func TestParseAnswerChunked(t *testing.T) {
	full := "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n" +
		"b\r\n{\"code\":\"x\"\r\n" + "10;ext=1\r\n,\"version\":4711}\r\n" + "0\r\n\r\n"
	next := "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
	b := []byte(full + next)
	for cut := range len(full) {
		if _, _, _, ok := parseAnswer(b[:cut]); ok {
			t.Fatalf("complete after %d of %d bytes", cut, len(full))
		}
	}
	st, _, size, ok := parseAnswer(b)
	if !ok || st != 201 || size != len(full) {
		t.Fatalf("parseAnswer = %d, size %d, %v; want 201, size %d", st, size, ok, len(full))
	}
	// The next answer on the connection starts where this one ended.
	if st, _, size, ok := parseAnswer(b[len(full):]); !ok || st != 404 || size != len(next) {
		t.Fatalf("the next answer: %d, size %d, %v", st, size, ok)
	}
	if got, want := string(answerBody(nil, b[:size])), `{"code":"x","version":4711}`; got != want {
		t.Fatalf("answerBody = %q, want %q", got, want)
	}
	// Trailer fields end at an empty line.
	tr := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n"
	if _, _, size, ok := parseAnswer([]byte(tr)); !ok || size != len(tr) {
		t.Fatalf("with a trailer: size %d, %v; want %d", size, ok, len(tr))
	}
	if got := answerBody(nil, []byte(next)); len(got) != 0 {
		t.Fatalf("an empty body read as %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { parseAnswer(b) }); n != 0 {
		t.Fatalf("parseAnswer of a chunked answer allocated %v times", n)
	}
}

// TestPaceBuildsRequests: with a request builder, each request is built
// when due (a POST with a body of its own here), and seen is told of every
// answer with its index, its due and answer times and its body, chunked
// or not.
func TestPaceBuildsRequests(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		body := append([]byte("got "), ctx.PostBody()...)
		if !ctx.IsPost() {
			ctx.SetStatusCode(405)
			return
		}
		ctx.SetStatusCode(201)
		if len(ctx.PostBody())%2 == 0 {
			// A streamed body goes out chunked.
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) { w.Write(body[:3]); w.Flush(); w.Write(body[3:]) })
			return
		}
		ctx.SetBody(body)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := ln.Addr().String()
	type seenAnswer struct {
		status  int
		due, at time.Duration
		body    string
	}
	got := map[int]seenAnswer{}
	res, err := pace(paceConfig{addr: addr, rate: 1000, duration: 200 * time.Millisecond, conns: 4,
		request: func(dst []byte, i int) []byte {
			b := strconv.Itoa(i)
			return append(dst, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+b...)
		},
		seen: func(i, status int, due, at time.Duration, body []byte) {
			got[i] = seenAnswer{status, due, at, string(body)}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.sent != 200 || len(res.latencies) != 200 || res.errors != 0 || len(got) != 200 || res.start.IsZero() {
		t.Fatalf("sent %d, answered %d, errors %d, seen %d; want 200 of each", res.sent, len(res.latencies), res.errors, len(got))
	}
	for i := range 200 {
		a := got[i]
		if want := "got " + strconv.Itoa(i); a.status != 201 || a.body != want || a.at < a.due || a.due != time.Duration(i)*time.Millisecond {
			t.Fatalf("answer %d: %+v; want 201 %q, due at %d ms, answered after", i, a, want, i)
		}
	}
}
