// Package natstest runs a real NATS server with JetStream inside the test
// process, stopped when the test ends.
package natstest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/internal/freeport"
	"github.com/edgelink/edgelink/internal/poll"
)

// readyWithin bounds a start or restart until the server takes clients.
const readyWithin = 60 * time.Second

// Server is an in-process JetStream server.
type Server struct {
	*server.Server
	opts *server.Options
}

// Start runs a JetStream server on a free loopback port (see internal/freeport)
// with its store in a temporary folder. Restart brings it back on the same
// port and store, so clients reconnect.
func Start(t testing.TB) *Server {
	t.Helper()
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	dir, err := os.MkdirTemp("", "edgelink-nats-")
	if err != nil {
		t.Fatal(err)
	}
	opts := &server.Options{
		Host: "127.0.0.1", Port: ports[0], JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
	}
	s := &Server{opts: opts}
	s.start(t)
	t.Cleanup(func() {
		s.Stop()
		_ = os.RemoveAll(dir)
	})
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	ns, err := server.NewServer(s.opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	ns.Start()
	// Generous: a JetStream restart recovers its store first, and the
	// machine may be busy.
	if !ns.ReadyForConnections(readyWithin) {
		ns.Shutdown()
		t.Fatalf("natstest: server not ready within %v", readyWithin)
	}
	s.Server = ns
}

// Stop shuts the server down and waits for it; stopping twice is harmless.
func (s *Server) Stop() {
	if s.Server != nil && s.Server.Running() {
		s.Server.Shutdown()
		s.Server.WaitForShutdown()
	}
}

// Restart starts a stopped server again on the same port and store.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// Connect returns a client connection and its JetStream context, closed when
// the test ends. The client reconnects forever, as production clients do.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return nc, js
}

// WaitConnected waits within the bound until a flush of nc (a round trip)
// is answered, that is until the client is connected, failing t otherwise.
// A flush cancelled by a failed attempt, or sent before the client saw a
// restart, is asked again.
func WaitConnected(t testing.TB, nc *nats.Conn, within time.Duration) {
	t.Helper()
	var err error
	if perr := poll.Wait(context.Background(), "the client connected", within, func() bool {
		err = nc.FlushTimeout(time.Second)
		return err == nil
	}); perr != nil {
		t.Fatalf("natstest: %v: %v", perr, err)
	}
}
