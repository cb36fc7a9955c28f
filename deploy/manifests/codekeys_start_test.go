package manifests_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/control/snapshots"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/internal/stack"
)

// TestCommittedCodeKeysStart starts control and an edge as a fresh
// deployment of each kind does: with the committed key file (no key) and
// the EDGELINK_DOMAIN_KEY the manifests give control. Both start, and a
// link on the platform's domain redirects; a domain key the file lacks
// keeps control from starting, which is why the checks refuse one.
func TestCommittedCodeKeysStart(t *testing.T) {
	c, p := render(t, kubernetesDir(t))
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	var k8sKeys string
	for name, s := range c.secrets {
		if strings.HasPrefix(name, "edgelink-code-keys") {
			k8sKeys = secretData(s)["code-keys"]
		}
	}
	if k8sKeys == "" {
		t.Fatal("no Secret edgelink-code-keys with a key code-keys in the rendered manifests")
	}
	// Where the kubelet would put it.
	k8sFile := filepath.Join(t.TempDir(), "code-keys")
	if err := os.WriteFile(k8sFile, []byte(k8sKeys), 0o440); err != nil {
		t.Fatal(err)
	}
	proj, err := loadCompose(composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	composeDomainKey := ""
	if v := proj.Services["control"].Environment["EDGELINK_DOMAIN_KEY"]; v != nil {
		composeDomainKey = *v
	}
	deployments := []struct{ name, file, domainKey string }{
		{"kubernetes", k8sFile, c.configMaps["control-config"].Data["EDGELINK_DOMAIN_KEY"]},
		{"compose", proj.Secrets["code_keys"].File, composeDomainKey},
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			if d.file == "" {
				t.Fatal("the manifests give control and the edge no committed key file")
			}
			pg, nats := stack.SharedPostgres(t), stack.NewNATS(t, stack.NATSConfig{})
			edge := stack.NewEdge(t, edgeserver.Config{NATSURL: nats.URL(), Name: "fresh-" + d.name, SnapshotDir: t.TempDir(),
				CodeKeysFile: d.file})
			cfg := controlserver.Config{DatabaseURL: pg.DSN, NATSURL: nats.URL(), PublicURL: edge.URL,
				Snapshots: snapshots.Schedule{Disabled: true}, CodeKeysFile: d.file, DomainKey: d.domainKey}
			ctl := stack.NewControl(t, cfg)
			_, key := pg.NewTenant(t, "fresh")
			client := stack.Client{ControlURL: ctl.URL, EdgeURL: edge.URL, Key: key}
			r := client.CreatePatiently(t.Context(), stack.Link{URL: "https://example.com/fresh"})
			if r.Err != nil || r.Status != http.StatusCreated {
				t.Fatalf("create on the platform's domain: status %d, %v, %v", r.Status, r.Problem, r.Err)
			}
			status, location, err := stack.FollowUntil(edge.URL, r.Code, time.Minute, func(s int, _ string) bool { return s == http.StatusFound })
			if err != nil || status != http.StatusFound || location != r.URL {
				t.Errorf("follow %s: %d %q, %v; want 302 to %s", r.Code, status, location, err, r.URL)
			}

			// The same start naming a key the file lacks is refused.
			bad := cfg
			bad.HTTPAddr, bad.DomainKey = "", "k2026"
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if c, err := stack.StartControl(ctx, bad); err == nil {
				c.Stop()
				t.Errorf("control started with --domain-key k2026 and the committed key file")
			} else if !strings.Contains(err.Error(), `domain key "k2026" is not in the code key file`) {
				t.Errorf("control with a domain key the file lacks: %v, want it refused for that", err)
			}
		})
	}
}
