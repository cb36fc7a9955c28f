// Package natsconn dials NATS the way edgelink's processes do: one place
// for the connection policy control and the edges share.
package natsconn

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// reconnectWait is the pause between reconnect attempts: short, as an
// edge that misses changes answers from an older state meanwhile.
const reconnectWait = 250 * time.Millisecond

// Connect dials url (servers comma-separated) as a client called name. The
// connection rides out NATS outages of any length: it reconnects forever,
// every 250 ms, and when no server answers at first Connect still
// returns a connection that keeps trying (publishes are buffered meanwhile)
// instead of an error, so a process can start before NATS does. opts are
// applied after these and win, for a caller with a different policy.
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(url, append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(reconnectWait),
	}, opts...)...)
}

// JetStream is Connect with the connection's JetStream context; on error
// nothing is left open. Its errors say which of the two failed.
func JetStream(url, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := Connect(url, name, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
