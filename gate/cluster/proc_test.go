package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
)

// childEnv makes the re-executed test binary run one control instance,
// configured by the JSON of childSpec.
const childEnv = "EDGELINK_GATE_CONTROL_CHILD"

type childSpec struct {
	Instance, DatabaseURL, NATSURL string
	StreamReplicas                 int
	IDStep                         uint64
	AbandonAfter                   time.Duration
}

// TestControlChild is not a test of its own: the soak re-executes the test
// binary to run control in a process it can SIGKILL (an in-process Close
// always drains, a kill does not). Without the environment variable it does
// nothing.
func TestControlChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// The parent closes our stdin when it goes: stop then, so no control
	// outlives a test binary that was itself killed.
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	err := controlserver.Run(ctx, controlserver.Config{
		HTTPAddr: "127.0.0.1:0", DatabaseURL: s.DatabaseURL, NATSURL: s.NATSURL, PublicURL: "http://edge.invalid",
		StreamReplicas: s.StreamReplicas, IDStep: s.IDStep, AbandonAfter: s.AbandonAfter, Instance: s.Instance,
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		OnListen: func(a net.Addr) { fmt.Printf("listening %s\n", a) },
	})
	if ctx.Err() == nil {
		t.Fatalf("control child stopped: %v", err)
	}
}

// childControl is a control instance in a process of its own (and its own
// process group).
type childControl struct {
	name  string
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser // held open: the child stops when it closes
	once  sync.Once
}

func startChildControl(t testing.TB, s childSpec) *childControl {
	t.Helper()
	b, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestControlChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childControl{name: s.Instance, cmd: cmd, stdin: stdin}
	t.Cleanup(c.kill)
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("control child %s exited before listening", s.Instance)
		}
		c.url = "http://" + a
	case <-time.After(3 * time.Minute):
		t.Fatalf("control child %s did not listen within 3m", s.Instance)
	}
	return c
}

// kill is SIGKILL to the child's process group: no drain, no discarding of
// segments, connections cut mid-transaction.
func (c *childControl) kill() {
	c.once.Do(func() {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		_ = c.cmd.Wait()
	})
}
