// Package lookup asks control about codes the edge does not know:
// coalesced per code, bounded in concurrency, timed out. See
// shared/authority for the protocol.
package lookup

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/singleflight"

	"github.com/edgelink/edgelink/shared/authority"
)

// Errors a lookup may end with. None of them means "not found": the edge
// answers 503 for them, never 404.
var (
	ErrUnavailable = errors.New("authority unavailable")
	ErrBusy        = errors.New("authority lookups at their concurrency bound")
)

// Requester is the part of a NATS connection the client uses.
type Requester interface {
	RequestWithContext(ctx context.Context, subj string, data []byte) (*nats.Msg, error)
	IsConnected() bool
}

// Config bounds the client.
type Config struct {
	// Timeout bounds one round trip (default 500ms).
	Timeout time.Duration
	// Concurrency is the most lookups in flight from this edge (default
	// 32). A lookup waits for a slot at most until its own timeout.
	Concurrency int
}

// Client is safe for concurrent use.
type Client struct {
	nc    Requester
	cfg   Config
	sem   chan struct{}
	group singleflight.Group
	// clock orders arrivals and flight starts; see Lookup.
	clock atomic.Uint64

	// Requests counts round trips to the authority; Coalesced counts
	// lookups that shared another's round trip; Failed counts round trips
	// that ended in an error.
	Requests, Coalesced, Failed, Busy atomic.Uint64
}

// New returns a client asking over nc.
func New(nc Requester, cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	return &Client{nc: nc, cfg: cfg, sem: make(chan struct{}, cfg.Concurrency)}
}

type flight struct {
	rep     authority.Reply
	startAt uint64
}

// Lookup asks the authority about code. Concurrent lookups of one code share
// a round trip, with one rule that keeps the visibility contract: a
// NotFound from a round trip that started before this lookup arrived is not
// trusted (the link may have been created in between, with its 201 already
// sent), so the lookup asks once more; that second round trip started after
// it arrived. A Found is always shared: a link, once created, exists.
func (c *Client) Lookup(code string) (authority.Reply, error) {
	arrived := c.clock.Add(1)
	for {
		v, err, shared := c.group.Do(code, func() (any, error) {
			f := flight{startAt: c.clock.Add(1)}
			rep, err := c.ask(code)
			f.rep = rep
			return f, err
		})
		if shared {
			c.Coalesced.Add(1)
		}
		if err != nil {
			return authority.Reply{}, err
		}
		f := v.(flight)
		if f.rep.Kind == authority.Found || f.startAt > arrived {
			return f.rep, nil
		}
	}
}

func (c *Client) ask(code string) (authority.Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	if !c.nc.IsConnected() {
		c.Failed.Add(1)
		return authority.Reply{}, fmt.Errorf("%w: nats not connected", ErrUnavailable)
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		c.Busy.Add(1)
		return authority.Reply{}, ErrBusy
	}
	c.Requests.Add(1)
	msg, err := c.nc.RequestWithContext(ctx, authority.Subject, []byte(code))
	if err != nil {
		c.Failed.Add(1)
		return authority.Reply{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var rep authority.Reply
	if err := authority.Unmarshal(msg.Data, &rep); err != nil {
		c.Failed.Add(1)
		return authority.Reply{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch {
	case rep.Kind == authority.Unavailable:
		c.Failed.Add(1)
		return authority.Reply{}, fmt.Errorf("%w: control could not read its database", ErrUnavailable)
	case rep.Kind == authority.Found && rep.Code != code:
		c.Failed.Add(1)
		return authority.Reply{}, fmt.Errorf("%w: asked for %q, answered %q", ErrUnavailable, code, rep.Code)
	}
	return rep, nil
}
