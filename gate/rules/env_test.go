package rules

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/edge/unlock"
	"github.com/edgelink/edgelink/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// scale is n in the launch gate and small otherwise.
func scale(small, n int) int {
	if os.Getenv("EDGELINK_GATE") != "" {
		return n
	}
	return small
}

// The edge's password limits in this gate: small, so that guessing is cut
// within a few tries, and refilled slowly (a try per 50 s per client, per
// 20 s per link), so that on a busy machine, where one argon2id
// verification under the race detector has taken 1.7 s, the tries still
// come faster than the budget refills and the cut shows.
const (
	clientRate  = 0.02
	clientBurst = 5
	linkRate    = 0.05
	linkBurst   = 20
)

// env is one stack: PostgreSQL, NATS, control and an edge with the geo
// fixture behind a trusted proxy (every loopback address: the test's
// X-Forwarded-For names the client when it sends one, else the peer is
// the client), and an unlock key file.
type env struct {
	pg      *stack.Postgres
	nats    *stack.NATS
	edge    *stack.Edge
	control *stack.Control
	creator stack.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{pg: stack.SharedPostgres(t), nats: stack.NewNATS(t, stack.NATSConfig{})}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keys := filepath.Join(t.TempDir(), "unlock-keys")
	if err := os.WriteFile(keys, []byte("gate "+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.edge = stack.NewEdge(t, edgeserver.Config{NATSURL: e.nats.URL(), Name: "rules", SnapshotDir: t.TempDir(),
		GeoIP: []string{"../../edge/geo/testdata"}, TrustedProxies: []string{"127.0.0.0/8"}, UnlockKeysFile: keys,
		Unlock: unlock.Config{ClientRate: clientRate, ClientBurst: clientBurst, LinkRate: linkRate, LinkBurst: linkBurst},
		// As in gate/visibility: the test is about what the edge answers,
		// not about how long a busy machine takes to answer it.
		AuthorityTimeout: 10 * time.Second, AuthorityMaxWait: 10 * time.Second})
	e.control = stack.NewControl(t, controlserver.Config{DatabaseURL: e.pg.DSN, NATSURL: e.nats.URL(), PublicURL: e.edge.URL,
		Snapshots: snapshots.Schedule{Disabled: true}})
	_, apiKey := e.pg.NewTenant(t, "rules")
	e.creator = stack.Client{ControlURL: e.control.URL, EdgeURL: e.edge.URL, Key: apiKey}
	return e
}

// create makes a link from a JSON body and returns its code.
func (e *env) create(t *testing.T, body string) string {
	t.Helper()
	r := e.creator.CreateJSONPatiently(t.Context(), body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %v %v", body, r.Status, r.Problem, r.Err)
	}
	return r.Code
}

// visitor is a browser-less client of the edge from one loopback address
// of its own, following no redirect and keeping no cookie (the test hands
// cookies on as a browser would).
type visitor struct {
	edge   string
	client *http.Client
}

func newVisitor(t *testing.T, edgeURL string, ip net.IP) *visitor {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &visitor{edge: edgeURL, client: &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// answer is one response, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends method path (a form body when not empty) with header pairs.
func (v *visitor) do(t *testing.T, method, path, form string, headers ...string) answer {
	t.Helper()
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, err := http.NewRequest(method, v.edge+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := v.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// cookie is the value of the Set-Cookie named name, "" without one.
func (a answer) cookie(name string) string {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

var tokenField = regexp.MustCompile(`name="csrf" value="([A-Za-z0-9_-]+)"`)

// form is a password form as a browser holds it: its token and cookie.
type form struct{ token, nonce string }

// formOf checks a is the password form and returns it.
func formOf(t *testing.T, what string, a answer) form {
	t.Helper()
	m := tokenField.FindSubmatch(a.body)
	f := form{nonce: a.cookie("elk_form")}
	if m == nil || f.nonce == "" || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") ||
		a.header.Get("Cache-Control") != "private, no-store" || a.header.Get("Referrer-Policy") != "no-referrer" ||
		!strings.Contains(a.header.Get("Content-Security-Policy"), "default-src 'none'") || a.header.Get("Location") != "" {
		t.Fatalf("%s: %d is not the password form:\n%v\n%s", what, a.status, a.header, a.body)
	}
	f.token = string(m[1])
	return f
}

// leaks names where a's headers or body show any of secrets, "" when none
// does.
func leaks(a answer, secrets ...string) string {
	for name, vs := range a.header {
		for _, v := range vs {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					return fmt.Sprintf("header %s: %q", name, v)
				}
			}
		}
	}
	for _, s := range secrets {
		if bytes.Contains(a.body, []byte(s)) {
			return fmt.Sprintf("body holds %q", s)
		}
	}
	return ""
}

// ruleJSON is a rule as the API takes it.
func ruleJSON(url string, conds map[string]any) string {
	m := map[string]any{"url": url}
	for k, v := range conds {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}
