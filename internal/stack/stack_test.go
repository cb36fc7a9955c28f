package stack

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestPollIsBounded(t *testing.T) {
	if err := Poll(context.Background(), "never", 50*time.Millisecond, func() bool { return false }); err == nil {
		t.Fatal("Poll of a condition that never holds returned nil")
	}
	n := 0
	if err := Poll(context.Background(), "third time", time.Minute, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("Poll = %v after %d asks; want nil after 3", err, n)
	}
}

// TestPostgresRestartResetsPool: after a stop and a restart the harness's
// pool answers at once, not with the connection the stop terminated.
func TestPostgresRestartResetsPool(t *testing.T) {
	pg := NewPostgres(t, PostgresConfig{})
	ctx := context.Background()
	_, key := pg.NewTenant(t, "t")
	if key == "" {
		t.Fatal("no API key")
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pg.Pool().QueryRow(ctx, `SELECT count(*) FROM tenants`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("first query after the restart: %d tenants, %v; want 1, nil", n, err)
	}
}

// TestNATSRestartKeepsPortAndStore: a client reconnects alone and finds
// its stream after the server comes back.
func TestNATSRestartKeepsPortAndStore(t *testing.T) {
	n := NewNATS(t, NATSConfig{})
	_, js := n.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	url := n.URL()
	n.Restart(t)
	if n.URL() != url {
		t.Fatalf("URL after restart %s; want %s", n.URL(), url)
	}
	Eventually(t, "publish after the restart", time.Minute, func() bool {
		_, err := js.Publish(ctx, "s", []byte("x"))
		return err == nil
	})
}

func echoServer(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte(reply + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr, closed when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ask(t *testing.T, c net.Conn) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("?\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestProxyRetargetCutsConnections: moving the proxy cuts what it
// forwarded and sends new connections to the new target.
func TestProxyRetargetCutsConnections(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	p := NewProxy(t, a)
	c := dial(t, p.Addr())
	if got, err := ask(t, c); got != "a\n" || err != nil {
		t.Fatalf("through the proxy: %q %v; want a", got, err)
	}
	p.Retarget(b)
	if got, err := ask(t, c); err == nil {
		t.Fatalf("the connection forwarded before the move still answers %q", got)
	}
	if got, err := ask(t, dial(t, p.Addr())); got != "b\n" || err != nil {
		t.Fatalf("after the move: %q %v; want b", got, err)
	}
}

// TestProcessKillTakesItsGroup: a kill ends the child and what it started.
func TestProcessKillTakesItsGroup(t *testing.T) {
	p, err := StartProcess(exec.Command("sh", "-c", "sleep 600 & echo started $!; wait"))
	if err != nil {
		t.Fatal(err)
	}
	p.CleanupWith(t, "sh")
	if _, err := p.WaitFor(context.Background(), regexp.MustCompile(`started (\d+)`), time.Minute); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	Eventually(t, "the process group is gone", time.Minute, func() bool {
		return errors.Is(syscall.Kill(-p.Pid, 0), syscall.ESRCH)
	})
	if out, err := RunProcess(context.Background(), exec.Command("sh", "-c", "echo hi; exit 3")); err == nil || out != "hi\n" {
		t.Fatalf("RunProcess of a failing command = %q, %v; want its output and an error", out, err)
	}
}
