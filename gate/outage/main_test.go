package outage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// binDir holds the control binary the tests run as a child process they
// can SIGKILL; it is built on first use and removed after the tests.
var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edgelink-gate-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// controlBinary builds the control binary once per test process (so a run
// that selects none of these tests builds nothing) and returns its path.
func controlBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "control")
	buildOnce.Do(func() {
		args := []string{"build", "-o", bin}
		if raceEnabled {
			// The race-instrumented packages are already in the build
			// cache from building this test, and a race in control fails
			// the test.
			args = append(args, "-race")
		}
		args = append(args, "github.com/edgelink/edgelink/control/cmd/control")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the control binary: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// gate skips a minutes-long scenario unless the launch-gate run asked for it.
func gate(t *testing.T) {
	t.Helper()
	if os.Getenv("EDGELINK_GATE") == "" {
		t.Skip("minutes long: runs with EDGELINK_GATE=1, as `go tool task gate` does")
	}
}
