package allinone

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/edgelink/edgelink/internal/stack"
)

// Stack is Run in the background: the stack as it printed itself ready.
// Its Stop stops the stack and returns Run's error; a second call returns
// the same.
type Stack struct {
	Ready
	*stack.Background
}

// readyWithin bounds a start on a busy machine (PostgreSQL's first initdb
// included).
const readyWithin = 3 * time.Minute

// Start runs the stack with o until ctx ends or Stop is called and returns
// once it serves. o.OnReady, if set, is still called.
func Start(ctx context.Context, o Options) (*Stack, error) {
	ready := make(chan Ready, 1)
	onReady := o.OnReady
	o.OnReady = func(r Ready) {
		if onReady != nil {
			onReady(r)
		}
		ready <- r
	}
	s := &Stack{Background: stack.Go(ctx, "stack", func(ctx context.Context) error { return Run(ctx, o) })}
	var err error
	if s.Ready, err = stack.WaitReady(s.Background, ready, readyWithin); err != nil {
		return nil, err
	}
	return s, nil
}

// New is Start for a test, on free ports and, when o.DataDir is empty, in a
// folder of its own removed when the test ends (not t.TempDir: PostgreSQL,
// run as its own user, must be able to enter every folder above its data).
// The stack stops when the test ends; a stop with an error fails the test.
func New(t testing.TB, o Options) *Stack {
	t.Helper()
	if o.DataDir == "" {
		dir, err := os.MkdirTemp("", "edgelink-local-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		o.DataDir = dir
	}
	if o.ControlAddr == "" {
		o.ControlAddr = "127.0.0.1:0"
	}
	if o.EdgeAddr == "" {
		o.EdgeAddr = "127.0.0.1:0"
	}
	if o.NATSPort == 0 {
		o.NATSPort = -1
	}
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stack stopped with: %v", err)
		}
	})
	return s
}
