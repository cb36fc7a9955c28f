package security

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
	"github.com/edgelink/edgelink/shared/base62"
)

func TestMain(m *testing.M) { stack.Main(m) }

// env is control and one edge in this process, on a fresh database and
// an in-process JetStream server, logging at info level into buffers.
type env struct {
	controlURL, edgeURL, edgeAddr string
	natsURL                       string
	pg                            *stack.Postgres
	controlLog, edgeLog           *stack.LogBuffer
	blocked                       []string
}

// startStack runs the stack until the test ends.
func startStack(t *testing.T, blocked ...string) *env {
	t.Helper()
	s := &env{pg: stack.SharedPostgres(t), controlLog: &stack.LogBuffer{}, edgeLog: &stack.LogBuffer{}, blocked: blocked}
	s.natsURL = stack.NewNATS(t, stack.NATSConfig{}).URL()
	logger := func(w io.Writer) *slog.Logger {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	e := stack.NewEdge(t, edgeserver.Config{NATSURL: s.natsURL, Name: "security",
		Log: logger(s.edgeLog), SnapshotDir: t.TempDir()})
	s.edgeAddr, s.edgeURL = e.Addr, e.URL
	// Requests written by hand say "Host: 127.0.0.1": the host of
	// --public-url, the platform domain's, which the edge answers for (any
	// other host is no domain's and gets 404).
	if !strings.HasPrefix(e.URL, "http://127.0.0.1:") {
		t.Fatalf("the edge listens at %s, not on 127.0.0.1", e.URL)
	}
	// Generated codes start at a random point of the space, so they look
	// like codes (4cQ3xZ), not like numbers a log line could hold (000001).
	idStart := base62.Space/4 + rand.Uint64N(base62.Space/2)
	c := stack.NewControl(t, controlserver.Config{DatabaseURL: s.pg.DSN, NATSURL: s.natsURL,
		PublicURL: s.edgeURL, Log: logger(s.controlLog), BlockedDomains: blocked, Snapshots: snapshots.Schedule{Disabled: true},
		IDStart: idStart, IDEnd: idStart + 1_000_000,
		// The revoked-key and isolation checks fail authentication on
		// every endpoint from this one address on purpose, more often
		// than the default burst of 20; the bound itself is
		// control/authfail's and control/api's to test.
		AuthFailureBurst: 10_000})
	s.controlURL = c.URL
	return s
}

// count returns the rows in table.
func (s *env) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := s.pg.Pool().QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// tenant creates a tenant and returns an API key of it.
func (s *env) tenant(t *testing.T, name string) (int64, string) {
	t.Helper()
	return s.pg.NewTenant(t, name+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
}

func (s *env) key(t *testing.T, tenant int64) string {
	t.Helper()
	return s.pg.NewKey(t, tenant)
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
func (s *env) call(t *testing.T, method, path, key, body string, headers ...string) answer {
	t.Helper()
	a := stack.Client{ControlURL: s.controlURL, Key: key}.Do(t.Context(), method, path, body, headers...)
	if a.Err != nil {
		t.Fatalf("%s %s: %v", method, path, a.Err)
	}
	return answer{a.Status, a.Header, a.Body}
}

// create makes a link and returns its code and stored (normalized) URL.
func (s *env) create(t *testing.T, key, body string, headers ...string) (code, url string) {
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
// it answers something other than 404 or the bound passes.
func (s *env) follow(t *testing.T, target string) answer {
	t.Helper()
	var a answer
	_ = stack.Poll(t.Context(), "follow", 30*time.Second, func() bool {
		a = raw(t, s.edgeAddr, "GET "+target+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		return a.status != http.StatusNotFound
	})
	return a
}
