package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// startStack runs the whole local stack on free ports with data in dir and
// returns what it printed as ready; it is stopped when the test ends.
func startStack(t *testing.T, dir string) (Ready, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	readyCh := make(chan Ready, 1)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = Run(ctx, Options{DataDir: dir, ControlAddr: "127.0.0.1:0", EdgeAddr: "127.0.0.1:0", NATSPort: -1,
			OnReady: func(r Ready) { readyCh <- r }})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
			if runErr != nil {
				t.Errorf("stack stopped with: %v", runErr)
			}
		case <-time.After(60 * time.Second):
			t.Error("stack did not stop within 60s")
		}
	}
	t.Cleanup(stop)
	select {
	case r := <-readyCh:
		return r, stop
	case <-done:
		stopped = true
		t.Fatalf("stack failed to start: %v", runErr)
	case <-time.After(3 * time.Minute):
		t.Fatal("stack not ready within 3 minutes")
	}
	return Ready{}, stop
}

var noFollow = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func createLink(t *testing.T, r Ready, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", r.ControlURL+"/api/v1/links", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// waitRedirect follows code on the edge until it answers a redirect, within
// a bound, and returns the status and Location.
func waitRedirect(t *testing.T, r Ready, code string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := noFollow.Get(r.EdgeURL + "/" + code)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || time.Now().After(deadline) {
				return resp.StatusCode, resp.Header.Get("Location")
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("GET %s/%s: %v", r.EdgeURL, code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCreateThenFollowAcrossRestart is the first slice end to end: a real
// PostgreSQL and NATS JetStream, control and edge in-process; a link created
// over HTTP redirects on the edge, and still does after the whole stack is
// stopped and started again on the same data.
func TestCreateThenFollowAcrossRestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "edgelink-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	r, stop := startStack(t, dir)
	target := "https://Example.COM/landing?utm_source=test&utm_campaign=e2e"
	status, body := createLink(t, r, `{"url": "`+target+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: status %d, body %v", status, body)
	}
	code, _ := body["code"].(string)
	want := "https://example.com/landing?utm_source=test&utm_campaign=e2e"
	if len(code) != 6 || body["url"] != want || body["short_url"] != r.EdgeURL+"/"+code {
		t.Fatalf("create answered %v", body)
	}
	if got, loc := waitRedirect(t, r, code); got != http.StatusFound || loc != want {
		t.Fatalf("edge answered %d Location %q; want 302 %q", got, loc, want)
	}
	key := r.APIKey
	stop()

	r2, _ := startStack(t, dir)
	if r2.APIKey != key {
		t.Errorf("restart printed a new dev key")
	}
	if got, loc := waitRedirect(t, r2, code); got != http.StatusFound || loc != want {
		t.Fatalf("after restart the edge answered %d Location %q; want 302 %q", got, loc, want)
	}
	// A second link after the restart gets a new code: IDs are not reused.
	status, body2 := createLink(t, r2, `{"url": "https://example.org/"}`)
	if status != http.StatusCreated || body2["code"] == code {
		t.Fatalf("second create: %d %v", status, body2)
	}
}

func TestMalformedCreateWritesNothing(t *testing.T) {
	dir, err := os.MkdirTemp("", "edgelink-local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r, _ := startStack(t, dir)
	for _, body := range []string{`{`, `{}`, `{"url": "ftp://example.com/"}`, `{"url": 5}`, `{"url": "https://example.com/` + strings.Repeat("a", 70<<10) + `"}`} {
		status, out := createLink(t, r, body)
		if status < 400 || status >= 500 || out["status"] == nil || out["title"] == nil {
			t.Errorf("create %.40q: status %d body %v; want a 4xx problem", body, status, out)
		}
	}
	// Nothing was written: the next good create takes the very first ID.
	status, out := createLink(t, r, `{"url": "https://example.com/"}`)
	if status != http.StatusCreated || out["code"] != "000001" {
		t.Fatalf("first good create: %d %v; want 201 code 000001", status, out)
	}
}
