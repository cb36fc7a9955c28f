package stack

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Background is a piece run on a goroutine of its own (control in this
// process, the all-in-one stack) until its context ends or Stop is called.
type Background struct {
	what   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// Go runs run on a goroutine of its own with a context that ends with ctx
// or at Stop. what names the piece in Stop's error.
func Go(ctx context.Context, what string, run func(context.Context) error) *Background {
	ctx, cancel := context.WithCancel(ctx)
	b := &Background{what: what, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.err = run(ctx)
	}()
	return b
}

// Done is closed once the piece has stopped, by Stop or by itself.
func (b *Background) Done() <-chan struct{} { return b.done }

// Err is why the piece stopped, once Done is closed: nil after a clean
// stop.
func (b *Background) Err() error { return b.err }

// Stop ends the piece's context, waits for it within stopWithin, and
// returns its error (or that it did not stop); a second call returns the
// same.
func (b *Background) Stop() error {
	b.once.Do(func() {
		b.cancel()
		select {
		case <-b.done:
		case <-time.After(stopWithin):
			b.err = fmt.Errorf("%s did not stop within %v", b.what, stopWithin)
		}
	})
	return b.err
}

// WaitReady waits within the bound for ready to say that b's piece serves,
// and returns what it said. When the piece stops by itself first, or the
// bound passes, b is stopped and the error says which.
func WaitReady[T any](b *Background, ready <-chan T, within time.Duration) (T, error) {
	var zero T
	select {
	case v := <-ready:
		return v, nil
	case <-b.Done():
		_ = b.Stop()
		return zero, fmt.Errorf("%s stopped while starting: %v", b.what, b.Err())
	case <-time.After(within):
		return zero, errors.Join(fmt.Errorf("%s not ready within %v", b.what, within), b.Stop())
	}
}
