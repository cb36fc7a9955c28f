package stack

import (
	"context"
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
