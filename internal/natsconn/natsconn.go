// Package natsconn dials NATS the way edgelink's processes do: one place
// for the connection policy control and the edges share.
package natsconn

import (
	"time"

	"github.com/nats-io/nats.go"
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
