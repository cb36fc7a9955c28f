package manifests_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/edgelink/edgelink/shared/ff1"
)

// The code key file (shared/ff1 LoadKeys) is a secret that control and
// every edge read at start: control makes FF1 domains' codes with it, an
// edge rules out their misses from memory with it. These checks hold the
// manifests to what that needs: every control and edge container names the
// file in EDGELINK_CODE_KEYS, the path is a read-only mount of one Secret
// (the same Secret and path everywhere, so the file is the same), readable
// by the process and by no other user, and the committed file holds no key
// (real keys never go in the repository) yet parses as the binaries parse
// it, so a fresh deployment with it starts: control starts with no keys as
// long as EDGELINK_DOMAIN_KEY names none it lacks.

// codeKeysEnv is the variable both binaries read the key file's path from.
const codeKeysEnv = "EDGELINK_CODE_KEYS"

// checkKeyPlaceholder checks a committed key file: only comments and blank
// lines, and parsed without error by ff1.ParseKeys (a line it refused would
// stop control and every edge at start). A line that is not a comment is
// named by number only: it may be a real key, and problems are printed.
// It returns the keys the file holds (none when it passes).
func checkKeyPlaceholder(where, text string) (*ff1.Keys, problems) {
	var p problems
	for n, line := range strings.Split(text, "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			p.add("%s line %d is not a comment: the committed code key file must hold no key (generate real keys outside the repository)", where, n+1)
		}
	}
	keys, err := ff1.ParseKeys(strings.NewReader(text))
	if err != nil {
		p.add("%s: %v: control and the edges would refuse to start with it", where, err)
		return &ff1.Keys{}, p
	}
	return keys, p
}

// checkDomainKey: control refuses to start when EDGELINK_DOMAIN_KEY names
// a key the file lacks, so the committed settings may name only a key the
// committed file holds (with the placeholder: none).
func checkDomainKey(where string, env map[string]string, keys *ff1.Keys, file string) (p problems) {
	if name := env["EDGELINK_DOMAIN_KEY"]; name != "" && !keys.Has(name) {
		p.add("%s: EDGELINK_DOMAIN_KEY names key %q, which %s does not hold: control would refuse to start (set the two together)", where, name, file)
	}
	return p
}

// codeKeysMount is where a container's EDGELINK_CODE_KEYS file comes from.
type codeKeysMount struct {
	where, path string
	from        string // the Secret and key, or the compose secret and its file
}

// checkCodeKeys is the Kubernetes check of the committed manifests.
func checkCodeKeys(t testing.TB, c *cluster) problems { return codeKeysProblems(t, c, true) }

// codeKeysProblems checks how the pods get the code keys; committed says
// the key file is the repository's own, which must hold no key.
func codeKeysProblems(t testing.TB, c *cluster, committed bool) (p problems) {
	var seen []codeKeysMount
	checked := map[string]bool{} // Secret/key pairs whose contents were checked
	for _, e := range c.edgelinkContainers(t) {
		if e.w.kind == "Job" {
			continue // control migrate makes no codes
		}
		where := fmt.Sprintf("%s container %s", e.w, e.ct.Name)
		env, err := c.containerEnv(e.ct)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		file := env[codeKeysEnv]
		if file == "" {
			p.add("%s: no %s: %s", where, codeKeysEnv, missingKeysCost(e.image))
			continue
		}
		if !path.IsAbs(file) {
			p.add("%s: %s=%s: want an absolute path", where, codeKeysEnv, file)
			continue
		}
		m, rel := mountOf(e.ct, file)
		if m == nil {
			p.add("%s: %s=%s is under no volume mount: the file would not be there", where, codeKeysEnv, file)
			continue
		}
		if !m.ReadOnly {
			p.add("%s: volume mount %s (%s) of the code keys is writable: mount it readOnly", where, m.Name, m.MountPath)
		}
		spec := &e.w.template.Spec
		var vol *corev1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == m.Name {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil || vol.Secret == nil {
			p.add("%s: the code keys come from volume %s, which is not a Secret volume", where, m.Name)
			continue
		}
		key, mode := rel, deref(vol.Secret.DefaultMode, corev1.SecretVolumeSourceDefaultMode)
		if len(vol.Secret.Items) > 0 {
			key = ""
			for _, it := range vol.Secret.Items {
				if it.Path == rel {
					key, mode = it.Key, deref(it.Mode, mode)
				}
			}
			if key == "" {
				p.add("%s: volume %s maps no key of its Secret to %s", where, vol.Name, rel)
				continue
			}
		}
		s, ok := c.secrets[vol.Secret.SecretName]
		if !ok {
			p.add("%s: volume %s: no Secret %q", where, vol.Name, vol.Secret.SecretName)
			continue
		}
		text, ok := secretData(s)[key]
		if !ok {
			p.add("%s: volume %s: Secret %s has no key %q", where, vol.Name, s.Name, key)
			continue
		}
		// The kubelet owns secret files by root; with an fsGroup it gives
		// that group read access (and ORs in 0440).
		fsGroup := spec.SecurityContext != nil && spec.SecurityContext.FSGroup != nil
		if mode&0o007 != 0 {
			p.add("%s: the code keys file has mode %#o: readable by every user of the node; give it 0440 and the pod an fsGroup", where, mode)
		} else if !fsGroup {
			p.add("%s: the code keys file (mode %#o, owner root) is unreadable by the process: give the pod an fsGroup", where, mode)
		}
		keys, err := ff1.ParseKeys(strings.NewReader(text))
		if id := s.Name + "/" + key; !checked[id] {
			checked[id] = true
			if committed {
				_, found := checkKeyPlaceholder(fmt.Sprintf("Secret %s key %s", s.Name, key), text)
				p = append(p, found...)
			} else if err != nil {
				p.add("Secret %s key %s: %v: control and the edges would refuse to start with it", s.Name, key, err)
			}
		}
		if keys == nil {
			keys = &ff1.Keys{}
		}
		if e.image == "edgelink/control" {
			p = append(p, checkDomainKey(where, env, keys, "Secret "+s.Name)...)
		}
		seen = append(seen, codeKeysMount{where: where, path: file, from: fmt.Sprintf("Secret %s key %s", s.Name, key)})
	}
	p = append(p, sameKeys(seen)...)
	return p
}

// missingKeysCost says what a binary without the key file loses.
func missingKeysCost(image string) string {
	if image == "edgelink/control" {
		return "control could make no FF1 domain's codes, and refuses to start once one exists"
	}
	return "the edge could rule out no FF1 domain's misses from memory (each would be asked of control)"
}

// sameKeys: one file for all, at one path, so an operator's
// `kubectl exec` sees what every process sees.
func sameKeys(seen []codeKeysMount) (p problems) {
	if len(seen) == 0 {
		return nil
	}
	first := seen[0]
	for _, s := range seen[1:] {
		if s.from != first.from {
			p.add("%s reads the code keys from %s, but %s from %s: control and every edge need the same file",
				s.where, s.from, first.where, first.from)
		}
		if s.path != first.path {
			p.add("%s reads the code keys at %s, but %s at %s: mount them at one path", s.where, s.path, first.where, first.path)
		}
	}
	return p
}

// mountOf is the volume mount a file at an absolute path is read from (the
// deepest one holding it) and the file's path inside the volume.
func mountOf(ct corev1.Container, file string) (*corev1.VolumeMount, string) {
	var best *corev1.VolumeMount
	rel := ""
	for i := range ct.VolumeMounts {
		m := &ct.VolumeMounts[i]
		var r string
		switch {
		case m.MountPath == file && m.SubPath != "":
			r = m.SubPath
		case strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/"):
			r = path.Join(m.SubPath, strings.TrimPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/"))
		default:
			continue
		}
		if best == nil || len(m.MountPath) > len(best.MountPath) {
			best, rel = m, r
		}
	}
	return best, rel
}

// checkComposeCodeKeys is the compose check: control and the edge get the
// key file as the same compose secret (read-only, and never in an image)
// at the path EDGELINK_CODE_KEYS names, and the file the secret takes when
// the operator names none is the committed placeholder.
func checkComposeCodeKeys(proj *types.Project) (p problems) {
	var seen []codeKeysMount
	checked := map[string]*ff1.Keys{}
	for _, name := range []string{"control", "edge"} {
		svc, ok := proj.Services[name]
		if !ok {
			continue // checkCompose reports it
		}
		where := "compose service " + name
		file := ""
		if v := svc.Environment[codeKeysEnv]; v != nil {
			file = *v
		}
		if file == "" {
			p.add("%s: no %s: %s", where, codeKeysEnv, missingKeysCost("edgelink/"+name))
			continue
		}
		var ref *types.ServiceSecretConfig
		for i, s := range svc.Secrets {
			// A relative target is under /run/secrets, as is an absent one.
			target := s.Target
			if target == "" {
				target = s.Source
			}
			if !path.IsAbs(target) {
				target = path.Join("/run/secrets", target)
			}
			if target == file {
				ref = &svc.Secrets[i]
			}
		}
		if ref == nil {
			p.add("%s: %s=%s is no secret of the service: mount the code key file as a compose secret there", where, codeKeysEnv, file)
			continue
		}
		sec, ok := proj.Secrets[ref.Source]
		if !ok || sec.File == "" {
			p.add("%s: secret %s takes no file", where, ref.Source)
			continue
		}
		keys, ok := checked[sec.File]
		if !ok {
			b, err := os.ReadFile(sec.File)
			if err != nil {
				p.add("secret %s: %v: `docker compose up` would fail without the operator's own file", ref.Source, err)
				keys = &ff1.Keys{}
			} else {
				var found problems
				keys, found = checkKeyPlaceholder("secret "+ref.Source+" file "+sec.File, string(b))
				p = append(p, found...)
			}
			checked[sec.File] = keys
		}
		if name == "control" {
			env := map[string]string{}
			if v := svc.Environment["EDGELINK_DOMAIN_KEY"]; v != nil {
				env["EDGELINK_DOMAIN_KEY"] = *v
			}
			p = append(p, checkDomainKey(where, env, keys, "secret "+ref.Source)...)
		}
		seen = append(seen, codeKeysMount{where: where, path: file, from: fmt.Sprintf("secret %s (file %s)", ref.Source, sec.File)})
	}
	return append(p, sameKeys(seen)...)
}

// TestComposeCodeKeysCatchMistakes breaks a copy of the compose file, or of
// the key file its secret takes, one way at a time.
func TestComposeCodeKeysCatchMistakes(t *testing.T) {
	const placeholder = "code-keys.placeholder"
	df, tag := readDockerfile(t), kustomizeTag(t)
	srcDir := filepath.Dir(composeFile(t))
	mutations := []struct{ name, file, old, new, want string }{
		{"edge without the code keys", "compose.yaml", "    secrets: [*code-keys]\n    tmpfs:\n      - /tmp\n    volumes:", "    tmpfs:\n      - /tmp\n    volumes:",
			"compose service edge: EDGELINK_CODE_KEYS=/etc/edgelink/keys/code-keys is no secret of the service"},
		{"control reads no code keys", "compose.yaml", "      EDGELINK_CODE_KEYS: /etc/edgelink/keys/code-keys\n      # The key new", "      # The key new",
			"compose service control: no EDGELINK_CODE_KEYS"},
		{"code keys where the secret is not", "compose.yaml", "  target: /etc/edgelink/keys/code-keys", "  target: code-keys",
			"EDGELINK_CODE_KEYS=/etc/edgelink/keys/code-keys is no secret of the service"},
		{"no placeholder", "compose.yaml", "./" + placeholder, "./code-keys", "no such file or directory: `docker compose up` would fail"},
		{"domain key by default without its key", "compose.yaml", "${EDGELINK_DOMAIN_KEY:-}", "${EDGELINK_DOMAIN_KEY:-k2026}",
			`compose service control: EDGELINK_DOMAIN_KEY names key "k2026", which secret code_keys does not hold`},
		{"a key committed", placeholder, "# One key a line", "k2026 " + strings.Repeat("A", 43) + "=\n# One key a line",
			"is not a comment: the committed code key file must hold no key"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			// Beside the original's place, so the build context ../.. and
			// the secret's ./ path work alike.
			dir := filepath.Join(t.TempDir(), "deploy", "compose")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"compose.yaml", placeholder} {
				b, err := os.ReadFile(filepath.Join(srcDir, f))
				if err != nil {
					t.Fatal(err)
				}
				if f == m.file {
					if n := strings.Count(string(b), m.old); n != 1 {
						t.Fatalf("%s holds %q %d times, want once: update this mutation", f, m.old, n)
					}
					b = []byte(strings.Replace(string(b), m.old, m.new, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var found problems
			if proj, err := loadCompose(filepath.Join(dir, "compose.yaml")); err != nil {
				found.add("%v", err)
			} else {
				found = checkCompose(t, proj, df, tag)
			}
			if !slices.ContainsFunc(found, func(s string) bool { return strings.Contains(s, m.want) }) {
				t.Errorf("after %s in %s, no problem mentions %q; found:\n%s", m.name, m.file, m.want, strings.Join(found, "\n"))
			}
		})
	}
}

// TestKubernetesCodeKeysOverlay applies the code keys as deploy/README.md
// tells an operator to, in an overlay of its own: the overlay's file
// replaces the committed one in the Secret every control and edge pod
// mounts, and EDGELINK_DOMAIN_KEY names a key in it.
func TestKubernetesCodeKeysOverlay(t *testing.T) {
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, kubernetesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	// Made as the README says; its bytes are this test's own.
	keyFile := "k2026 " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)) + "\n"
	kustomization := `resources:
  - ` + base + `
secretGenerator:
  - name: edgelink-code-keys
    behavior: replace
    files:
      - code-keys
patches:
  - patch: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: control-config
      data:
        EDGELINK_DOMAIN_KEY: k2026
`
	for name, text := range map[string]string{"kustomization.yaml": kustomization, "code-keys": keyFile} {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, p := render(t, overlay)
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	p = append(p, codeKeysProblems(t, c, false)...)
	p.report(t)
	var names []string
	for name, s := range c.secrets {
		if strings.HasPrefix(name, "edgelink-code-keys") {
			names = append(names, name)
			if got := secretData(s)["code-keys"]; got != keyFile {
				t.Errorf("Secret %s holds %d bytes of code keys, want the overlay's %d", name, len(got), len(keyFile))
			}
		}
	}
	if len(names) != 1 {
		t.Errorf("code key Secrets %v, want exactly the overlay's", names)
	}
	if got := c.configMaps["control-config"].Data["EDGELINK_DOMAIN_KEY"]; got != "k2026" {
		t.Errorf("control-config EDGELINK_DOMAIN_KEY = %q, want the overlay's k2026", got)
	}
}
