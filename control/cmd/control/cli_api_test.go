package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/link"
)

type seqIDs struct{ n *atomic.Uint64 }

func (s seqIDs) NextID(_ context.Context, d link.DomainID) (uint64, error) {
	return link.IDBase(d) + s.n.Add(1), nil
}
func (seqIDs) Done(uint64, bool) {}

// apiServer is control's creator API on a fresh database, with a tenant's
// key; IDs come from a counter (the allocator has its own tests).
func apiServer(t *testing.T) (url, key string, pool *pgxpool.Pool) {
	t.Helper()
	pool = pgtest.Pool(t)
	st := postgres.New(pool)
	svc := links.New(st, seqIDs{new(atomic.Uint64)}, links.Config{Reserved: api.Routes})
	srv := httptest.NewServer(api.New(st, svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1}))
	t.Cleanup(srv.Close)
	_, key, err := st.CreateTenantWithKey(context.Background(), "cli")
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, key, pool
}

func runCLIEnv(t *testing.T, env map[string]string, args ...string) (string, string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut, nil)
	return out.String(), errOut.String(), err
}

func TestLinksCommands(t *testing.T) {
	url, key, _ := apiServer(t)
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}

	out, _, err := runCLIEnv(t, env, "links", "--api-url", url, "--json", "create", "https://Example.com/a?b=1&c=2",
		"--code", "cli-made", "--redirect-type", "307", "--expires-in", "48h", "--idempotency-key", "k1")
	if err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if l["code"] != "cli-made" || l["url"] != "https://example.com/a?b=1&c=2" || l["redirect_type"] != 307.0 || l["expires_at"] == nil {
		t.Fatalf("created %v", l)
	}
	// The same key replays; text output says so.
	out, _, err = runCLIEnv(t, env, "links", "--api-url", url, "create", "https://Example.com/a?b=1&c=2",
		"--code", "cli-made", "--redirect-type", "307", "--expires-at", l["expires_at"].(string), "--idempotency-key", "k1")
	if err != nil || !strings.Contains(out, "already created") || !strings.Contains(out, "https://sho.rt/cli-made") {
		t.Fatalf("replay: %q %v", out, err)
	}

	out, _, err = runCLIEnv(t, env, "links", "--api-url", url, "get", "cli-made")
	if err != nil || !strings.Contains(out, "status         active") || !strings.Contains(out, "redirect_type  307") {
		t.Fatalf("get: %q %v", out, err)
	}
	out, _, err = runCLIEnv(t, env, "links", "--api-url", url, "--json", "disable", "cli-made")
	if err != nil || !strings.Contains(out, `"status": "disabled"`) {
		t.Fatalf("disable: %q %v", out, err)
	}

	// Failures exit non-zero with the API's problem detail.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "https://example.com/", "--code", "cli-made"}, "409 Conflict: that code is already taken"},
		{[]string{"create", "ftp://example.com/"}, "400 Bad Request"},
		{[]string{"create", "https://example.com/", "--code", "abc123"}, "reserved for generated links"},
		{[]string{"get", "nope-nope"}, "404 Not Found: no such link"},
		{[]string{"disable", "nope-nope"}, "404"},
	} {
		_, _, err := runCLIEnv(t, env, append([]string{"links", "--api-url", url}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error with %q", tc.args, err, tc.want)
		}
	}
	_, _, err = runCLIEnv(t, map[string]string{"EDGELINK_API_KEY": "elk_wrong"}, "links", "--api-url", url, "get", "cli-made")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong key: %v", err)
	}
	_, _, err = runCLIEnv(t, map[string]string{"EDGELINK_API_KEY": ""}, "links", "--api-url", url, "get", "cli-made")
	if err == nil || !strings.Contains(err.Error(), "EDGELINK_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	// Database commands still need their database.
	if _, _, err := runCLIEnv(t, nil, "alloc", "status"); err == nil || !strings.Contains(err.Error(), "--database-url") {
		t.Errorf("alloc status without a database: %v", err)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestImportCommand(t *testing.T) {
	url, key, pool := apiServer(t)
	env := map[string]string{"EDGELINK_API_KEY": key, "EDGELINK_DATABASE_URL": ""}
	dir := t.TempDir()
	file := filepath.Join(dir, "bitly.json")
	var b strings.Builder
	b.WriteString(`{"links": [`)
	for i := range 30 {
		if i > 0 {
			b.WriteString(",")
		}
		code := fmt.Sprintf("bl-%02d", i)
		if i == 7 {
			code = "Ab3xY9" // 6 alphanumerics: left to the generator, re-coded
		}
		fmt.Fprintf(&b, `{"id": "bit.ly/%s", "link": "https://bit.ly/%s", "long_url": "https://example.com/%d"}`, code, code, i)
	}
	b.WriteString(`, {"id": "bit.ly/bad", "link": "https://bit.ly/bad-url", "long_url": "javascript:alert(1)"}], "pagination": {}}`)
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLIEnv(t, env, "import", "--api-url", url, "--batch-size", "7", file)
	if err != nil {
		t.Fatalf("import: %v\n%s\n%s", err, out, errOut)
	}
	for _, want := range []string{"(bitly, json): 31 rows", "imported    30 (kept code 29, already present 0, re-coded 1)", "rejected    1", "(0 replayed"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("progress redrawn on a non-terminal: %q", errOut)
	}
	mapping := readCSV(t, file+".mapping.csv")
	if len(mapping) != 31 || mapping[8][0] != "Ab3xY9" || mapping[8][2] != "recoded" || mapping[8][1] == "Ab3xY9" {
		t.Errorf("mapping: %v", mapping)
	}
	rejects := readCSV(t, file+".rejects.csv")
	if len(rejects) != 2 || rejects[1][1] != "bad-url" || !strings.Contains(rejects[1][4], "400") {
		t.Errorf("rejects: %v", rejects)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM links`).Scan(&n); err != nil || n != 30 {
		t.Fatalf("%d links (%v); want 30", n, err)
	}

	// Again, as JSON: every batch replays, nothing new.
	out, _, err = runCLIEnv(t, env, "import", "--api-url", url, "--batch-size", "7", "--json", file)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil || s["replayed"] != s["batches"] || s["imported"] != 30.0 {
		t.Fatalf("re-run summary %v %v", s, err)
	}
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM links`).Scan(&n); err != nil || n != 30 {
		t.Fatalf("after the re-run %d links (%v); want 30", n, err)
	}
	// Several files in one run: each with its own outputs.
	y, sh := filepath.Join(dir, "y.csv"), filepath.Join(dir, "s.csv")
	_ = os.WriteFile(y, []byte("keyword,url\nyy-1,https://example.com/y1\n"), 0o644)
	_ = os.WriteFile(sh, []byte("shortCode,longUrl\nss-1,https://example.com/s1\n"), 0o644)
	out, _, err = runCLIEnv(t, env, "import", "--api-url", url, y, sh)
	if err != nil || !strings.Contains(out, "(yourls, csv): 1 rows") || !strings.Contains(out, "(shlink, csv): 1 rows") {
		t.Fatalf("two files: %q %v", out, err)
	}
	for _, f := range []string{y, sh} {
		if m := readCSV(t, f+".mapping.csv"); len(m) != 2 || m[1][2] != "kept" {
			t.Errorf("%s mapping %v", f, m)
		}
	}
	if _, _, err := runCLIEnv(t, env, "import", "--api-url", url, "--mapping", filepath.Join(dir, "m.csv"), y, sh); err == nil {
		t.Error("--mapping with two files accepted")
	}
	// A Shlink export names its own default domain in every row: with
	// --default-domain those rows land on the platform's domain, and the
	// mapping file says which domain each link is on.
	// (Two files: an import's batches are idempotent by file, so the same
	// file with other options would be refused.)
	sdA, sdB := filepath.Join(dir, "sda.csv"), filepath.Join(dir, "sdb.csv")
	_ = os.WriteFile(sdA, []byte("shortCode,longUrl,domain\nsd-1,https://example.com/d1,s.old.example\n"), 0o644)
	_ = os.WriteFile(sdB, []byte("shortCode,longUrl,domain\nsd-2,https://example.com/d2,s.old.example\n"), 0o644)
	if out, errOut, err := runCLIEnv(t, env, "import", "--api-url", url, sdA); !strings.Contains(out, "rejected    1") {
		t.Errorf("without --default-domain the row is on a domain the tenant lacks: %q %q %v", out, errOut, err)
	}
	if out, _, err := runCLIEnv(t, env, "import", "--api-url", url, "--default-domain", "S.old.example", sdB); err != nil || !strings.Contains(out, "kept code 1") {
		t.Errorf("--default-domain: %q %v", out, err)
	}
	if m := readCSV(t, sdB+".mapping.csv"); len(m) != 2 || m[0][len(m[0])-1] != "domain" || m[1][0] != "sd-2" || m[1][len(m[1])-1] != "" {
		t.Errorf("mapping with domains %v", m)
	}
	// A file that is no export fails with a clear message.
	bad := filepath.Join(dir, "x.csv")
	_ = os.WriteFile(bad, []byte("foo,bar\n1,2\n"), 0o644)
	if _, _, err := runCLIEnv(t, env, "import", "--api-url", url, bad); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("unknown export: %v", err)
	}
}

func TestAllocStatusAndRaiseFloor(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	_, a := allocator(t, dsn, 100)
	if _, err := a.Next(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = a.Close(cctx)

	out, _, err := runCLIEnv(t, nil, "--database-url", dsn, "alloc", "raise-floor", "--to", "500000", "--actor", "tester")
	if err != nil || !strings.Contains(out, "raised from") || !strings.Contains(out, "to 500,000") {
		t.Fatalf("raise-floor: %q %v", out, err)
	}
	if _, _, err := runCLIEnv(t, nil, "--database-url", dsn, "alloc", "raise-floor", "--to", "400000"); err == nil ||
		!strings.Contains(err.Error(), "only moves forward") {
		t.Fatalf("raising backwards: %v", err)
	}
	out, _, err = runCLIEnv(t, nil, "--database-url", dsn, "alloc", "status")
	if err != nil || !strings.Contains(out, "namespace default") || !strings.Contains(out, "next 500,000") ||
		!strings.Contains(out, "remaining   500,000 IDs") {
		t.Fatalf("status: %q %v", out, err)
	}
	out, _, err = runCLIEnv(t, nil, "--database-url", dsn, "alloc", "status", "--json")
	var st struct {
		Namespaces []struct {
			Next, Remaining, Wasted uint64
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || len(st.Namespaces) != 1 || st.Namespaces[0].Next != 500_000 {
		t.Fatalf("status --json: %q %v", out, err)
	}
	if out, err := runCLI(t, "--database-url", dsn, "alloc", "verify"); err != nil || !strings.HasPrefix(out, "ok:") {
		t.Fatalf("verify after raise-floor: %q %v", out, err)
	}
	out, _, err = runCLIEnv(t, nil, "--database-url", dsn, "alloc", "widen", "--to", "2000000")
	if err != nil || !strings.Contains(out, "end raised from 1,000,000 to 2,000,000") {
		t.Fatalf("widen: %q %v", out, err)
	}
	if _, _, err := runCLIEnv(t, nil, "--database-url", dsn, "alloc", "widen", "--to", "1500000"); err == nil ||
		!strings.Contains(err.Error(), "only grows") {
		t.Fatalf("narrowing: %v", err)
	}
}

func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	p := newProgressLine(&buf, "f.csv")
	if p.tty {
		t.Fatal("a buffer is a terminal")
	}
	p.every = 0
	p.update(importer.Progress{BytesRead: 50, BytesTotal: 100, Rows: 10, Done: 8, Imported: 7, Rejected: 1})
	p.finish()
	if got := buf.String(); got != "importing f.csv: 50% read, 8 rows done of 10 read, 7 imported, 1 rejected\n" {
		t.Errorf("plain progress %q", got)
	}
	buf.Reset()
	p.tty = true
	p.update(importer.Progress{BytesRead: 100, BytesTotal: 100, Rows: 1000, Done: 1000, Imported: 1000})
	p.update(importer.Progress{BytesRead: 100, BytesTotal: 100, Rows: 1000, Done: 1000, Imported: 1000})
	p.finish()
	if got := buf.String(); strings.Count(got, "\r\033[K") != 2 || !strings.HasSuffix(got, "1,000 imported, 0 rejected\n") {
		t.Errorf("terminal progress %q", got)
	}
}
