package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/controlserver"
	"github.com/edgelink/edgelink/internal/stack"
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
	// The parent-death signal (stack.StartProcess) kills this process with
	// the test binary that started it; SIGKILL is the only way it ends.
	ctx := context.Background()
	err := controlserver.Run(ctx, controlserver.Config{
		HTTPAddr: "127.0.0.1:0", DatabaseURL: s.DatabaseURL, NATSURL: s.NATSURL, PublicURL: "http://127.0.0.1",
		StreamReplicas: s.StreamReplicas, IDStep: s.IDStep, AbandonAfter: s.AbandonAfter, Instance: s.Instance,
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		OnListen: func(a net.Addr) { fmt.Printf("listening %s\n", a) },
	})
	if ctx.Err() == nil {
		t.Fatalf("control child stopped: %v", err)
	}
}

// childControl is a control instance in a process of its own (and its own
// process group), killed with the test process.
type childControl struct {
	*stack.Process
	name, url string
}

// listening is what the control child prints once its API listens.
var listening = regexp.MustCompile(`listening (\S+)`)

func startChildControl(t testing.TB, s childSpec) *childControl {
	t.Helper()
	b, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^TestControlChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	p, err := stack.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.CleanupWith(t, "control child "+s.Instance)
	m, err := p.WaitFor(context.Background(), listening, 3*time.Minute)
	if err != nil {
		t.Fatalf("control child %s: %v", s.Instance, err)
	}
	return &childControl{Process: p, name: s.Instance, url: "http://" + m[1]}
}
