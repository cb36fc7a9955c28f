package pgserver

import (
	"context"
	"strings"
	"time"

	"github.com/edgelink/edgelink/internal/retry"
)

// Restart backoff: the first attempt waits restartMin (after a kill -9,
// PostgreSQL needs a moment before crash recovery can begin), then the
// wait doubles up to restartMax, so a server that cannot start (a full
// disk, a broken config) is retried without a busy loop.
const (
	restartMin = 250 * time.Millisecond
	restartMax = 30 * time.Second
)

// supervise starts the supervisor of the server now running. Only
// unsupervise ends it; the caller holds no lock.
func (s *Server) supervise() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.superStop, s.superDone = cancel, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		s.watch(ctx)
	}()
}

// unsupervise ends the supervisor, if one runs, and waits for it: once it
// returns, nothing but the caller starts the server. A start the
// supervisor was making is finished first (within startOn's own bound),
// so that the caller's Stop can then shut that server down cleanly.
func (s *Server) unsupervise() {
	s.mu.Lock()
	cancel, done := s.superStop, s.superDone
	s.superStop, s.superDone = nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// watch waits for the postmaster to exit and starts it again, until ctx
// ends. Stop and Kill end ctx before they signal the server, so every exit
// watch sees is one nobody asked for.
func (s *Server) watch(ctx context.Context) {
	for {
		s.mu.Lock()
		cmd, exited, tail := s.cmd, s.exited, s.tail
		s.mu.Unlock()
		if cmd == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
		}
		s.mu.Lock()
		s.cmd = nil
		s.mu.Unlock()
		s.log.Error("PostgreSQL exited; restarting it", "pid", cmd.Process.Pid, "status", cmd.ProcessState.String(),
			"port", s.Port(), "data", s.data, "output", lastLines(tail.String(), 5))
		if !s.restart(ctx) {
			return
		}
	}
}

// restart starts the server on its port until it runs (true) or ctx ends
// (false), logging each failed attempt with the wait before the next.
func (s *Server) restart(ctx context.Context) bool {
	b := retry.NewBackoff(restartMin, restartMax)
	for attempt := 1; ; attempt++ {
		wait := time.NewTimer(b.Next())
		select {
		case <-ctx.Done():
			wait.Stop()
			return false
		case <-wait.C:
		}
		err := s.start(context.WithoutCancel(ctx))
		if err == nil {
			s.mu.Lock()
			pid := s.cmd.Process.Pid
			s.mu.Unlock()
			s.log.Warn("PostgreSQL restarted", "pid", pid, "port", s.Port(), "attempt", attempt)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.log.Warn("PostgreSQL restart failed; trying again", "attempt", attempt, "err", err)
	}
}

// lastLines is the last n lines of out, for a log line.
func lastLines(out string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
