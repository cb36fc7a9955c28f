package clickroll

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Apply is the roller's apply, for the external tests to hand it messages
// as a redelivering consumer would.
func Apply(ctx context.Context, r *Roller, pos uint64, msgs []jetstream.Msg) (uint64, error) {
	return r.apply(ctx, pos, msgs)
}
