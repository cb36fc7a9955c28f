package pgserver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/logbuf"
	"github.com/edgelink/edgelink/internal/poll"
)

// tempDir is a folder the postgres user can enter (t.TempDir's parent
// is not), removed when the test ends.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgserver-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func lockPID(t *testing.T, s *Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(first)
	return pid
}

// setLockPID writes pid into s's lock file in place of the one there.
func setLockPID(t *testing.T, s *Server, pid int) {
	t.Helper()
	file := filepath.Join(s.DataDir(), "postmaster.pid")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no lock file left: %v", err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	if err := os.WriteFile(file, []byte(strconv.Itoa(pid)+"\n"+rest), 0o600); err != nil {
		t.Fatal(err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// A supervised server killed with SIGKILL (the postmaster alone, as
// kill -9 by hand or the OOM killer would) is started again on its port
// with its data, and each exit and restart is logged. Stop ends the
// supervision.
func TestSupervisedServerComesBackAfterSIGKILL(t *testing.T) {
	ctx := testContext(t)
	var log logbuf.Buffer
	s, err := Start(ctx, Config{Dir: tempDir(t), Supervise: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	psql(t, s, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	port, pid := s.Port(), lockPID(t, s)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var last string
	poll.Until(t, "a new postmaster answers", 2*time.Minute, func() bool {
		now := lockPID(t, s)
		if now == 0 || now == pid {
			return false
		}
		got, err := s.Query(ctx, "SELECT v FROM kept")
		last = got
		return err == nil
	})
	if last != "7" {
		t.Errorf("after the restart: got %q, want 7", last)
	}
	if s.Port() != port {
		t.Errorf("restarted on port %d; want %d", s.Port(), port)
	}
	// The supervisor logs once its start returns, which may be after the
	// server first answered.
	if err := poll.Wait(ctx, "the restart logged", time.Minute, func() bool {
		return strings.Contains(log.String(), "PostgreSQL restarted")
	}); err != nil {
		t.Errorf("%v:\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "PostgreSQL exited; restarting it") {
		t.Errorf("the exit is not logged:\n%s", log.String())
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	supervised := s.superDone != nil
	s.mu.Unlock()
	if supervised {
		t.Error("a supervisor still runs after Stop")
	}
	if _, err := os.Stat(filepath.Join(s.DataDir(), "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop the lock file is still there (%v): something started the server again", err)
	}
}

// A folder whose server was killed (its lock file left behind) starts
// again, on the same port and with its data, once the pid in the lock
// file has gone to another live process, which PostgreSQL alone takes for
// the lock's owner. The process the pid names is left alone.
func TestStartRecoversALockFileACrashLeft(t *testing.T) {
	for _, tc := range []struct {
		name  string
		decoy func(t *testing.T) (pid int, alive func() bool)
	}{
		{"pid of a process that is no postgres", func(t *testing.T) (int, func() bool) {
			cmd := exec.Command("sleep", "600")
			if os.Geteuid() == 0 {
				// As the cluster's owner, so PostgreSQL's own check
				// (kill 0) finds it alive.
				cred, err := postgresUser()
				if err != nil {
					t.Fatal(err)
				}
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
			return cmd.Process.Pid, func() bool { return !isClosed(exited) }
		}},
		{"pid of a postgres on another data directory", func(t *testing.T) (int, func() bool) {
			other := startServer(t, "other", func(dir string) (*Server, error) {
				return Start(testContext(t), Config{Dir: dir, Fast: true})
			})
			return lockPID(t, other), func() bool { _, err := other.Query(context.Background(), "SELECT 1"); return err == nil }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			var log logbuf.Buffer
			// Not Fast: with synchronous_commit off a kill loses the last
			// commits, which the test reads back.
			cfg := Config{Dir: tempDir(t), Logger: slog.New(slog.NewTextHandler(&log, nil))}
			s, err := Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Stop() })
			psql(t, s, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
			port := s.Port()
			if err := s.Kill(); err != nil {
				t.Fatal(err)
			}
			pid, alive := tc.decoy(t)
			setLockPID(t, s, pid)

			s2, err := Start(ctx, cfg)
			if err != nil {
				t.Fatalf("start after the crash: %v", err)
			}
			t.Cleanup(func() { _ = s2.Stop() })
			if s2.Port() != port {
				t.Errorf("started on port %d after the crash; want %d", s2.Port(), port)
			}
			if got := psql(t, s2, "SELECT v FROM kept"); got != "7" {
				t.Errorf("after the crash: got %q, want 7", got)
			}
			if !alive() {
				t.Errorf("the process the stale lock named (pid %d) is gone", pid)
			}
			if !strings.Contains(log.String(), "removed a stale postmaster.pid") {
				t.Errorf("the removal is not logged:\n%s", log.String())
			}
		})
	}
}

// A second Start on a folder whose server runs fails with ErrRunning and
// leaves the running server and its lock file alone.
func TestStartRefusesADataDirectoryInUse(t *testing.T) {
	ctx := testContext(t)
	dir := tempDir(t)
	s, err := Start(ctx, Config{Dir: dir, Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	lock := filepath.Join(s.DataDir(), "postmaster.pid")
	before, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Start(ctx, Config{Dir: dir, Fast: true})
	if !errors.Is(err, ErrRunning) {
		if s2 != nil {
			_ = s2.Stop()
		}
		t.Fatalf("second Start on %s: %v; want ErrRunning", dir, err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(lockPID(t, s))) {
		t.Errorf("the error does not name the running postmaster's pid: %v", err)
	}
	if after, err := os.ReadFile(lock); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the running server's lock file changed: %v\n%s", err, after)
	}
	if got := psql(t, s, "SELECT 1"); got != "1" {
		t.Errorf("the running server answers %q", got)
	}
}

// A folder's server gets the same port from one Start to the next, and
// another one when that port is taken, which it then remembers.
func TestStartKeepsTheFoldersPort(t *testing.T) {
	ctx := testContext(t)
	cfg := Config{Dir: tempDir(t), Fast: true}
	start := func() *Server {
		t.Helper()
		s, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop() })
		return s
	}
	s := start()
	first := s.Port()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s = start()
	if s.Port() != first {
		t.Errorf("second start on port %d; want %d, the first's", s.Port(), first)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(first))
	if err != nil {
		t.Fatal(err)
	}
	s = start()
	l.Close()
	moved := s.Port()
	if moved == first {
		t.Fatalf("started on port %d, which a listener holds", first)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s = start(); s.Port() != moved {
		t.Errorf("start after the move on port %d; want %d, the one it moved to", s.Port(), moved)
	}
}
