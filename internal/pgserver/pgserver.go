// Package pgserver runs a PostgreSQL server from the machine's own binaries in a
// directory the caller owns. Tests start one per process with it, and the
// local all-in-one mode keeps its data in the project's .data folder.
//
// The postmaster runs as a direct child (not daemonized by pg_ctl) in its own
// process group with a parent-death signal, so a crashed or killed parent
// never leaves a server behind. Once it exits, whatever of its group is
// left is killed too: no backend outlives its postmaster to hold the
// shared memory a new one needs.
//
// A server can be supervised (Config.Supervise): started again whenever
// it exits other than by Stop or Kill. Start keeps the port stable for a
// folder (remembered in Dir/port) and recovers a lock file a crashed run
// left (lockfile.go).
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/edgelink/edgelink/internal/atomicfile"
	"github.com/edgelink/edgelink/internal/freeport"
)

// InstallHint is what to do when the server binaries are missing.
const InstallHint = "install PostgreSQL server binaries with: apt-get update && apt-get install -y postgresql"

// Config says where and how to run the server.
type Config struct {
	// Dir holds the cluster (Dir/data) and its socket. It is created when
	// missing; an existing cluster in it is reused as is.
	Dir string
	// Port to listen on at 127.0.0.1; 0 takes the port the last Start in
	// Dir remembered when it is free, else a free one.
	Port int
	// Fast turns off fsync and full-page writes: for throwaway test clusters
	// only, since a crash then loses data.
	Fast bool
	// Settings are extra "name=value" server settings (-c flags).
	Settings []string
	// Log receives the server's output; nil discards it.
	Log io.Writer
	// Supervise starts the server again, on the same port and data,
	// whenever the postmaster exits other than by Stop or Kill (a crash,
	// the OOM killer, a kill -9 by hand), with a backoff between failed
	// attempts.
	Supervise bool
	// Logger receives a line for each unexpected exit and restart and for
	// a stale lock file removed; nil discards them.
	Logger *slog.Logger
}

// Server is a running postmaster. Its methods are safe for concurrent use.
type Server struct {
	cfg  Config
	log  *slog.Logger
	bin  string
	dir  string
	data string
	sock string
	cred *syscall.Credential

	mu     sync.Mutex
	port   int
	cmd    *exec.Cmd     // nil once stopped, or exited under supervision
	exited chan struct{} // closed when cmd has exited
	tail   *tailBuffer   // cmd's last output
	// The supervisor, while one runs (supervise.go).
	superStop context.CancelFunc
	superDone chan struct{}
}

// Start initializes the cluster if needed and starts the server, returning
// once it accepts connections. It fails with ErrRunning when a PostgreSQL
// it did not start already runs on the folder's data.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, _, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := s.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.startRemembered(ctx); err != nil {
		return nil, err
	}
	if cfg.Supervise {
		s.supervise()
	}
	return s, nil
}

// portFile remembers the port of the last start in Dir, so a folder's
// database URL stays the same from one run to the next.
const portFile = "port"

// startRemembered starts on cfg.Port, else on the port remembered in Dir
// when it is free, else on a free one, and remembers the port it got.
func (s *Server) startRemembered(ctx context.Context) error {
	s.port = s.cfg.Port
	started := false
	if s.port == 0 {
		if port, ok := s.rememberedPort(); ok {
			err := s.startOn(ctx, port)
			switch {
			case err == nil:
				started = true
			case errors.Is(err, errPortTaken):
				s.log.Warn("the port PostgreSQL had last is taken; picking another, so its database URL changes", "port", port, "dir", s.dir)
			default:
				return err
			}
		}
	}
	if !started {
		if err := s.start(ctx); err != nil {
			return err
		}
	}
	if err := atomicfile.Write(filepath.Join(s.dir, portFile), []byte(strconv.Itoa(s.Port())+"\n")); err != nil {
		return fmt.Errorf("pgserver: remember the port: %w", err)
	}
	return nil
}

func (s *Server) rememberedPort() (int, bool) {
	b, err := os.ReadFile(filepath.Join(s.dir, portFile))
	if err != nil {
		return 0, false
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return port, err == nil && port > 0 && port < 1<<16
}

// prepare makes cfg.Dir ready for a server run as the right user.
func prepare(cfg Config) (*Server, string, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, "", err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, "", err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, bin: bin, dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock")}
	if err := os.MkdirAll(s.sock, 0o755); err != nil {
		return nil, "", fmt.Errorf("pgserver: %w", err)
	}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if s.cred, err = postgresUser(); err != nil {
			return nil, "", err
		}
		if err := reachable(dir); err != nil {
			return nil, "", err
		}
		if err := chownTree(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, "", err
		}
	}
	return s, dir, nil
}

// BinDir finds the directory holding initdb and postgres.
func BinDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgMajor(versions[i]) > pgMajor(versions[j]) })
	candidates = append(candidates, versions...)
	if p, err := exec.LookPath("postgres"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, dir := range candidates {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgserver: initdb and postgres not found (looked in pg_config --bindir, /usr/lib/postgresql/*/bin, PATH): %s", InstallHint)
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Port is the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// DataDir is the cluster's data directory.
func (s *Server) DataDir() string { return s.data }

// DSN returns a connection string for database db as the superuser.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port(), db)
}

// Stop shuts the server down cleanly (fast shutdown), killing it if it has not
// stopped within 30 seconds. Stopping a stopped server is a no-op. A
// supervised server stays down: the supervisor ends first.
func (s *Server) Stop() error {
	s.unsupervise()
	return s.signal(syscall.SIGINT, 30*time.Second)
}

// Kill stops the server with SIGKILL on its whole process group, as a crash
// would: no checkpoint, recovery on the next start. Unlike a crash, it
// also ends supervision, so the server stays down until Restart.
func (s *Server) Kill() error {
	s.unsupervise()
	return s.signal(syscall.SIGKILL, 10*time.Second)
}

// Restart starts a stopped, killed or crashed server again on the same
// port and data, and supervises it again if so configured. After a kill,
// Postgres needs a moment before it can run crash recovery, so it retries
// until ctx is done.
func (s *Server) Restart(ctx context.Context) error {
	s.unsupervise()
	s.mu.Lock()
	running := s.cmd != nil && !isClosed(s.exited)
	if !running {
		s.cmd = nil
	}
	s.mu.Unlock()
	if running {
		if s.cfg.Supervise {
			s.supervise()
		}
		return errors.New("pgserver: restart of a running server")
	}
	var err error
	for {
		if err = s.start(ctx); err == nil {
			if s.cfg.Supervise {
				s.supervise()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgserver: restart: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *Server) signal(sig syscall.Signal, grace time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || isClosed(exited) {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("pgserver: server did not stop within %s after %s; killed", grace, sig)
	}
}

func (s *Server) initdb(ctx context.Context) error {
	args := []string{"-D", s.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"}
	if s.cfg.Fast {
		args = append(args, "--no-sync")
	}
	if err := s.run(ctx, "initdb", args...); err != nil {
		_ = os.RemoveAll(s.data) // a half-made cluster would be "reused" next time
		return fmt.Errorf("pgserver: initdb: %w", err)
	}
	return nil
}

// run runs the PostgreSQL program name as the cluster's owner until it
// exits; its error carries the program's output.
func (s *Server) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

// start runs the postmaster on s.port, or on a port it picks when s.port is
// 0. A picked port can be taken by another process before postgres binds
// it; then it picks another, a few times.
func (s *Server) start(ctx context.Context) error {
	if port := s.Port(); port != 0 {
		return s.startOn(ctx, port)
	}
	var err error
	for range 5 {
		// Below the ephemeral range (see internal/freeport), where no
		// outgoing connection takes the port before postgres binds it or
		// while a stopped server waits for its Restart.
		ports, perr := freeport.Ports(1)
		if perr != nil {
			return fmt.Errorf("pgserver: %w", perr)
		}
		port := ports[0]
		if err = s.startOn(ctx, port); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// errPortTaken is startOn's error when postgres could not bind its port.
var errPortTaken = errors.New("pgserver: port taken")

func (s *Server) startOn(ctx context.Context, port int) error {
	args := []string{
		"-D", s.data,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + s.sock,
		"-c", "max_connections=300",
	}
	if s.cfg.Fast {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	for _, kv := range s.cfg.Settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), args...)
	logw := s.cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stdout = io.MultiWriter(logw, tail)
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		Setpgid:    true,
		// SIGQUIT is Postgres's immediate shutdown: if we die, it goes too.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := s.clearStaleLock(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		// Backends left behind by a postmaster that died would keep the
		// shared memory a new postmaster waits for; they serve no one.
		// The group keeps its id while any of them lives.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(exited)
	}()

	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		if s.ready(ctx, port) {
			break
		}
		select {
		case <-exited:
			if log := tail.String(); strings.Contains(log, "could not create any TCP/IP sockets") {
				return fmt.Errorf("%w: postgres could not listen on port %d:\n%s", errPortTaken, port, log)
			}
			return fmt.Errorf("pgserver: postgres exited during start:\n%s", tail.String())
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return ctx.Err()
		case <-deadline.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("pgserver: postgres not ready after 60s:\n%s", tail.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.mu.Lock()
	s.port, s.cmd, s.exited, s.tail = port, cmd, exited, tail
	s.mu.Unlock()
	return nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ready asks pg_isready, which distinguishes "starting up" and "in recovery"
// from "accepting connections" where a bare TCP dial cannot. It asks on the
// server's own socket directory, not on the TCP port: if another process
// holds the port, a server there must not pass for this one (postgres
// opens its Unix socket only after it has bound its TCP port).
func (s *Server) ready(ctx context.Context, port int) bool {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "pg_isready"), "-q", "-h", s.sock, "-p", strconv.Itoa(port), "-U", "postgres", "-d", "postgres", "-t", "2")
	return cmd.Run() == nil
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root needs the 'postgres' user to own the cluster (%v): %s", err, InstallHint)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachable checks that every ancestor of dir lets others search it: the
// server runs as 'postgres' and must be able to walk down to its data.
func reachable(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgserver: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("pgserver: the server runs as user 'postgres', which cannot enter %s (mode %v); move the data folder or run: chmod o+x %s", p, fi.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func chownTree(dir string, uid, gid int) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
