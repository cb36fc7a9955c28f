package allinone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Stack is Run in the background: the stack as it printed itself ready.
type Stack struct {
	Ready
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// readyWithin bounds a start on a busy machine (PostgreSQL's first initdb
// included); stopWithin bounds the stop.
const (
	readyWithin = 3 * time.Minute
	stopWithin  = time.Minute
)

// Start runs the stack with o until ctx ends or Stop is called and returns
// once it serves. o.OnReady, if set, is still called.
func Start(ctx context.Context, o Options) (*Stack, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Stack{cancel: cancel, done: make(chan struct{})}
	ready := make(chan Ready, 1)
	onReady := o.OnReady
	o.OnReady = func(r Ready) {
		if onReady != nil {
			onReady(r)
		}
		ready <- r
	}
	go func() {
		defer close(s.done)
		s.err = Run(ctx, o)
	}()
	select {
	case s.Ready = <-ready:
		return s, nil
	case <-s.done:
		cancel()
		return nil, fmt.Errorf("stack failed to start: %v", s.err)
	case <-time.After(readyWithin):
		return nil, errors.Join(fmt.Errorf("stack not ready within %v", readyWithin), s.Stop())
	}
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

// Stop stops the stack and returns Run's error; a second call returns the
// same.
func (s *Stack) Stop() error {
	s.once.Do(func() {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(stopWithin):
			s.err = fmt.Errorf("stack did not stop within %v", stopWithin)
		}
	})
	return s.err
}
