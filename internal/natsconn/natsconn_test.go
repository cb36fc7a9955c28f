package natsconn_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/internal/freeport"
	"github.com/edgelink/edgelink/internal/natsconn"
	"github.com/edgelink/edgelink/internal/natstest"
)

// A process may start before NATS: Connect returns at once and the
// connection comes up when the server does.
func TestConnectBeforeTheServer(t *testing.T) {
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	nc, err := natsconn.Connect(url, "edgelink-test")
	if err != nil {
		t.Fatalf("Connect with no server yet: %v; want a connection that keeps trying", err)
	}
	t.Cleanup(nc.Close)
	if got := nc.Opts.Name; got != "edgelink-test" {
		t.Errorf("client name %q, want edgelink-test", got)
	}
	if nc.Opts.MaxReconnect != -1 {
		t.Errorf("MaxReconnect %d, want -1 (forever)", nc.Opts.MaxReconnect)
	}

	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: ports[0], NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(time.Minute) {
		t.Fatal("server not ready within a minute")
	}
	natstest.WaitConnected(t, nc, time.Minute)
}

// The caller's options come last and win.
func TestConnectOptionsWin(t *testing.T) {
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsconn.Connect(fmt.Sprintf("nats://127.0.0.1:%d", ports[0]), "edgelink-test",
		nats.RetryOnFailedConnect(false))
	if err == nil {
		nc.Close()
		t.Fatal("Connect with no server and RetryOnFailedConnect(false) succeeded; want an error")
	}
}

// JetStream hands out a connection with a working JetStream context, and
// says which step failed when it cannot.
func TestJetStream(t *testing.T) {
	s := natstest.Start(t)
	nc, js, err := natsconn.JetStream(s.ClientURL(), "edgelink-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := js.AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream context of a JetStream server: %v", err)
	}
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = natsconn.JetStream(fmt.Sprintf("nats://127.0.0.1:%d", ports[0]), "edgelink-test", nats.RetryOnFailedConnect(false))
	if err == nil || !strings.HasPrefix(err.Error(), "nats: ") {
		t.Fatalf("JetStream with no server: %v; want a nats: error", err)
	}
}
