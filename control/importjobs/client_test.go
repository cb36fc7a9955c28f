package importjobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/api"
	"github.com/edgelink/edgelink/control/apiclient"
	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/importjobs"
	"github.com/edgelink/edgelink/control/links"
)

// mixedExport has a row of every outcome: kept, re-coded (short, generated-
// looking, reserved, taken by another tenant), existing, rejected (bad
// scheme, malformed, a space, another URL for a code used before) and a
// duplicate.
const mixedExport = `keyword,url,title
keep-me,https://example.com/keep,t
ab,https://example.com/short-code,t
abc123,https://example.com/generated-looking,t
livez,https://example.com/reserved,t
theirs7,https://example.com/taken,t
mine-1,https://example.com/mine,t
ftp-code,ftp://example.com/bad-scheme,t
keep-me,https://example.com/keep,t
keep-me,https://example.com/other,t
"broken,https://example.com/broken,t
good-2,https://example.com/good 2,t
good-3,https://EXAMPLE.com/good3,<script>alert(1)</script>
`

// TestClientAnswersAsTheAPI: the same export imported through the
// in-process Client and through the creator API over HTTP (the CLI's
// way), for two tenants set up alike, has the same outcome and the same
// reason on every row, and the same codes where the file chose them.
func TestClientAnswersAsTheAPI(t *testing.T) {
	ctx := context.Background()
	// Each on a database of its own: codes are unique across tenants on
	// the platform's domain.
	run := func(name string, client func(e *env, tenant int64, key string) importer.Client) *importer.Summary {
		e := newEnv(t)
		other, _, _ := e.tenant(t, "other")
		if _, err := e.svc.Create(ctx, other, links.CreateRequest{URL: "https://elsewhere.example/", Code: "theirs7"}); err != nil {
			t.Fatal(err)
		}
		tenant, _, key := e.tenant(t, name)
		if _, err := e.svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/mine", Code: "mine-1"}); err != nil {
			t.Fatal(err)
		}
		rd, err := importer.NewReader(strings.NewReader(mixedExport), importer.Auto)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(mixedExport))
		s, err := importer.Run(ctx, rd, client(e, tenant, key), importer.Options{Digest: hex.EncodeToString(sum[:]), BatchSize: 4, Concurrency: 2})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return s
	}
	overHTTP := run("http", func(e *env, _ int64, key string) importer.Client {
		srv := httptest.NewServer(api.New(e.st, e.svc, api.Config{PublicURL: "https://sho.rt", RatePerSecond: -1}))
		t.Cleanup(srv.Close)
		c, err := apiclient.New(srv.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
	inProcess := run("in-process", func(e *env, tenant int64, _ string) importer.Client {
		return importjobs.NewClient(e.svc, tenant, e.short, nil)
	})
	if len(overHTTP.Outcomes) != 12 || len(inProcess.Outcomes) != len(overHTTP.Outcomes) {
		t.Fatalf("%d and %d outcomes; want 12 each", len(overHTTP.Outcomes), len(inProcess.Outcomes))
	}
	kinds := map[importer.Kind]int{}
	for i, h := range overHTTP.Outcomes {
		p := inProcess.Outcomes[i]
		kinds[p.Kind]++
		if p.Line != h.Line || p.Kind != h.Kind || p.Reason != h.Reason || p.Domain != h.Domain || p.OldCode != h.OldCode {
			t.Errorf("line %d: in process %s %q; over HTTP %s %q", h.Line, p.Kind, p.Reason, h.Kind, h.Reason)
		}
		if (h.Kind == importer.Kept || h.Kind == importer.Existing) && p.NewCode != h.NewCode {
			t.Errorf("line %d: in process %q, over HTTP %q", h.Line, p.NewCode, h.NewCode)
		}
	}
	// Every kind of outcome was there to compare.
	for _, k := range []importer.Kind{importer.Kept, importer.Existing, importer.Recoded, importer.Duplicate, importer.Rejected} {
		if kinds[k] == 0 {
			t.Errorf("no row came out %s: the comparison missed it", k)
		}
	}
}
