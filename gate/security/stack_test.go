package security

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/base62"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// logBuffer collects a component's log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
}

// stack is control and one edge in this process, on a fresh database and
// an in-process JetStream server, logging at info level into buffers.
type stack struct {
	controlURL, edgeURL, edgeAddr string
	natsURL                       string
	store                         *postgres.Store
	pool                          *pgxpool.Pool
	controlLog, edgeLog           *logBuffer
	blocked                       []string
}

// startStack runs the stack until the test ends.
func startStack(t *testing.T, blocked ...string) *stack {
	t.Helper()
	dsn := pgtest.DSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ns := natstest.Start(t)
	s := &stack{natsURL: ns.ClientURL(), store: postgres.New(pool), pool: pool, controlLog: &logBuffer{}, edgeLog: &logBuffer{}, blocked: blocked}
	logger := func(w io.Writer) *slog.Logger {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}

	ctx, cancel := context.WithCancel(context.Background())
	edgeAddr, controlAddr := make(chan net.Addr, 1), make(chan net.Addr, 1)
	edgeDone, controlDone := make(chan error, 1), make(chan error, 1)
	go func() {
		edgeDone <- edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), Name: "security",
			Log: logger(s.edgeLog), SnapshotDir: t.TempDir(), OnListen: func(a net.Addr) { edgeAddr <- a }})
	}()
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		cancel()
		for _, c := range []struct {
			name string
			done chan error
		}{{"control", controlDone}, {"edge", edgeDone}} {
			select {
			case err := <-c.done:
				if err != nil {
					t.Errorf("%s stopped with: %v", c.name, err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("%s did not stop within 60s", c.name)
			}
		}
	})
	select {
	case a := <-edgeAddr:
		s.edgeAddr = a.String()
		s.edgeURL = "http://" + s.edgeAddr
	case err := <-edgeDone:
		stopped = true
		cancel()
		t.Fatalf("edge failed to start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("edge not listening within 2 minutes")
	}
	// Generated codes start at a random point of the space, so they look
	// like codes (4cQ3xZ), not like numbers a log line could hold (000001).
	idStart := base62.Space/4 + rand.Uint64N(base62.Space/2)
	go func() {
		controlDone <- controlserver.Run(ctx, controlserver.Config{HTTPAddr: "127.0.0.1:0", DatabaseURL: dsn, NATSURL: ns.ClientURL(),
			PublicURL: s.edgeURL, Log: logger(s.controlLog), BlockedDomains: blocked, Snapshots: snapshots.Schedule{Disabled: true},
			IDStart: idStart, IDEnd: idStart + 1_000_000,
			OnListen: func(a net.Addr) { controlAddr <- a }})
	}()
	select {
	case a := <-controlAddr:
		s.controlURL = "http://" + a.String()
	case err := <-controlDone:
		controlDone <- err // the cleanup reports it
		t.Fatalf("control failed to start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("control not listening within 2 minutes")
	}
	return s
}

// count returns the rows in table.
func (s *stack) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// tenant creates a tenant and returns an API key of it.
func (s *stack) tenant(t *testing.T, name string) (int64, string) {
	t.Helper()
	id, err := s.store.CreateTenant(t.Context(), name+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	return id, s.key(t, id)
}

func (s *stack) key(t *testing.T, tenant int64) string {
	t.Helper()
	key, err := s.store.CreateAPIKey(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// answer is an HTTP response, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body)) }

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("answer %v is not JSON: %v", a, err)
	}
	return m
}

// call sends a control API request with key (none when empty) and extra
// header pairs.
func (s *stack) call(t *testing.T, method, path, key, body string, headers ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.controlURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// create makes a link and returns its code and stored (normalized) URL.
func (s *stack) create(t *testing.T, key, body string, headers ...string) (code, url string) {
	t.Helper()
	a := s.call(t, "POST", "/api/v1/links", key, body, headers...)
	if a.status != http.StatusCreated {
		t.Fatalf("create %s: %v", body, a)
	}
	m := a.json(t)
	return m["code"].(string), m["url"].(string)
}

// raw sends request bytes to addr as they are and reads one response; a
// connection the server closed without answering is status 0.
func raw(t *testing.T, addr, request string) answer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	// The server may answer and close before it has read everything.
	go func() { _, _ = io.WriteString(c, request) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}
}

// follow asks the edge for target (a request-target sent verbatim) until
// it answers something other than 404 or the deadline passes.
func (s *stack) follow(t *testing.T, target string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := raw(t, s.edgeAddr, "GET "+target+" HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n")
		if a.status != http.StatusNotFound || time.Now().After(deadline) {
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
}
