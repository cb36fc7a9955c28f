package cluster

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowProxy forwards TCP to upstream (control's PostgreSQL), delaying every
// chunk by the current delay in both directions while one is set: the
// authority turned slow, for creates, segment leases and edges' lookups
// alike. It is a fault injector in front of the real server, not a stand-in
// for it (a few lines here instead of a toxiproxy dependency for one
// toxic).
type slowProxy struct {
	ln       net.Listener
	upstream string
	delay    atomic.Int64 // nanoseconds per chunk

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startSlowProxy(t testing.TB, upstream string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *slowProxy) addr() string { return p.ln.Addr().String() }

func (p *slowProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *slowProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

func (p *slowProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add && p.closed {
		c.Close()
	} else if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *slowProxy) pipe(down net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		down.Close()
		return
	}
	p.track(down, true)
	p.track(up, true)
	var wg sync.WaitGroup
	copyDelayed := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if d := time.Duration(p.delay.Load()); d > 0 {
					time.Sleep(d)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Either side closing ends both, as a cut connection would.
		dst.Close()
		src.Close()
	}
	wg.Go(func() { copyDelayed(up, down) })
	wg.Go(func() { copyDelayed(down, up) })
	wg.Wait()
	p.track(down, false)
	p.track(up, false)
}

func (p *slowProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
