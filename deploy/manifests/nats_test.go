package manifests_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	corev1 "k8s.io/api/core/v1"
)

// TestNATSConfig reads the StatefulSet's nats.conf with nats-server's own
// parser (unknown fields are errors there), checks that its ports, folders
// and pid file agree with the pod, then runs a server from it (alone: the
// routes and ports are the only changes) and asks it the probes' paths.
func TestNATSConfig(t *testing.T) {
	c, p := render(t, kubernetesDir(t))
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	sts := c.workload("StatefulSet", "nats")
	if sts == nil || c.configMaps["nats-config"] == nil {
		t.Fatal("no StatefulSet nats or ConfigMap nats-config")
	}
	ct := sts.template.Spec.Containers[0]
	mounts := map[string]string{} // volume → path
	for _, m := range ct.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	var confDir string
	for _, v := range sts.template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == "nats-config" {
			confDir = mounts[v.Name]
		}
	}
	if want := []string{"nats-server", "--config", path.Join(confDir, "nats.conf")}; !slices.Equal(ct.Command, want) {
		t.Errorf("command %v, want %v (where the ConfigMap is mounted)", ct.Command, want)
	}

	// The server name comes from the pod's name, through the environment.
	t.Setenv("SERVER_NAME", sts.name+"-0")
	opts := &server.Options{}
	if err := opts.ProcessConfigString(c.configMaps["nats-config"].Data["nats.conf"]); err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	port := func(name string) int { return containerPort(ct, name, 0) }
	checks := []struct {
		what      string
		got, want any
	}{
		{"server_name", opts.ServerName, sts.name + "-0"},
		{"jetstream", opts.JetStream, true},
		{"client port", opts.Port, port("client")},
		{"monitor port", opts.HTTPPort, port("monitor")},
		{"cluster port", opts.Cluster.Port, port("cluster")},
		{"routes", len(opts.Routes), int(sts.replicas)},
		{"store_dir (the volume claim)", opts.StoreDir, mounts["data"]},
		{"pid_file's folder (a mounted volume)", slices.Contains(mapValues(mounts), filepath.Dir(opts.PidFile)), true},
	}
	for _, ck := range checks {
		if fmt.Sprint(ck.got) != fmt.Sprint(ck.want) {
			t.Errorf("nats.conf %s = %v, want %v", ck.what, ck.got, ck.want)
		}
	}
	for _, pvc := range sts.sts.Spec.VolumeClaimTemplates {
		if size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; pvc.Name == "data" && opts.JetStreamMaxStore >= size.Value() {
			t.Errorf("max_file_store %d is not below the volume's %s: the disk would fill before JetStream refuses", opts.JetStreamMaxStore, size.String())
		}
	}
	if pre := ct.Lifecycle; pre == nil || pre.PreStop == nil || pre.PreStop.Exec == nil ||
		!slices.Contains(pre.PreStop.Exec.Command, "ldm="+opts.PidFile) {
		t.Errorf("preStop must signal lame-duck mode through the pid file %s", opts.PidFile)
	}

	var paths []string
	for _, pr := range []*corev1.Probe{ct.StartupProbe, ct.ReadinessProbe, ct.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.StrVal != "monitor" {
			t.Errorf("probe %+v: want an HTTP GET on the monitor port", pr)
			continue
		}
		paths = append(paths, pr.HTTPGet.Path)
	}
	monitor := runNATS(t, opts)
	for _, p := range paths {
		if status, body := get(t, monitor+p); status != http.StatusOK {
			t.Errorf("GET %s on a healthy server: %d %s", p, status, body)
		}
	}
}

// runNATS starts a lone server from opts on free ports with its store in a
// temporary folder and returns its monitoring URL.
func runNATS(t *testing.T, opts *server.Options) string {
	t.Helper()
	o := *opts
	o.Host, o.Port, o.HTTPHost, o.HTTPPort = "127.0.0.1", -1, "127.0.0.1", -1
	o.Cluster, o.Routes, o.RoutesStr = server.ClusterOpts{}, nil, ""
	o.StoreDir, o.PidFile = t.TempDir(), filepath.Join(t.TempDir(), "nats.pid")
	o.NoSigs, o.NoLog = true, true
	s, err := server.NewServer(&o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server not ready within 30s")
	}
	return "http://" + s.MonitorAddr().String()
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode, string(b)
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestComposeNATS parses the compose file's nats command with nats-server's
// own flag parser, and runs a server from it to answer the healthcheck.
func TestComposeNATS(t *testing.T) {
	proj, err := loadCompose(composeFile(t))
	if err != nil {
		t.Fatal(err)
	}
	svc := proj.Services["nats"]
	cmd := []string(svc.Command)
	if len(cmd) == 0 || cmd[0] != "nats-server" {
		t.Fatalf("nats command %v: want nats-server and its flags", cmd)
	}
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	noop := func() {}
	opts, err := server.ConfigureOptions(fs, cmd[1:], noop, noop, noop)
	if err != nil {
		t.Fatalf("nats-server %v: %v", cmd[1:], err)
	}
	if !opts.JetStream {
		t.Error("JetStream is not enabled")
	}
	if !slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == opts.StoreDir }) {
		t.Errorf("store dir %q is not a volume: the streams would not survive a restart", opts.StoreDir)
	}
	hc := svc.HealthCheck
	if hc == nil || len(hc.Test) < 2 {
		t.Fatal("nats has no healthcheck")
	}
	hcURL := hc.Test[len(hc.Test)-1]
	u, err := url.Parse(hcURL)
	if err != nil || u.Port() != fmt.Sprint(opts.HTTPPort) {
		t.Fatalf("healthcheck %v: want the monitoring port %d (%v)", hc.Test, opts.HTTPPort, err)
	}
	monitor := runNATS(t, opts)
	if status, body := get(t, monitor+strings.TrimPrefix(hcURL, u.Scheme+"://"+u.Host)); status != http.StatusOK {
		t.Errorf("healthcheck %s on a healthy server: %d %s", hcURL, status, body)
	}
}
