package measure

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Group owns the processes a benchmark starts. Each runs in its own process
// group, so stopping it stops its children too (nginx's workers). Stop
// stops all of them; call it on every exit path, SIGINT included. Safe for
// concurrent use.
type Group struct {
	mu    sync.Mutex
	procs []*Proc
	log   io.Writer
}

// NewGroup returns a group that writes started commands to log.
func NewGroup(log io.Writer) *Group { return &Group{log: log} }

// Proc is one started process.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Argv []string // as started, taskset included
	done chan struct{}
	err  error
}

// PID is the process's id (taskset execs the program, so it is the
// program's id too).
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Err is the process's exit error, once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Pinned prefixes argv with taskset when cpus is not empty.
func Pinned(cpus string, argv ...string) []string {
	if cpus == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpus}, argv...)
}

// Start starts argv in its own process group. stdout and stderr may be nil.
func (g *Group) Start(name string, argv []string, dir string, env []string, stdout, stderr io.Writer) (*Proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if g.log != nil {
		fmt.Fprintf(g.log, "started %s (pid %d): %s\n", name, cmd.Process.Pid, Quote(argv))
	}
	p := &Proc{Name: name, Cmd: cmd, Argv: argv, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	g.procs = append(g.procs, p)
	return p, nil
}

// Stop stops one process group: SIGTERM, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) {
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that outlived their leader (none expected) go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// Stop stops every process of the group, newest first.
func (g *Group) Stop() {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(5 * time.Second)
	}
}

// Forget drops a process the caller stopped itself.
func (g *Group) Forget(p *Proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.procs {
		if q == p {
			g.procs = append(g.procs[:i], g.procs[i+1:]...)
			return
		}
	}
}

// SetAffinity pins every thread of every process in pids to cpus (taskset
// -a -p); an empty cpus means all CPUs.
func SetAffinity(pids []int, cpus string) error {
	if cpus == "" {
		cpus = "0-" + strconv.Itoa(numCPU()-1)
	}
	var errs []error
	for _, pid := range pids {
		out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("taskset %d: %w: %s", pid, err, out))
		}
	}
	return errors.Join(errs...)
}

func numCPU() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err == nil {
		// "0-1" or "0"
		s := string(b)
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] == '-' {
				n, err := strconv.Atoi(trimNL(s[i+1:]))
				if err == nil {
					return n + 1
				}
			}
		}
	}
	return 1
}

func trimNL(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}

// Quote renders argv as a shell command line.
func Quote(argv []string) string {
	var b []byte
	for i, a := range argv {
		if i > 0 {
			b = append(b, ' ')
		}
		safe := a != ""
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c == '=' || c == ',' || c == '@' || c == '%') {
				safe = false
				break
			}
		}
		if safe {
			b = append(b, a...)
		} else {
			b = strconv.AppendQuote(b, a)
		}
	}
	return string(b)
}
