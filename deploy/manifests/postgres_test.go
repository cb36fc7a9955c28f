package manifests_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgelink/edgelink/internal/pgserver"
	"github.com/edgelink/edgelink/internal/poll"
)

// TestPostgresReplicationScripts runs the manifests' own PostgreSQL setup
// on real servers from this machine's binaries: the primary starts with the
// StatefulSet's settings, the init script (10-replication.sh) creates the
// replication role and slot and opens pg_hba to it, and the replica's
// basebackup.sh seeds an empty folder, which then starts as a hot standby
// with the replica StatefulSet's settings and streams through its slot,
// authenticating with the password (no trust rule covers replication here).
// A row written on the primary is read back from the replica.
func TestPostgresReplicationScripts(t *testing.T) {
	c, p := render(t, kubernetesDir(t))
	if c == nil {
		p.report(t)
		t.FailNow()
	}
	primarySts, replicaSts := c.workload("StatefulSet", "postgres-primary"), c.workload("StatefulSet", "postgres-replica")
	if primarySts == nil || replicaSts == nil {
		t.Fatal("no StatefulSets postgres-primary and postgres-replica")
	}
	scripts := c.configMaps["postgres-init"]
	if scripts == nil {
		t.Fatal("no ConfigMap postgres-init")
	}
	for _, w := range []*workload{primarySts, replicaSts} {
		for _, v := range w.template.Spec.Volumes {
			if v.ConfigMap != nil && v.ConfigMap.Name == "postgres-init" && deref(v.ConfigMap.DefaultMode, 0o644)&0o111 == 0 {
				// The image's entrypoint sources a script that is not
				// executable, inside its own shell; the init container
				// runs basebackup.sh directly.
				t.Errorf("%s volume %s: mode %o, want the scripts executable", w, v.Name, deref(v.ConfigMap.DefaultMode, 0o644))
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := pgserver.BinDir()
	if err != nil {
		t.Fatalf("%v (%s)", err, pgserver.InstallHint)
	}
	const password = "test-replication-secret"

	primaryDir := pgDir(t)
	primary, err := pgserver.Start(ctx, pgserver.Config{Dir: primaryDir, Fast: true,
		Settings: settings(t, primarySts.template.Spec.Containers[0])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Stop() })
	// The test's own superuser access over TCP; nothing else is trusted, so
	// replication must authenticate as the role the script makes.
	hba := "local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(primary.DataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	pgEnv := func(extra ...string) []string {
		return append([]string{"PATH=" + bin + ":" + os.Getenv("PATH")}, extra...)
	}
	// As the image's entrypoint runs it: on the socket, as POSTGRES_USER.
	runScript(t, scripts.Data["10-replication.sh"], nil, pgEnv(
		"POSTGRES_USER=postgres", "POSTGRES_DB=postgres", "PGDATA="+primary.DataDir(),
		"PGHOST="+filepath.Join(primaryDir, "sock"), "PGPORT="+strconv.Itoa(primary.Port()),
		"REPLICATION_PASSWORD="+password))
	if _, err := primary.Query(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}

	replicaDir := pgDir(t)
	cred := postgresCredential(t)
	if cred != nil {
		if err := os.Chown(replicaDir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	seedEnv := pgEnv("PGDATA="+filepath.Join(replicaDir, "data"), "HOSTNAME="+replicaSts.name+"-0",
		"PRIMARY_HOST=127.0.0.1", "PRIMARY_PORT="+strconv.Itoa(primary.Port()), "REPLICATION_PASSWORD="+password)
	runScript(t, scripts.Data["basebackup.sh"], cred, seedEnv)
	if out := runScript(t, scripts.Data["basebackup.sh"], cred, seedEnv); !strings.Contains(out, "not seeding") {
		t.Errorf("basebackup.sh over a seeded folder said %q, want it to leave the folder alone", out)
	}

	replica, err := pgserver.Start(ctx, pgserver.Config{Dir: replicaDir, Fast: true,
		Settings: settings(t, replicaSts.template.Spec.Containers[0])})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Stop() })

	if got, err := replica.Query(ctx, "SELECT pg_is_in_recovery()"); err != nil || got != "t" {
		t.Fatalf("replica in recovery: %q, %v; want a standby", got, err)
	}
	slot := strings.ReplaceAll(replicaSts.name+"-0", "-", "_")
	waitQuery(t, ctx, primary, "SELECT application_name || ' ' || state FROM pg_stat_replication", slot+" streaming")
	waitQuery(t, ctx, primary, "SELECT active FROM pg_replication_slots WHERE slot_name = '"+slot+"'", "t")
	if _, err := primary.Query(ctx, "CREATE TABLE seen (v text); INSERT INTO seen VALUES ('written on the primary')"); err != nil {
		t.Fatal(err)
	}
	if err := replica.WaitReplayed(ctx, primary); err != nil {
		t.Fatal(err)
	}
	if got, err := replica.Query(ctx, "SELECT v FROM seen"); err != nil || got != "written on the primary" {
		t.Errorf("replica reads %q, %v; want the primary's row", got, err)
	}
}

// pgDir is a folder the postgres user can enter (t.TempDir's parent is
// private to the test's user), removed at the end.
func pgDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgelink-manifests-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (c *cluster) workload(kind, name string) *workload {
	for _, w := range c.workloads {
		if w.kind == kind && w.name == name {
			return w
		}
	}
	return nil
}

// settings turns a postgres container's "-c name=value" args into
// pgserver's Settings.
func settings(t *testing.T, ct corev1.Container) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(ct.Args); i++ {
		if ct.Args[i] != "-c" || i+1 == len(ct.Args) {
			t.Fatalf("container %s: args %v: want only -c name=value pairs", ct.Name, ct.Args)
		}
		i++
		out = append(out, ct.Args[i])
	}
	return out
}

// runScript runs a script from the manifests with /bin/sh, as cred when set
// (the postgres user, when the test runs as root), and fails the test if it
// fails.
func runScript(t *testing.T, script string, cred *syscall.Credential, env []string) string {
	t.Helper()
	if script == "" {
		t.Fatal("empty script")
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = env
	cmd.Dir = os.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script failed: %v\n%s\n--- script:\n%s", err, out, script)
	}
	return string(out)
}

// postgresCredential is the postgres user's, when the test runs as root
// (initdb and postgres refuse root); nil otherwise.
func postgresCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs a postgres user: %v (%s)", err, pgserver.InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// waitQuery asks sql of s until it answers want, within 90 s.
func waitQuery(t *testing.T, ctx context.Context, s *pgserver.Server, sql, want string) {
	t.Helper()
	var got string
	var err error
	if perr := poll.WaitEvery(ctx, sql, 90*time.Second, 100*time.Millisecond, func() bool {
		got, err = s.Query(ctx, sql)
		return err == nil && got == want
	}); perr != nil {
		t.Fatalf("%v: got %q (%v), want %q", perr, got, err, want)
	}
}
