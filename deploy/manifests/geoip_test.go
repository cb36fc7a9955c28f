package manifests_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
)

// Country data for the edge (edge/geo): the IPFire Location data of
// Debian's tor-geoipdb, which the Dockerfile puts in the edge image, or an
// operator's .mmdb mounted into the pod. An edge refuses to start when the
// data it is given does not load, and when it is given both kinds, so
// these checks hold the manifests to: every edge names exactly one source;
// a --geoip path is the image's copy or lies under a volume mount; an .mmdb
// lies under a read-only volume mount; and the image's copy is what the
// Dockerfile makes from tor-geoipdb.

const (
	geoIPEnv     = "EDGELINK_EDGE_GEOIP"
	geoIPMMDBEnv = "EDGELINK_EDGE_GEOIP_MMDB"
)

// imageGeoIP is where the Dockerfile's edge stage puts the Tor-format
// country data, from a stage that downloads and unpacks tor-geoipdb; ""
// when it does not.
func imageGeoIP(df *dockerfile) (string, problems) {
	var p problems
	edge := df.stage("edge")
	if edge == nil {
		p.add("no edge stage")
		return "", p
	}
	for _, in := range edge.instrs {
		from, ok := in.flags["from"]
		if in.cmd != "COPY" || !ok {
			continue
		}
		st := df.stage(from)
		if st == nil {
			continue
		}
		fetches := slices.ContainsFunc(st.instrs, func(r instruction) bool {
			return r.cmd == "RUN" && strings.Contains(r.args, "apt-get download -q tor-geoipdb") && strings.Contains(r.args, "dpkg-deb -x") &&
				strings.Contains(r.args, "usr/share/tor/geoip6")
		})
		if fetches {
			f := strings.Fields(in.args)
			return f[len(f)-1], p
		}
	}
	p.add("the edge stage copies no country data from a stage that downloads and unpacks tor-geoipdb (apt-get download -q tor-geoipdb, dpkg-deb -x, usr/share/tor/geoip and geoip6)")
	return "", p
}

// geoIPProblems checks one edge's country settings: env is its
// environment, mounted says where a path lies under a volume mount (nil:
// under none) and whether that mount is read-only.
func geoIPProblems(where string, env map[string]string, imageDir string, mounted func(string) (ok, readOnly bool)) (p problems) {
	var tor []string
	for _, s := range strings.Split(env[geoIPEnv], ",") {
		if s = strings.TrimSpace(s); s != "" {
			tor = append(tor, s)
		}
	}
	mmdb := strings.TrimSpace(env[geoIPMMDBEnv])
	switch {
	case len(tor) > 0 && mmdb != "":
		p.add("%s: both %s and %s are set: the edge takes one source of country data and refuses to start with two", where, geoIPEnv, geoIPMMDBEnv)
	case len(tor) == 0 && mmdb == "":
		p.add("%s: neither %s nor %s: clicks would carry no country (the image holds the IPFire data at %s)", where, geoIPEnv, geoIPMMDBEnv, imageDir)
	}
	for _, f := range tor {
		if !path.IsAbs(f) {
			p.add("%s: %s=%s: want an absolute path", where, geoIPEnv, f)
			continue
		}
		if ok, _ := mounted(f); ok {
			continue
		}
		if imageDir == "" || (f != imageDir && path.Dir(f) != imageDir) {
			p.add("%s: %s=%s is neither the image's country data (%s) nor under a volume mount: the edge would refuse to start", where, geoIPEnv, f, imageDir)
		}
	}
	if mmdb != "" {
		ok, ro := mounted(mmdb)
		switch {
		case !path.IsAbs(mmdb):
			p.add("%s: %s=%s: want an absolute path", where, geoIPMMDBEnv, mmdb)
		case !ok:
			p.add("%s: %s=%s is under no volume mount: the edge would refuse to start", where, geoIPMMDBEnv, mmdb)
		case !ro:
			p.add("%s: %s=%s: mount it read-only", where, geoIPMMDBEnv, mmdb)
		}
	}
	return p
}

// checkGeoIP is the Kubernetes check.
func checkGeoIP(t testing.TB, c *cluster) problems {
	imageDir, p := imageGeoIP(readDockerfile(t))
	for _, e := range c.edgelinkContainers(t) {
		if e.image != "edgelink/edge" {
			continue
		}
		where := fmt.Sprintf("%s container %s", e.w, e.ct.Name)
		env, err := c.containerEnv(e.ct)
		if err != nil {
			p.add("%s: %v", where, err)
			continue
		}
		ct := e.ct
		p = append(p, geoIPProblems(where, env, imageDir, func(f string) (bool, bool) {
			m, _ := mountOf(ct, f)
			return m != nil, m != nil && m.ReadOnly
		})...)
	}
	return p
}

// checkComposeGeoIP is the compose check.
func checkComposeGeoIP(proj *types.Project, df *dockerfile) problems {
	imageDir, p := imageGeoIP(df)
	for _, name := range proj.ServiceNames() {
		svc := proj.Services[name]
		if img, _ := imageName(svc.Image); img != "edgelink/edge" {
			continue
		}
		env := map[string]string{}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		p = append(p, geoIPProblems("compose service "+name, env, imageDir, func(f string) (bool, bool) {
			for _, v := range svc.Volumes {
				if v.Target == f || strings.HasPrefix(f, strings.TrimSuffix(v.Target, "/")+"/") {
					return true, v.ReadOnly
				}
			}
			return false, false
		})...)
	}
	return p
}

// TestGeoIPCatchesMistakes breaks the settings one way at a time.
func TestGeoIPCatchesMistakes(t *testing.T) {
	const img = "/usr/share/edgelink/geoip"
	mounts := map[string]bool{"/etc/edgelink/geoip": true, "/srv/rw": false}
	mounted := func(f string) (bool, bool) {
		for m, ro := range mounts {
			if strings.HasPrefix(f, m+"/") {
				return true, ro
			}
		}
		return false, false
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		want string // "" passes
	}{
		{"image data", map[string]string{geoIPEnv: img}, ""},
		{"image files", map[string]string{geoIPEnv: img + "/geoip," + img + "/geoip6"}, ""},
		{"mounted mmdb, tor cleared", map[string]string{geoIPEnv: "", geoIPMMDBEnv: "/etc/edgelink/geoip/c.mmdb"}, ""},
		{"mounted tor files", map[string]string{geoIPEnv: "/etc/edgelink/geoip/x"}, ""},
		{"none", map[string]string{}, "clicks would carry no country"},
		{"both", map[string]string{geoIPEnv: img, geoIPMMDBEnv: "/etc/edgelink/geoip/c.mmdb"}, "both EDGELINK_EDGE_GEOIP and EDGELINK_EDGE_GEOIP_MMDB are set"},
		{"not in the image", map[string]string{geoIPEnv: "/usr/share/tor"}, "neither the image's country data"},
		{"relative", map[string]string{geoIPEnv: "geoip"}, "want an absolute path"},
		{"mmdb unmounted", map[string]string{geoIPMMDBEnv: "/data/c.mmdb"}, "under no volume mount"},
		{"mmdb writable", map[string]string{geoIPMMDBEnv: "/srv/rw/c.mmdb"}, "mount it read-only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := geoIPProblems("edge", c.env, img, mounted)
			switch {
			case c.want == "" && len(p) > 0:
				t.Errorf("problems %v, want none", p)
			case c.want != "" && !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }):
				t.Errorf("problems %v, want one saying %q", p, c.want)
			}
		})
	}
	// A Dockerfile whose edge image lacks the data.
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ old, new string }{
		{"COPY --from=geoip /out/geoip /usr/share/edgelink/geoip\n", ""},
		{"apt-get download -q tor-geoipdb", "apt-get install -q -y tor"},
	} {
		if strings.Count(string(b), m.old) != 1 {
			t.Fatalf("the Dockerfile holds %q other than once: update this mutation", m.old)
		}
		df, err := parseDockerfile(strings.Replace(string(b), m.old, m.new, 1))
		if err != nil {
			t.Fatal(err)
		}
		if dir, p := imageGeoIP(df); dir != "" || len(p) == 0 {
			t.Errorf("after replacing %q: image data %q, problems %v; want none found, and said", m.old, dir, p)
		}
	}
	if dir, p := imageGeoIP(readDockerfile(t)); dir != img || len(p) > 0 {
		t.Errorf("the Dockerfile's edge image holds its country data at %q (%v), want %s", dir, p, img)
	}
}

// TestKubernetesGeoIPOverlay swaps the image's country data for an .mmdb
// as deploy/README.md tells an operator to: an overlay mounts a volume of
// the operator's (here a PersistentVolumeClaim) read-only into the edges,
// clears EDGELINK_EDGE_GEOIP and names the file in EDGELINK_EDGE_GEOIP_MMDB.
func TestKubernetesGeoIPOverlay(t *testing.T) {
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, kubernetesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := `resources:
  - ` + base + `
patches:
  - patch: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: edge-config
      data:
        EDGELINK_EDGE_GEOIP: ""
        EDGELINK_EDGE_GEOIP_MMDB: /etc/edgelink/geoip/GeoLite2-Country.mmdb
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: edge
      spec:
        template:
          spec:
            containers:
              - name: edge
                volumeMounts:
                  - name: geoip
                    mountPath: /etc/edgelink/geoip
                    readOnly: true
            volumes:
              - name: geoip
                persistentVolumeClaim:
                  claimName: edgelink-geoip
                  readOnly: true
`
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	c, p := render(t, overlay)
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	p = append(p, checkGeoIP(t, c)...)
	p = append(p, checkCommandLines(t, c)...)
	p = append(p, checkCodeKeys(t, c)...)
	p.report(t)
	var mounted bool
	for _, e := range c.edgelinkContainers(t) {
		if e.image == "edgelink/edge" {
			m, _ := mountOf(e.ct, "/etc/edgelink/geoip/GeoLite2-Country.mmdb")
			mounted = m != nil && slices.ContainsFunc(e.w.template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == m.Name && v.PersistentVolumeClaim != nil
			})
		}
	}
	if !mounted {
		t.Error("the overlay's edge does not mount the claim at /etc/edgelink/geoip")
	}
}

// TestComposeGeoIPMMDB merges geoip-mmdb.yaml over compose.yaml as
// deploy/README.md says: the edge takes the operator's file, bind-mounted
// read-only, and the image's data is cleared; without GEOIP_MMDB_FILE the
// merge refuses to load, naming the variable.
func TestComposeGeoIPMMDB(t *testing.T) {
	dir := filepath.Dir(composeFile(t))
	files := []string{composeFile(t), filepath.Join(dir, "geoip-mmdb.yaml")}
	load := func(env []string) (*types.Project, error) {
		opts, err := cli.NewProjectOptions(files, cli.WithName("edgelink"), cli.WithEnv(env))
		if err != nil {
			return nil, err
		}
		return opts.LoadProject(context.Background())
	}
	if _, err := load(nil); err == nil || !strings.Contains(err.Error(), "GEOIP_MMDB_FILE") {
		t.Errorf("loading geoip-mmdb.yaml without GEOIP_MMDB_FILE: %v; want it refused, naming the variable", err)
	}
	mmdb := filepath.Join(t.TempDir(), "GeoLite2-Country.mmdb")
	proj, err := load([]string{"GEOIP_MMDB_FILE=" + mmdb})
	if err != nil {
		t.Fatal(err)
	}
	df, tag := readDockerfile(t), kustomizeTag(t)
	checkCompose(t, proj, df, tag).report(t)
	edge := proj.Services["edge"]
	if v := edge.Environment[geoIPMMDBEnv]; v == nil || *v != "/etc/edgelink/geoip/country.mmdb" {
		t.Errorf("edge %s = %v, want the mounted file", geoIPMMDBEnv, v)
	}
	if !slices.ContainsFunc(edge.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Source == mmdb && v.ReadOnly }) {
		t.Errorf("edge volumes %+v: want %s bind-mounted read-only", edge.Volumes, mmdb)
	}
}
