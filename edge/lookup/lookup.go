// Package lookup asks control about codes the edge does not know, many codes
// to a message, and keeps the allocation frontier's promise that lets the
// edge answer most unknown codes without asking at all. See shared/authority
// for the protocol and docs/visibility.md for why each 404 it allows is
// safe.
//
// Questions are combined in time: a code asked while every round trip slot
// is busy waits (at most Config.MaxWait) and goes out with every other code
// that arrived meanwhile, up to authority.MaxCodes in one message. Asking
// is bounded (Config.MaxPending codes waiting, Config.Inflight round trips)
// and shed quickly with ErrBusy rather than queued for the whole timeout.
package lookup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// Errors a question may end with. None of them means "not found": the edge
// answers 503 for them, never 404.
var (
	ErrUnavailable = errors.New("authority unavailable")
	ErrBusy        = errors.New("authority questions at their bound")
)

// Requester is the part of a NATS connection the client uses.
type Requester interface {
	RequestWithContext(ctx context.Context, subj string, data []byte) (*nats.Msg, error)
	IsConnected() bool
}

// Config bounds the client. Zero values take the defaults.
type Config struct {
	// Timeout bounds one round trip (default 500ms).
	Timeout time.Duration
	// MaxWait bounds how long a code waits for a round trip slot before
	// the edge answers 503 (default 50ms).
	MaxWait time.Duration
	// Inflight is the most round trips at once (default 8).
	Inflight int
	// MaxPending is the most codes waiting for a slot (default 4,096).
	MaxPending int
	// MaxPromise caps the promise an answer may give (default 5s), in case
	// a control is misconfigured.
	MaxPromise time.Duration
	// Now is the clock (default time.Now); it must carry a monotonic
	// reading, since promises are measured from the moment a question was
	// sent.
	Now func() time.Time
}

// Client is safe for concurrent use. Run must be running for questions to
// be sent.
type Client struct {
	nc  Requester
	cfg Config

	work    chan struct{} // a token: there may be something to send
	promise atomic.Pointer[Promise]
	// refresh is set when the promise should be renewed; the sender that
	// takes it asks for the frontier.
	refresh atomic.Bool

	mu      sync.Mutex
	clock   uint64 // orders arrivals and sends
	pending []*question
	byCode  map[linkKey]*question // queued or in flight
	// fwait are the misses waiting for a frontier read after they arrived
	// (see Settle).
	fwait []*frontierWaiter
	// failedAt is when a frontier question last failed, so a failing
	// authority is not asked in a loop (retryArmed: a wake-up is set for
	// when it may be asked again); frontierSent is the last frontier
	// question's place in the clock.
	failedAt     time.Time
	retryArmed   bool
	frontierSent uint64
	asking       bool // a frontier question is in flight

	// Requests counts round trips, Asked the codes they carried,
	// Coalesced the waits that shared another's question, Failed the
	// round trips that ended in an error, Busy the codes and hosts shed,
	// Refreshes the answers that renewed the promise. HostsAsked counts
	// the calls of AskHost, HostsSent the hosts the round trips carried.
	Requests, Asked, Coalesced, Failed, Busy, Refreshes, HostsAsked, HostsSent atomic.Uint64
}

// New returns a client asking over nc.
func New(nc Requester, cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 50 * time.Millisecond
	}
	if cfg.Inflight <= 0 {
		cfg.Inflight = 8
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 4096
	}
	if cfg.MaxPromise <= 0 {
		cfg.MaxPromise = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{nc: nc, cfg: cfg, work: make(chan struct{}, 1), byCode: make(map[linkKey]*question)}
}

// await waits for an answer on done: at most MaxWait while its question is
// queued (then withdraw takes it back, and it is shed), and once sent the
// round trip's timeout, within which the sender answers or queues it again
// behind an answer that predates it, when it waits for a slot once more.
func await[T any](c *Client, done <-chan T, withdraw func() bool) (T, bool) {
	t := time.NewTimer(c.cfg.MaxWait)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			return r, true
		case <-t.C:
		}
		if withdraw() {
			c.Busy.Add(1)
			var zero T
			return zero, false
		}
		t.Reset(c.cfg.Timeout)
	}
}

func (c *Client) wantFrontier() {
	if !c.refresh.Load() && c.refresh.CompareAndSwap(false, true) {
		c.poke()
	}
}

func (c *Client) poke() {
	select {
	case c.work <- struct{}{}:
	default:
	}
}

// linkKey is what one question is about: a link's key (the same code on
// two domains is two links, asked about and answered apart), or, with host
// set and no code, which domain a host is.
type linkKey struct {
	domain link.DomainID
	code   string
	host   string
}

type question struct {
	key     linkKey
	waiters []*waiter
	sent    uint64 // the clock when sent; 0 while queued
}

type waiter struct {
	arrived uint64
	done    chan result // buffered: the sender never blocks on it
}

type result struct {
	rep authority.Reply
	// dom is a host's domain when rep is Found.
	dom link.Domain
	err error
}

// Ask asks the authority about code on domain d and waits for the answer: a
// Found (of that domain's link), or a NotFound read after Ask was called (so
// a link created before it was called, even a moment before, is Found). It
// waits at most MaxWait for a round trip slot (then ErrBusy) and a round
// trip's timeout for the answer.
func (c *Client) Ask(d link.DomainID, code string) (authority.Reply, error) {
	r, err := c.wait(linkKey{domain: d, code: code})
	return r.rep, err
}

// AskHost asks the authority which active domain has host (canonical, as
// link.CanonicalHost gives it) and waits for the answer: the domain and
// true, or false when no active domain had host when the authority read,
// after AskHost was called (so a domain created before the call, even a
// moment before, is found). Hosts are asked with codes, many to a message,
// one question in flight per host, under the same bounds as Ask: ErrBusy
// past them, ErrUnavailable when the authority cannot tell. Neither error
// means the host is unknown.
func (c *Client) AskHost(host string) (link.Domain, bool, error) {
	c.HostsAsked.Add(1)
	r, err := c.wait(linkKey{host: host})
	if err != nil {
		return link.Domain{}, false, err
	}
	return r.dom, r.rep.Kind == authority.Found, nil
}

// wait queues a question about key, or joins the one queued or in flight,
// and waits for its answer within the bounds.
func (c *Client) wait(key linkKey) (result, error) {
	if !c.nc.IsConnected() {
		c.Failed.Add(1)
		return result{}, fmt.Errorf("%w: nats not connected", ErrUnavailable)
	}
	w := &waiter{done: make(chan result, 1)}
	c.mu.Lock()
	c.clock++
	w.arrived = c.clock
	q := c.byCode[key]
	if q == nil {
		if len(c.pending) >= c.cfg.MaxPending {
			c.mu.Unlock()
			c.Busy.Add(1)
			return result{}, ErrBusy
		}
		q = &question{key: key}
		c.byCode[key] = q
		c.pending = append(c.pending, q)
	} else {
		c.Coalesced.Add(1)
	}
	q.waiters = append(q.waiters, w)
	c.mu.Unlock()
	c.poke()

	r, ok := await(c, w.done, func() bool { return c.withdraw(key, w) })
	if !ok {
		return result{}, ErrBusy
	}
	return r, r.err
}

// withdraw takes w back if its code has not been sent yet (or was queued
// again after an answer that predates it), reporting whether it did.
func (c *Client) withdraw(key linkKey, w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.byCode[key]
	if q == nil || q.sent != 0 || !slices.Contains(q.waiters, w) {
		return false
	}
	q.waiters = slices.DeleteFunc(q.waiters, func(x *waiter) bool { return x == w })
	if len(q.waiters) == 0 {
		delete(c.byCode, key)
		c.pending = slices.DeleteFunc(c.pending, func(x *question) bool { return x == q })
	}
	return true
}

// Run sends questions until ctx is done, with Config.Inflight round trips at
// most at once.
func (c *Client) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range c.cfg.Inflight {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c.work:
				}
				for c.sendOne(ctx) {
				}
			}
		})
	}
	wg.Wait()
	c.failAll(fmt.Errorf("%w: the edge is stopping", ErrUnavailable))
	return nil
}

// frontierRetry is the least time between two frontier questions while the
// authority fails to answer them.
const frontierRetry = 250 * time.Millisecond

// sendOne sends the oldest queued codes (and the frontier question, when
// it is wanted) in one message and hands out the answers. It reports
// whether it sent anything.
func (c *Client) sendOne(ctx context.Context) bool {
	now := c.cfg.Now()
	c.mu.Lock()
	// Extras: this edge reads links' rules, password hashes and click
	// limits in the answer (a control from before them refuses the
	// question: upgrade control first, docs/edge.md).
	q := authority.Question{Extras: true}
	if wanted := c.refresh.Load() || len(c.fwait) > 0; wanted && !c.asking {
		if wait := frontierRetry - now.Sub(c.failedAt); wait <= 0 {
			q.Frontier = true
			c.asking = true
			c.refresh.Store(false)
		} else if !c.retryArmed {
			c.retryArmed = true
			time.AfterFunc(wait, func() {
				c.mu.Lock()
				c.retryArmed = false
				c.mu.Unlock()
				c.poke()
			})
		}
	}
	batch := c.takeBatch()
	if len(batch) == 0 && !q.Frontier {
		c.mu.Unlock()
		return false
	}
	c.clock++
	sent := c.clock
	if q.Frontier {
		c.frontierSent = sent
	}
	other := false
	for _, b := range batch {
		b.sent = sent
		if b.key.host != "" {
			q.Hosts = append(q.Hosts, b.key.host)
			continue
		}
		q.Codes = append(q.Codes, b.key.code)
		other = other || b.key.domain != link.DefaultDomain
	}
	if other {
		// Domains stay empty for a question about the platform's domain
		// only, which a control from before domains can still read.
		q.Domains = make([]link.DomainID, 0, len(q.Codes))
		for _, b := range batch {
			if b.key.host == "" {
				q.Domains = append(q.Domains, b.key.domain)
			}
		}
	}
	more := len(c.pending) > 0 || c.refresh.Load()
	c.mu.Unlock()
	if more {
		c.poke() // another slot may take the rest
	}

	a, err := c.ask(ctx, &q)
	if q.Frontier {
		if err == nil {
			c.keep(now, &a)
		}
		if err != nil {
			c.mu.Lock()
			c.failedAt = now
			c.mu.Unlock()
		}
		c.settle(sent, &a, err)
		if err != nil && c.promise.Load() == nil {
			c.wantFrontier() // ask again, after frontierRetry
		}
	}
	c.answer(batch, &a, err)
	return true
}

// answer hands each question of batch its reply. A NotFound answers only
// the waiters that arrived before the question was sent; the others ask
// again. A Found reply must name the question's own link, (domain, code):
// one about another link is a broken answer, never a redirect to its target.
func (c *Client) answer(batch []*question, a *authority.Answer, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	requeued := false
	i := 0 // the index of q's reply, when q is about a code
	for _, q := range batch {
		var r result
		host := q.key.host != ""
		switch {
		case err != nil:
			r.err = err
		case host:
			// Not found is not cached by anyone: a domain may be created
			// a moment later, and its first links must redirect at once.
			r.rep.Kind = authority.NotFound
			if d, ok := a.DomainOf(q.key.host); ok {
				r.rep.Kind, r.dom = authority.Found, d
			}
		case a.Replies[i].Kind == authority.Found:
			r.rep = a.Replies[i]
			if r.rep.Domain != q.key.domain || r.rep.Code != q.key.code {
				c.Failed.Add(1)
				r = result{err: fmt.Errorf("%w: the reply names another link", ErrUnavailable)}
			}
		default:
			r.rep = authority.Reply{Kind: authority.NotFound, Version: a.Version}
		}
		if !host {
			i++
		}
		late := q.waiters[:0:0]
		for _, w := range q.waiters {
			if r.err == nil && r.rep.Kind == authority.NotFound && w.arrived > q.sent {
				late = append(late, w)
				continue
			}
			w.done <- r
		}
		if len(late) > 0 {
			q.waiters, q.sent = late, 0
			c.pending = append(c.pending, q)
			requeued = true
			continue
		}
		if c.byCode[q.key] == q {
			delete(c.byCode, q.key)
		}
	}
	if requeued {
		c.poke()
	}
}

func (c *Client) failAll(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, q := range c.byCode {
		for _, w := range q.waiters {
			w.done <- result{err: err}
		}
		delete(c.byCode, key)
	}
	c.pending = nil
	for _, w := range c.fwait {
		w.done <- frontierResult{err: err}
	}
	c.fwait = nil
}

// ask makes one round trip.
func (c *Client) ask(ctx context.Context, q *authority.Question) (authority.Answer, error) {
	var a authority.Answer
	c.Requests.Add(1)
	c.Asked.Add(uint64(len(q.Codes)))
	c.HostsSent.Add(uint64(len(q.Hosts)))
	if !c.nc.IsConnected() {
		c.Failed.Add(1)
		return a, fmt.Errorf("%w: nats not connected", ErrUnavailable)
	}
	b, err := authority.MarshalQuestion(make([]byte, 0, 16+8*len(q.Codes)+32*len(q.Hosts)), q)
	if err != nil {
		c.Failed.Add(1)
		return a, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(ctx, authority.AskSubject, b)
	if err != nil {
		c.Failed.Add(1)
		return a, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := authority.UnmarshalAnswer(msg.Data, q, &a); err != nil {
		c.Failed.Add(1)
		return a, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if a.Kind != authority.Found {
		c.Failed.Add(1)
		return a, fmt.Errorf("%w: control could not read its database", ErrUnavailable)
	}
	return a, nil
}

// takeBatch takes the oldest queued questions one message may carry: up to
// authority.MaxCodes codes and authority.MaxHosts hosts, in arrival order,
// leaving the rest queued in theirs. The caller holds mu.
func (c *Client) takeBatch() []*question {
	var batch []*question
	codes, hosts := 0, 0
	rest := c.pending[:0]
	for _, q := range c.pending {
		switch {
		case q.key.host != "" && hosts < authority.MaxHosts:
			hosts++
		case q.key.host == "" && codes < authority.MaxCodes:
			codes++
		default:
			rest = append(rest, q)
			continue
		}
		batch = append(batch, q)
	}
	clear(c.pending[len(rest):])
	c.pending = rest
	return batch
}
