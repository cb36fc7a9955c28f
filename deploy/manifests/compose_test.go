package manifests_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads a compose file as `docker compose` does (compose-go is
// the library Docker Compose itself uses): interpolation, extension fields
// and merge keys, then validation against the compose specification's JSON
// schema, which the module embeds. The environment is empty, so the file's
// own defaults are what is checked.
func loadCompose(file string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithName("edgelink"), cli.WithEnv(nil))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func composeFile(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "compose", "compose.yaml")
}

// checkCompose: the services start in order (each waits for what it needs
// to be healthy, control for the migration to have succeeded), every
// long-running service has a healthcheck, control and edge are built from
// the Dockerfile's targets under the images Kubernetes runs, and their
// command lines, environment and healthchecks are ones the binaries accept
// and serve.
// readyPath is where each image answers readiness: the edge's own paths are
// under /-/, where no code can be.
var readyPath = map[string]string{"edgelink/control": "/readyz", "edgelink/edge": "/-/readyz"}

func checkCompose(t testing.TB, proj *types.Project, df *dockerfile, k8sTag string) (p problems) {
	t.Helper()
	// The repository root, as seen from deploy/compose.
	root := filepath.Dir(filepath.Dir(proj.WorkingDir))
	want := []string{"control", "edge", "migrate", "nats", "postgres"}
	if got := proj.ServiceNames(); fmt.Sprint(got) != fmt.Sprint(want) {
		p.add("services %v, want %v", got, want)
	}
	oneShot := map[string]bool{"migrate": true}
	for _, name := range proj.ServiceNames() {
		svc := proj.Services[name]
		hc := svc.HealthCheck
		if oneShot[name] {
			if svc.Restart != "no" {
				p.add("service %s runs once: restart must be \"no\", not %q", name, svc.Restart)
			}
		} else if hc == nil || hc.Disable || len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") {
			p.add("service %s: no healthcheck", name)
		}
		for dep, d := range svc.DependsOn {
			wantCond := types.ServiceConditionHealthy
			if oneShot[dep] {
				wantCond = types.ServiceConditionCompletedSuccessfully
			}
			if d.Condition != wantCond {
				p.add("service %s: depends_on %s with condition %s, want %s", name, dep, d.Condition, wantCond)
			}
		}
	}
	needs := map[string][]string{
		"migrate": {"postgres"},
		"control": {"postgres", "nats", "migrate"},
		"edge":    {"nats", "control"},
	}
	for name, deps := range needs {
		for _, dep := range deps {
			if _, ok := proj.Services[name].DependsOn[dep]; !ok {
				p.add("service %s: does not wait for %s", name, dep)
			}
		}
	}

	for _, name := range proj.ServiceNames() {
		svc := proj.Services[name]
		img, tag := imageName(svc.Image)
		if _, ok := binaries[img]; !ok {
			continue
		}
		where := "compose service " + name
		if tag != k8sTag {
			p.add("%s: image %s, but Kubernetes runs tag %q", where, svc.Image, k8sTag)
		}
		b := svc.Build
		switch {
		case b == nil:
			p.add("%s: no build section: compose would pull %s from a registry", where, svc.Image)
		case b.Context != root:
			p.add("%s: build context %s, want the repository root %s", where, b.Context, root)
		case filepath.ToSlash(b.Dockerfile) != "deploy/docker/Dockerfile":
			p.add("%s: dockerfile %s, want deploy/docker/Dockerfile", where, b.Dockerfile)
		case b.Target != path.Base(img):
			p.add("%s: build target %q, but the image is %s", where, b.Target, img)
		case df.stage(b.Target) == nil:
			p.add("%s: build target %q is no stage of the Dockerfile", where, b.Target)
		}
		if !svc.ReadOnly || !slices.Contains(svc.CapDrop, "ALL") || !slices.Contains(svc.SecurityOpt, "no-new-privileges:true") {
			p.add("%s: want read_only, cap_drop ALL and no-new-privileges", where)
		}
		env := map[string]string{}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		p = append(p, checkInvocation(t, invocation{where: where, image: img, args: svc.Command, env: env})...)
		for k, v := range env {
			if k != "EDGELINK_NATS_URL" && k != "EDGELINK_DATABASE_URL" {
				continue
			}
			u, err := url.Parse(strings.Split(v, ",")[0])
			if err != nil {
				p.add("%s: %s: %v", where, k, err)
			} else if _, ok := proj.Services[u.Hostname()]; !ok {
				p.add("%s: %s names host %q, which is no service", where, k, u.Hostname())
			}
		}
		if oneShot[name] {
			continue
		}
		port, err := listenPort(svc.Command, env)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		if !slices.ContainsFunc(svc.Ports, func(pc types.ServicePortConfig) bool { return int(pc.Target) == port }) {
			p.add("%s: publishes %v, but the binary listens on %d", where, svc.Ports, port)
		}
		if hc := svc.HealthCheck; hc != nil && len(hc.Test) == 3 && hc.Test[1] == "/usr/local/bin/httpcheck" {
			u, err := url.Parse(hc.Test[2])
			served := map[string]func(string) bool{
				"edgelink/control": controlServes,
				"edgelink/edge":    edgeServes(t),
			}[img]
			switch {
			case err != nil:
				p.add("%s: healthcheck URL: %v", where, err)
			case u.Port() != fmt.Sprint(port):
				p.add("%s: healthcheck on port %s, but the binary listens on %d", where, u.Port(), port)
			case u.Path != readyPath[img] || !served(u.Path):
				p.add("%s: healthcheck path %q: want %s, served by %s", where, u.Path, readyPath[img], img)
			}
		} else {
			p.add("%s: healthcheck %v: want [CMD /usr/local/bin/httpcheck http://127.0.0.1:PORT%s] (the image has no shell)", where, svc.HealthCheck, readyPath[img])
		}
	}
	p = append(p, checkComposeGeoIP(proj, df)...)
	return append(p, checkComposeCodeKeys(proj)...)
}

// kustomizeTag is the tag deploy/kubernetes gives the edgelink images.
func kustomizeTag(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join(kubernetesDir(t), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`- name: edgelink/control\s+newTag: (\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("kustomization.yaml sets no newTag for edgelink/control")
	}
	return string(m[1])
}

func TestCompose(t *testing.T) {
	proj, err := loadCompose(composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	checkCompose(t, proj, readDockerfile(t), kustomizeTag(t)).report(t)
}

// TestComposeChecksCatchMistakes breaks a copy of the compose file one way
// at a time.
func TestComposeChecksCatchMistakes(t *testing.T) {
	src, err := os.ReadFile(composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	df, tag := readDockerfile(t), kustomizeTag(t)
	mutations := []struct{ name, old, new, want string }{
		{"misspelt key", "    healthcheck:\n      test: [\"CMD\", \"pg_isready\"", "    healthchek:\n      test: [\"CMD\", \"pg_isready\"", "healthchek"},
		{"no healthcheck", "    healthcheck:\n      test: [\"CMD\", \"wget\"", "    x-healthcheck:\n      test: [\"CMD\", \"wget\"", "service nats: no healthcheck"},
		{"started is not ready", "      control:\n        condition: service_healthy", "      control:\n        condition: service_started", "depends_on control with condition service_started"},
		{"control skips the migration", "      migrate:\n        condition: service_completed_successfully\n", "", "service control: does not wait for migrate"},
		{"unknown flag", `command: ["serve", "--listen=:8080"]`, `command: ["serve", "--listen=:8080", "--stream-replica=1"]`, "unknown flag --stream-replica"},
		{"variable no binary reads", "      EDGELINK_PUBLIC_URL:", "      EDGELINK_SHORT_URL:", "sets EDGELINK_SHORT_URL"},
		{"healthcheck on the wrong port", "http://127.0.0.1:8081/-/readyz", "http://127.0.0.1:8080/-/readyz", "healthcheck on port 8080, but the binary listens on 8081"},
		{"wrong target", "      target: edge\n", "      target: edge-build\n", `build target "edge-build"`},
		{"tag drift", "image: edgelink/edge:dev", "image: edgelink/edge:latest", `but Kubernetes runs tag "dev"`},
		{"DSN to no service", "@postgres:5432/edgelink\n    depends_on:\n      postgres:\n        condition: service_healthy\n    restart: \"no\"", "@db:5432/edgelink\n    depends_on:\n      postgres:\n        condition: service_healthy\n    restart: \"no\"", `names host "db"`},
		{"undefined dependency", "      nats:\n        condition: service_healthy\n      control:", "      natz:\n        condition: service_healthy\n      control:", "natz"},
		{"edge without country data", "      EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip\n", "", "compose service edge: neither EDGELINK_EDGE_GEOIP nor EDGELINK_EDGE_GEOIP_MMDB"},
		{"edge country data not in the image", "EDGELINK_EDGE_GEOIP: /usr/share/edgelink/geoip", "EDGELINK_EDGE_GEOIP: /usr/share/tor", "is neither the image's country data"},
	}
	dir := t.TempDir()
	// The file the code keys secret takes, where the copies look for it.
	placeholder, err := os.ReadFile(filepath.Join(filepath.Dir(composeFile(t)), "code-keys.placeholder"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "deploy", "compose"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy", "compose", "code-keys.placeholder"), placeholder, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if n := strings.Count(string(src), m.old); n != 1 {
				t.Fatalf("compose.yaml holds %q %d times, want once: update this mutation", m.old, n)
			}
			// Beside the original, so the build context ../.. is the same.
			file := filepath.Join(dir, "deploy", "compose", fmt.Sprintf("compose-%d.yaml", i))
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(strings.Replace(string(src), m.old, m.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			var found problems
			if proj, err := loadCompose(file); err != nil {
				found.add("%v", err)
			} else {
				found = checkCompose(t, proj, df, tag)
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, m.want) }) {
				t.Errorf("after %s, no problem mentions %q; found:\n%s", m.name, m.want, strings.Join(found, "\n"))
			}
		})
	}
}
