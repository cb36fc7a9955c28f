package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
)

// startWithin bounds a component's start on a busy 2-core machine; stopWithin
// bounds its graceful stop.
const (
	startWithin = 2 * time.Minute
	stopWithin  = time.Minute
)

// Control is control running in this process (controlserver.Run). Its
// Stop shuts control down gracefully: it drains creates in flight.
type Control struct {
	// URL is the API's base, http://host:port.
	URL string
	*Background
}

// StartControl runs control with cfg until ctx ends or Stop is called and
// returns once its API listens (the first ID segment is loaded by then).
// An empty cfg.HTTPAddr listens on a free loopback port; cfg.OnListen, if
// set, is still called.
func StartControl(ctx context.Context, cfg controlserver.Config) (*Control, error) {
	if cfg.HTTPAddr == "" && cfg.Listener == nil {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	addr := make(chan net.Addr, 1)
	onListen := cfg.OnListen
	cfg.OnListen = func(a net.Addr) {
		if onListen != nil {
			onListen(a)
		}
		addr <- a
	}
	c := &Control{Background: Go(ctx, "control", func(ctx context.Context) error { return controlserver.Run(ctx, cfg) })}
	a, err := WaitReady(c.Background, addr, startWithin)
	if err != nil {
		return nil, err
	}
	c.URL = "http://" + a.String()
	return c, nil
}

// NewControl is StartControl for a test: it fails the test when control
// does not start and stops it when the test ends.
func NewControl(t testing.TB, cfg controlserver.Config) *Control {
	t.Helper()
	return started(t, "control", 0, func(ctx context.Context) (*Control, error) { return StartControl(ctx, cfg) }, (*Control).Stop)
}

// listening is the line control logs once its API listens.
var listening = regexp.MustCompile(`msg="control listening" addr=(\S+)`)

// ControlProcess is the control binary running as a child process.
type ControlProcess struct {
	*Process
	// URL is the API's base, http://host:port.
	URL string
}

// StartControlProcess runs the control binary bin with args (the global
// flags, then "serve" and its flags; --log-level info or lower, since the
// start is read from the log) and returns once its API listens.
func StartControlProcess(ctx context.Context, bin string, args ...string) (*ControlProcess, error) {
	p, err := StartProcess(exec.Command(bin, args...))
	if err != nil {
		return nil, err
	}
	m, err := p.WaitFor(ctx, listening, startWithin)
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("control: %w", err)
	}
	return &ControlProcess{Process: p, URL: "http://" + m[1]}, nil
}

// NewControlProcess is StartControlProcess for a test: the process is
// SIGKILLed when the test ends if it still runs, and its log is shown when
// the test failed.
func NewControlProcess(t testing.TB, bin string, args ...string) *ControlProcess {
	t.Helper()
	c, err := StartControlProcess(context.Background(), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	c.CleanupWith(t, "control")
	return c
}

// binaries are the commands built for this test process, by package path:
// a build cache, the one process-wide state here, since every test of the
// process runs the same binary. Main removes them.
var binaries struct {
	sync.Mutex
	dir   string
	built map[string]string
	errs  map[string]error
}

// Binary builds the command at package path pkg (with -race when this
// test binary has it, so a race in the child fails the test) once per test
// process and returns its path. The package's TestMain must call Main.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	binaries.Lock()
	defer binaries.Unlock()
	if binaries.built == nil {
		binaries.built, binaries.errs = map[string]string{}, map[string]error{}
	}
	if bin, ok := binaries.built[pkg]; ok {
		return bin
	}
	if err, ok := binaries.errs[pkg]; ok {
		t.Fatal(err)
	}
	bin, err := build(pkg)
	if err != nil {
		binaries.errs[pkg] = err
		t.Fatal(err)
	}
	binaries.built[pkg] = bin
	return bin
}

func build(pkg string) (string, error) {
	if binaries.dir == "" {
		if !mainCalled.Load() {
			return "", errors.New("stack: call stack.Main(m) from this package's TestMain so built binaries are removed after the tests")
		}
		dir, err := os.MkdirTemp("", "edgelink-stack-bin-")
		if err != nil {
			return "", err
		}
		binaries.dir = dir
	}
	bin := filepath.Join(binaries.dir, filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled {
		// The race-instrumented packages are already in the build cache
		// from building this test.
		args = append(args, "-race")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	if out, err := exec.Command(goTool, append(args, pkg)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// ControlBinary is Binary of control/cmd/control.
func ControlBinary(t testing.TB) string {
	t.Helper()
	return Binary(t, "github.com/edgelink/edgelink/control/cmd/control")
}
