package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/pgtest"
)

// Process is a child process in a process group of its own, so a kill
// takes everything it started, and killed with the process that started
// it (the parent-death signal), so a crashed test leaves nothing behind.
// Its output (stdout and stderr) goes to Log.
type Process struct {
	Cmd  *exec.Cmd
	Pid  int
	Log  *LogBuffer
	done chan struct{}
}

// StartProcess starts cmd; its SysProcAttr, Stdout and Stderr are set here.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Cmd: cmd, Log: new(LogBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p.Pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// CleanupWith makes t SIGKILL the process when the test ends, and show the
// tail of its log when the test failed.
func (p *Process) CleanupWith(t testing.TB, what string) {
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s pid %d log (tail):\n%s", what, p.Pid, p.Log.Tail(6000))
		}
	})
}

// WaitFor polls the log until re matches and returns the match; it fails
// when the process exits first or within passes.
func (p *Process) WaitFor(ctx context.Context, re *regexp.Regexp, within time.Duration) ([]string, error) {
	var m []string
	exited := false
	err := Poll(ctx, fmt.Sprintf("pid %d logs %s", p.Pid, re), within, func() bool {
		if m = re.FindStringSubmatch(p.Log.String()); m != nil {
			return true
		}
		select {
		case <-p.done:
			exited = true
			return true
		default:
			return false
		}
	})
	if m == nil && exited {
		err = fmt.Errorf("pid %d exited before it logged %s:\n%s", p.Pid, re, p.Log.Tail(4000))
	} else if err != nil {
		err = fmt.Errorf("%w:\n%s", err, p.Log.Tail(4000))
	}
	return m, err
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill is SIGKILL to the process group: no deferred function runs, no
// drain, connections are cut mid-transaction. Killing an exited process is
// harmless.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop asks the process to shut down gracefully (SIGTERM) and waits for
// it; it returns an error when it exits with another code than 0, or does
// not exit within grace (it is killed then).
func (p *Process) Stop(grace time.Duration) error {
	_ = syscall.Kill(p.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
			return fmt.Errorf("pid %d exited with %d after SIGTERM:\n%s", p.Pid, code, p.Log.Tail(4000))
		}
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("pid %d did not stop within %v of SIGTERM; killed it", p.Pid, grace)
	}
}

// mainCalled records that the test package's TestMain runs Main, which
// removes what Binary built.
var mainCalled atomic.Bool

// Main runs a test package's tests, then removes the binaries Binary
// built and stops internal/pgtest's shared server (SharedPostgres). Call it
// from TestMain.
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := pgtest.Run(m)
	binaries.Lock()
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
	binaries.Unlock()
	os.Exit(code)
}

// RunProcess runs cmd as a Process to its end (killing it when ctx ends
// first) and returns its output, and an error when it did not exit 0.
func RunProcess(ctx context.Context, cmd *exec.Cmd) (string, error) {
	p, err := StartProcess(cmd)
	if err != nil {
		return "", err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return p.Log.String(), ctx.Err()
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return p.Log.String(), fmt.Errorf("%s exited with %d", cmd.Path, code)
	}
	return p.Log.String(), nil
}
