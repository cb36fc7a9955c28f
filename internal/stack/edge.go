package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/edgelink/edgelink/edge/edgeserver"
)

// Edge is an edge running in this process (edgeserver.Run). Restart keeps
// its address, so clients keep asking the same URL. Its methods are safe
// for concurrent use.
type Edge struct {
	// URL is the edge's base, http://host:port; Addr is host:port.
	URL, Addr string
	cfg       edgeserver.Config

	mu     sync.Mutex
	parts  *edgeserver.Edge
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// busyAuthorityWait is how long a test's edge lets one authority lookup
// take, waiting for a slot included, unless its test says otherwise. The
// production defaults (a 50 ms wait for a slot, then 503) bound work on a
// loaded edge; on a 2-core test machine with a CPU hog they turned a fresh
// link's first follow into a shed 503.
const busyAuthorityWait = 10 * time.Second

// StartEdge runs an edge with cfg until ctx ends or Stop is called and
// returns once it listens and its parts are built. An empty cfg.HTTPAddr
// listens on a free loopback port; a zero AuthorityTimeout or
// AuthorityMaxWait is 10 s (busyAuthorityWait); cfg.OnListen and
// cfg.OnStart, if set, are still called.
func StartEdge(ctx context.Context, cfg edgeserver.Config) (*Edge, error) {
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	if cfg.AuthorityTimeout == 0 {
		cfg.AuthorityTimeout = busyAuthorityWait
	}
	if cfg.AuthorityMaxWait == 0 {
		cfg.AuthorityMaxWait = busyAuthorityWait
	}
	e := &Edge{cfg: cfg}
	if err := e.start(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// NewEdge is StartEdge for a test: it fails the test when the edge does
// not start and stops it when the test ends.
func NewEdge(t testing.TB, cfg edgeserver.Config) *Edge {
	t.Helper()
	return started(t, "edge "+cfg.Name, 0, func(ctx context.Context) (*Edge, error) { return StartEdge(ctx, cfg) }, (*Edge).Stop)
}

func (e *Edge) start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	addr, parts := make(chan net.Addr, 1), make(chan *edgeserver.Edge, 1)
	cfg := e.cfg
	cfg.OnListen = func(a net.Addr) {
		if e.cfg.OnListen != nil {
			e.cfg.OnListen(a)
		}
		addr <- a
	}
	cfg.OnStart = func(p *edgeserver.Edge) {
		if e.cfg.OnStart != nil {
			e.cfg.OnStart(p)
		}
		parts <- p
	}
	done := make(chan struct{})
	e.mu.Lock()
	e.cancel, e.done, e.err = cancel, done, nil
	e.mu.Unlock()
	go func() {
		err := edgeserver.Run(ctx, cfg)
		e.mu.Lock()
		e.err = err
		e.mu.Unlock()
		close(done)
	}()
	timeout := time.After(startWithin)
	for e.URL == "" || e.Parts() == nil {
		select {
		case a := <-addr:
			if e.URL == "" { // a restart listens where the first start did
				e.Addr, e.URL = a.String(), "http://"+a.String()
				e.cfg.HTTPAddr = e.Addr
			}
		case p := <-parts:
			e.mu.Lock()
			e.parts = p
			e.mu.Unlock()
		case <-done:
			e.Stop()
			return fmt.Errorf("edge %s stopped while starting: %v", e.cfg.Name, e.Err())
		case <-timeout:
			return errors.Join(fmt.Errorf("edge %s did not start within %v", e.cfg.Name, startWithin), e.Stop())
		}
	}
	return nil
}

// Parts are the running edge's parts (feed, overlay, snapshots …); nil
// while it is stopped.
func (e *Edge) Parts() *edgeserver.Edge {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancel == nil {
		return nil
	}
	return e.parts
}

// Done is closed once the edge has stopped, by Stop or by itself.
func (e *Edge) Done() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done
}

// Err is why the edge stopped, once Done is closed: nil after a clean stop.
func (e *Edge) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Stop shuts the edge down gracefully and returns its error; stopping a
// stopped edge is harmless.
func (e *Edge) Stop() error {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.cancel = nil
	e.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return e.Err()
	case <-time.After(stopWithin):
		return fmt.Errorf("edge %s did not stop within %v", e.cfg.Name, stopWithin)
	}
}

// Restart stops the edge and starts it again on the same address and
// configuration (so the same snapshot folder: it boots from its local copy
// and replays the rest).
func (e *Edge) Restart(ctx context.Context) error {
	if err := e.Stop(); err != nil {
		return err
	}
	e.mu.Lock()
	e.parts = nil
	e.mu.Unlock()
	return e.start(ctx)
}
