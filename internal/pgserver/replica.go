package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StartReplica takes a base backup of the running server s (pg_basebackup
// -R, streaming the WAL the backup needs) into cfg.Dir, which must not hold
// a cluster yet, and runs it as a hot standby that streams from s
// asynchronously. It returns once the standby accepts read-only
// connections. Stop both servers when done: they are independent processes.
//
// cfg.Settings may slow the standby on purpose, e.g.
// "recovery_min_apply_delay=5s"; PauseReplay and Detach make it lag at will.
func (s *Server) StartReplica(ctx context.Context, cfg Config) (*Server, error) {
	r, dir, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(r.data, "PG_VERSION")); err == nil {
		return nil, fmt.Errorf("pgserver: replica: %s already holds a cluster", dir)
	}
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "-U", "postgres",
		"-D", r.data, "-R", "-X", "stream", "--checkpoint=fast"}
	if cfg.Fast {
		args = append(args, "--no-sync")
	}
	if err := r.run(ctx, "pg_basebackup", args...); err != nil {
		_ = os.RemoveAll(r.data)
		return nil, fmt.Errorf("pgserver: pg_basebackup from port %d: %w", s.Port(), err)
	}
	r.port = cfg.Port
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Query runs sql with psql as the superuser on database postgres and
// returns its unaligned, tuples-only output, trimmed. It needs no driver, so
// the package stays standard-library only.
func (s *Server) Query(ctx context.Context, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port()), "-U", "postgres", "-d", "postgres", "-c", sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgserver: psql on port %d: %q: %w\n%s", s.Port(), sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// PauseReplay stops the standby applying WAL (pg_wal_replay_pause): it keeps
// receiving, but reads see the past until ResumeReplay. It returns once
// replay is paused. Promoting a paused standby still applies what it
// received first; use Detach to make it miss writes for good.
func (s *Server) PauseReplay(ctx context.Context) error {
	if _, err := s.Query(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	return s.poll(ctx, "replay paused", "SELECT pg_get_wal_replay_pause_state()", "paused")
}

// ResumeReplay undoes PauseReplay.
func (s *Server) ResumeReplay(ctx context.Context) error {
	_, err := s.Query(ctx, "SELECT pg_wal_replay_resume()")
	return err
}

// Detach cuts the standby off its primary, as a network partition would:
// primary_conninfo is emptied and the WAL receiver stops, so writes on the
// primary from now on never reach it, even when it is promoted later.
func (s *Server) Detach(ctx context.Context) error {
	if _, err := s.Query(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		return err
	}
	if _, err := s.Query(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return s.poll(ctx, "WAL receiver stopped", "SELECT count(*) FROM pg_stat_wal_receiver", "0")
}

// WaitReplayed waits until the standby s has applied everything committed
// on primary before the call, so that those rows are visible on s. It
// holds for commits made with synchronous_commit=off (as Fast runs) too.
// It writes a small record to primary's WAL (a logical message, which no
// table sees) and needs primary to accept writes.
func (s *Server) WaitReplayed(ctx context.Context, primary *Server) error {
	// pg_current_wal_lsn is the primary's write position, which trails an
	// asynchronous commit until the WAL writer's next round: a standby
	// that reached it could still lack a row that was committed. A record
	// inserted now lies after every earlier commit record, and WAL is
	// replayed in order, so its end LSN covers them all. Committing it
	// with synchronous_commit=local flushes it, and so everything before
	// it, to the walsender without waiting for any synchronous standby;
	// the setting is local to this transaction.
	out, err := primary.Query(ctx, "SELECT set_config('synchronous_commit', 'local', true), "+
		"pg_logical_emit_message(true, 'pgserver', 'WaitReplayed')")
	if err != nil {
		return err
	}
	_, lsn, ok := strings.Cut(out, "|")
	if !ok || lsn == "" {
		return fmt.Errorf("pgserver: replay mark on port %d: unexpected answer %q", primary.Port(), out)
	}
	return s.poll(ctx, "replayed up to "+lsn, "SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn", "t")
}

// Promote turns the standby into a primary (pg_ctl promote, waiting until
// it accepts writes). The old primary is not touched: stop or isolate it
// first, or there are two writers.
func (s *Server) Promote(ctx context.Context) error {
	if err := s.run(ctx, "pg_ctl", "promote", "-D", s.data, "-w", "-t", "60"); err != nil {
		return fmt.Errorf("pgserver: promote: %w", err)
	}
	return s.poll(ctx, "out of recovery", "SELECT pg_is_in_recovery()", "f")
}

func (s *Server) poll(ctx context.Context, what, sql, want string) error {
	deadline := time.Now().Add(60 * time.Second)
	var got string
	var err error
	for {
		if got, err = s.Query(ctx, sql); err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: %s: not reached within 60s (last answer %q, %v)", what, got, err)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("pgserver: %s", what), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
