// Package responder answers edges' lookups of codes they do not know, over
// NATS request-reply (see shared/authority for the protocol and why it is
// not a database connection per edge).
package responder

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/shared/authority"
	"github.com/edgelink/edgelink/shared/link"
)

// Lookup reads the authority's state of codes: the primary, or a replica
// only through ReplicaFirst, which never answers NotFound from it.
type Lookup interface {
	// LookupForEdge answers one code (the single-code protocol of edges
	// from before questions; kept while they are upgraded).
	LookupForEdge(ctx context.Context, code string) (authority.Reply, error)
	// LookupCodes answers each code at its index, codes[i] on domains[i]
	// (domains empty: all on link.DefaultDomain), a Found reply with its
	// domain, and the change version reached when they were read.
	LookupCodes(ctx context.Context, domains []link.DomainID, codes []string) ([]authority.Reply, uint64, error)
	// LookupKeys answers codes as LookupCodes does and, in the same read,
	// hosts: the active domains that have one of them (a host none has is
	// absent). Without hosts it is LookupCodes.
	LookupKeys(ctx context.Context, domains []link.DomainID, codes, hosts []string) ([]authority.Reply, []link.Domain, uint64, error)
}

// Frontiers reads every namespace's allocation frontier and ceiling on the
// primary, ordered after any ceiling raise it does not see, and the promise
// that goes with them: how long after an edge's question was sent no lease
// ends above a ceiling it was told (control/allocstore).
type Frontiers interface {
	Frontiers(ctx context.Context) ([]authority.Frontier, time.Duration, error)
}

// Config bounds the responder.
type Config struct {
	// Concurrency is the most lookups running against the database at once
	// (default 8), so a burst of edge misses cannot take the pool from the
	// API.
	Concurrency int
	// Timeout bounds one lookup (default 1s). Edges give up sooner; a
	// lookup nobody waits for any more is wasted, not harmful.
	Timeout time.Duration
	// Backlog is how many requests may wait for a worker (default
	// 64×Concurrency). Past it NATS drops requests for this subscriber
	// (a slow consumer) and the edge answers 503 after its timeout.
	Backlog int
	Log     *slog.Logger
}

// Responder serves lookups. Its counters are safe to read while Run runs.
type Responder struct {
	nc        *nats.Conn
	lookup    Lookup
	frontiers Frontiers
	cfg       Config

	// Answered, NotFound count codes answered found and not found;
	// Failed the messages answered Unavailable; Invalid the malformed
	// ones; Questions the messages on AskSubject and FrontierReads those
	// that asked for the frontier; HostsFound and HostsNotFound the hosts
	// answered with a domain and without.
	Answered, NotFound, Failed, Invalid, Questions, FrontierReads, HostsFound, HostsNotFound atomic.Uint64
}

// New returns a responder answering on nc from lookup, and the frontier from
// frontiers (nil: questions that ask for it are answered without one).
func New(nc *nats.Conn, lookup Lookup, frontiers Frontiers, cfg Config) *Responder {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 64 * cfg.Concurrency
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Responder{nc: nc, lookup: lookup, frontiers: frontiers, cfg: cfg}
}

// Run subscribes in the queue group, to questions and to single-code
// lookups, and answers until ctx is done, then drains: requests already
// received are answered. A subscription made while NATS is down is kept by
// the client and sent when it reconnects.
func (r *Responder) Run(ctx context.Context) error {
	ch := make(chan *nats.Msg, r.cfg.Backlog)
	var subs []*nats.Subscription
	for _, subj := range []string{authority.AskSubject, authority.Subject} {
		sub, err := r.nc.ChanQueueSubscribe(subj, authority.QueueGroup, ch)
		if err != nil {
			for _, s := range subs {
				_ = s.Unsubscribe()
			}
			return fmt.Errorf("authority: subscribe %s: %w", subj, err)
		}
		_ = sub.SetPendingLimits(r.cfg.Backlog, -1)
		subs = append(subs, sub)
	}
	var wg sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for msg := range ch {
				if msg.Subject == authority.AskSubject {
					r.ask(ctx, msg)
				} else {
					r.answer(ctx, msg)
				}
			}
		})
	}
	<-ctx.Done()
	for _, s := range subs {
		_ = s.Unsubscribe()
	}
	close(ch)
	wg.Wait()
	return nil
}

// ask answers one question: every code it names, read after it was sent,
// and the frontier with its promise when it asks.
func (r *Responder) ask(ctx context.Context, msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	r.Questions.Add(1)
	a := authority.Answer{Kind: authority.Found}
	var q authority.Question
	if err := authority.UnmarshalQuestion(msg.Data, &q); err != nil {
		// Edges check what they send: this one is broken or hostile. It
		// gets no answer it could take for "unknown".
		r.Invalid.Add(1)
		r.cfg.Log.Warn("authority question does not decode", "err", err)
		r.respond(msg, &authority.Answer{Kind: authority.Unavailable})
		return
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	defer cancel()
	var err error
	switch {
	case len(q.Hosts) > 0:
		a.Replies, a.Domains, a.Version, err = r.lookup.LookupKeys(lctx, q.Domains, q.Codes, q.Hosts)
	case len(q.Codes) > 0:
		a.Replies, a.Version, err = r.lookup.LookupCodes(lctx, q.Domains, q.Codes)
	}
	if err == nil && q.Frontier && r.frontiers != nil {
		r.FrontierReads.Add(1)
		var promise time.Duration
		a.Frontiers, promise, err = r.frontiers.Frontiers(lctx)
		a.PromiseMillis = uint32(promise.Milliseconds())
	}
	if err == nil {
		err = checkReplies(&q, a.Replies)
	}
	if err == nil {
		err = checkDomains(&q, a.Domains)
	}
	if err != nil {
		r.Failed.Add(1)
		r.cfg.Log.Warn("authority question failed", "codes", len(q.Codes), "hosts", len(q.Hosts), "frontier", q.Frontier, "err", err)
		r.respond(msg, &authority.Answer{Kind: authority.Unavailable})
		return
	}
	for i := range a.Replies {
		if a.Replies[i].Kind == authority.Found {
			r.Answered.Add(1)
			a.Replies[i].Code = "" // implied by the question
		} else {
			r.NotFound.Add(1)
		}
	}
	r.HostsFound.Add(uint64(len(a.Domains)))
	r.HostsNotFound.Add(uint64(len(q.Hosts) - len(a.Domains)))
	r.respond(msg, &a)
}

// checkDomains makes sure a lookup answered q's hosts with active domains
// of those hosts, each once: an edge would serve the domain's links on
// whatever host the answer names.
func checkDomains(q *authority.Question, ds []link.Domain) error {
	if len(ds) > len(q.Hosts) {
		return fmt.Errorf("%d domains for %d hosts", len(ds), len(q.Hosts))
	}
	for i := range ds {
		if !slices.Contains(q.Hosts, ds[i].Host) || ds[i].Status != link.DomainActive {
			return fmt.Errorf("domain %d is not an active domain of a host asked", i)
		}
		for j := range i {
			if ds[j].Host == ds[i].Host {
				return fmt.Errorf("domain %d repeats a host", i)
			}
		}
	}
	return nil
}

// checkReplies makes sure a lookup answered each of q's codes at its index
// with that key's link: a code on another domain is another namespace's,
// and answering with its link would send a user to a stranger's target.
// A link with extras (rules, a password, a click limit) is answered only
// to a question that reads them (an edge from before them would serve it
// without its password): to any other the whole answer is Unavailable.
func checkReplies(q *authority.Question, reps []authority.Reply) error {
	if len(reps) != len(q.Codes) {
		return fmt.Errorf("%d replies to %d codes", len(reps), len(q.Codes))
	}
	for i := range reps {
		if reps[i].Kind == authority.Found && (reps[i].Domain != q.Domain(i) || reps[i].Code != q.Codes[i]) {
			return fmt.Errorf("reply %d is not about the key asked", i)
		}
		if reps[i].Extras != "" && !q.Extras {
			return fmt.Errorf("reply %d: a link with extras, asked by an edge that does not read them (upgrade it)", i)
		}
	}
	return nil
}

func (r *Responder) respond(msg *nats.Msg, a *authority.Answer) {
	b, err := authority.MarshalAnswer(make([]byte, 0, 256), a)
	if err == nil && r.nc != nil && int64(len(b)) > r.nc.MaxPayload() {
		// Links' extras can make an answer of many codes larger than a
		// message may be; the edge gets a prompt Unavailable for them,
		// not a timeout.
		err = fmt.Errorf("an answer of %d bytes exceeds the server's max_payload of %d", len(b), r.nc.MaxPayload())
	}
	if err != nil {
		r.Failed.Add(1)
		r.cfg.Log.Error("authority answer does not encode", "err", err)
		b, _ = authority.MarshalAnswer(nil, &authority.Answer{Kind: authority.Unavailable})
	}
	_ = msg.Respond(b)
}

func (r *Responder) answer(ctx context.Context, msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	var rep authority.Reply
	if !authority.ValidRequest(msg.Data) {
		// Edges validate codes before asking; an invalid one cannot name a
		// link, and saying NotFound is the truth.
		r.Invalid.Add(1)
		rep = authority.Reply{Kind: authority.NotFound}
	} else {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
		var err error
		rep, err = r.lookup.LookupForEdge(lctx, string(msg.Data))
		cancel()
		if err != nil {
			r.Failed.Add(1)
			r.cfg.Log.Warn("authority lookup failed", "err", err)
			rep = authority.Reply{Kind: authority.Unavailable}
		}
	}
	b, err := authority.Marshal(make([]byte, 0, 64+len(rep.URL)), &rep)
	if err != nil {
		r.Failed.Add(1)
		r.cfg.Log.Error("authority reply does not encode", "err", err)
		b, _ = authority.Marshal(nil, &authority.Reply{Kind: authority.Unavailable})
	}
	switch rep.Kind {
	case authority.Found:
		r.Answered.Add(1)
	case authority.NotFound:
		r.NotFound.Add(1)
	}
	_ = msg.Respond(b)
}
