// Package logbuf holds Buffer, where a test collects what a component logs
// from its own goroutines, to parse it or to print it when the test fails.
package logbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes. It is safe for concurrent use; the zero value is
// ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
