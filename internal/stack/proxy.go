package stack

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP on loopback to a target: a fault injector in front of
// a real server (PostgreSQL, NATS), never a stand-in for it. It can be
// moved to another target, as a virtual IP or a connection pooler in front
// of "the primary" is after a failover (moving cuts every forwarded
// connection), and can delay every chunk in both directions, the server
// turned slow. A test's own connections go to the server directly, not
// through the proxy, so they never meet the fault it makes. Its methods
// are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target atomic.Pointer[string]
	delay  atomic.Int64 // nanoseconds per chunk

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target
// (host:port) until Close.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.target.Store(&target)
	p.wg.Go(p.accept)
	return p, nil
}

// NewProxy is StartProxy for a test, closed when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, "proxy", p.Close)
	return p
}

// Addr is where the proxy listens, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DSN is a connection string to database db of a PostgreSQL server behind
// the proxy (as internal/pgserver's servers take them).
func (p *Proxy) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.Addr(), db)
}

// Retarget sends new connections to target and cuts every forwarded one.
func (p *Proxy) Retarget(target string) {
	p.target.Store(&target)
	p.cutAll()
}

// SetDelay delays every chunk forwarded from now on by d (0: none).
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// track adds or removes c; a connection added after Close is closed.
func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case add && p.closed:
		c.Close()
	case add:
		p.conns[c] = struct{}{}
	default:
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(down) })
	}
}

func (p *Proxy) pipe(down net.Conn) {
	up, err := net.Dial("tcp", *p.target.Load())
	if err != nil {
		down.Close()
		return
	}
	p.track(down, true)
	p.track(up, true)
	var wg sync.WaitGroup
	wg.Go(func() { p.copy(up, down) })
	wg.Go(func() { p.copy(down, up) })
	wg.Wait()
	p.track(down, false)
	p.track(up, false)
}

func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d) // the fault: a slow server, not a wait
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

// Close stops listening, cuts every connection and waits for the pipes.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cutAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil // closed twice
	}
	return err
}
