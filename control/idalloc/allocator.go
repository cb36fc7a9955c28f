package idalloc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures an Allocator. Zero durations take the defaults named.
type Config struct {
	// Namespaces are the namespaces this allocator serves from the start;
	// their ranges must be pairwise disjoint.
	Namespaces []Namespace
	// Lookup, if set, finds a namespace that is not in Namespaces the first
	// time Next asks for it (a domain created after this process started,
	// by it or by another instance), so the allocator learns it and starts
	// its loader then. It returns an error wrapping ErrUnknownNamespace
	// when the authority has no such namespace. A learned namespace keeps
	// every rule of a configured one (audit, fence, witness, ceilings,
	// exhaustion) and must be disjoint from all the others.
	Lookup func(ctx context.Context, name string) (Namespace, error)
	// Instance names this process in the audit; empty means
	// "<hostname>-<pid>-<random>". It must be unique per process start.
	Instance string
	// PrefetchAhead is how many seconds of IDs, at the observed rate, the
	// current range may have left before the standby is loaded. It should
	// cover allocation latency plus backoff plus jitter (default 30s). A
	// range that is half used triggers the load whatever the rate.
	PrefetchAhead time.Duration
	// LoadTimeout bounds one lease or seal transaction (default 5s).
	LoadTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff after a
	// failed load (defaults 50ms and 5s).
	BackoffMin, BackoffMax time.Duration
	// MaxConcurrentLoads bounds lease transactions in flight across all
	// namespaces; a load finding no free slot fails as ErrRejected and
	// backs off (default 2).
	MaxConcurrentLoads int
	// Tick is how often each loader re-evaluates rate, prefetch and
	// sealing without being woken (default 200ms).
	Tick time.Duration
	// HeartbeatInterval is how often the instance records it is alive
	// (default 10s).
	HeartbeatInterval time.Duration
	// AbandonAfter, when positive, makes this instance seal the open
	// segments of instances silent for longer than that, and fence itself
	// (retire its ranges) when it cannot heartbeat for AbandonAfter/2. It
	// must be the same on every instance and exceed HeartbeatInterval plus
	// the longest create transaction. Zero disables both.
	AbandonAfter time.Duration
	// OnSegment, if set, is called by the loader with every segment the
	// authority confirmed, before any ID of it is handed out.
	OnSegment func(Segment)
	// OnLoad, if set, is called by the loader after every lease attempt
	// with how long the authority took and the failure class (Class; empty
	// on success): the allocation-latency histogram. It must not block.
	OnLoad func(namespace string, took time.Duration, class string)
	// Witness, if set, keeps each namespace's allocation high-water outside
	// the authority: every lease must find the authority's counter at or
	// above it (else ErrFenced: a promoted replica that lost confirmed
	// leases), and every confirmed segment's end is recorded in it before
	// any of its IDs is handed out. See Witness.
	Witness Witness
	// WitnessBestEffort lets leases proceed when the witness cannot be
	// reached (counted in Stats.WitnessSkipped) instead of failing them.
	// Allocation then survives a witness outage past the double buffer's
	// runway, but a failover during that outage is not detected.
	WitnessBestEffort bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives loader failures (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PrefetchAhead, 30*time.Second)
	def(&c.LoadTimeout, 5*time.Second)
	def(&c.BackoffMin, 50*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
	def(&c.Tick, 200*time.Millisecond)
	def(&c.HeartbeatInterval, 10*time.Second)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.MaxConcurrentLoads <= 0 {
		c.MaxConcurrentLoads = 2
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), newRequestID()[:8])
	}
	for i := range c.Namespaces {
		if c.Namespaces[i].Step == 0 {
			c.Namespaces[i].Step = DefaultStep
		}
	}
}

// Allocator hands out IDs for its namespaces. It is safe for concurrent use.
// Construct it with New and stop it with Close.
type Allocator struct {
	cfg       Config
	store     Store
	log       *slog.Logger
	table     atomic.Pointer[nsTable] // copy-on-write under learnMu
	learnMu   sync.Mutex              // serializes learning namespaces, and Close against it
	runCtx    context.Context         // the loaders' context
	loadSlots chan struct{}

	closing   chan struct{}
	closed    atomic.Bool
	closeOnce sync.Once
	cancel    context.CancelFunc
	loaders   sync.WaitGroup
	janitor   sync.WaitGroup

	lastHeartbeat atomic.Int64 // unix nanoseconds of the last successful heartbeat
	swept         atomic.Uint64
	strayDone     atomic.Uint64
}

// nsTable is the namespaces served, immutable once published: Next and Done
// read it without a lock.
type nsTable struct {
	byName  map[string]*nsAlloc
	ordered []*nsAlloc // by range start, for Done
}

// namespaces is the current table.
func (a *Allocator) namespaces() *nsTable { return a.table.Load() }

// find returns the namespace whose range holds id, by binary search over
// the disjoint ranges; it allocates nothing.
func (t *nsTable) find(id uint64) *nsAlloc {
	lo, hi := 0, len(t.ordered)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.ordered[m].ns.End <= id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(t.ordered) && id >= t.ordered[lo].ns.Start {
		return t.ordered[lo]
	}
	return nil
}

// with is t plus n, as a new table.
func (t *nsTable) with(n *nsAlloc) *nsTable {
	nt := &nsTable{byName: make(map[string]*nsAlloc, len(t.byName)+1), ordered: make([]*nsAlloc, 0, len(t.ordered)+1)}
	for k, v := range t.byName {
		nt.byName[k] = v
	}
	nt.byName[n.ns.Name] = n
	nt.ordered = append(append(nt.ordered, t.ordered...), n)
	sort.Slice(nt.ordered, func(i, j int) bool { return nt.ordered[i].ns.Start < nt.ordered[j].ns.Start })
	return nt
}

func (a *Allocator) newNS(ns Namespace) *nsAlloc {
	n := &nsAlloc{a: a, ns: ns, kick: make(chan struct{}, 1), ready: make(chan struct{})}
	n.live.Store(&[]*idRange{})
	n.progress.Store(a.cfg.Now().UnixNano())
	return n
}

// learn adds a namespace Config.Lookup finds and starts its loader. Two
// callers asking at once learn it once.
func (a *Allocator) learn(ctx context.Context, name string) (*nsAlloc, error) {
	if a.cfg.Lookup == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownNamespace, name)
	}
	a.learnMu.Lock()
	defer a.learnMu.Unlock()
	t := a.namespaces()
	if n := t.byName[name]; n != nil {
		return n, nil
	}
	if a.closed.Load() {
		return nil, ErrClosed
	}
	ns, err := a.cfg.Lookup(ctx, name)
	if err != nil {
		if errors.Is(err, ErrUnknownNamespace) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: namespace %s: look up: %w", ErrUnavailable, name, err)
	}
	if ns.Name != name {
		return nil, fmt.Errorf("%w: looking up namespace %q found %q", ErrConfig, name, ns.Name)
	}
	if ns.Step == 0 {
		ns.Step = DefaultStep
	}
	all := make([]Namespace, 0, len(t.ordered)+1)
	for _, n := range t.ordered {
		all = append(all, n.ns)
	}
	if err := validateNamespaces(append(all, ns)); err != nil {
		return nil, err
	}
	n := a.newNS(ns)
	a.table.Store(t.with(n))
	a.loaders.Add(1)
	go n.run(a.runCtx)
	a.log.Info("idalloc: serving a new namespace", "namespace", name)
	return n, nil
}

// New checks the configuration (overlapping namespaces are rejected with
// ErrConfig), makes sure each namespace's counter row exists with the same
// bounds, and starts one loader per namespace, which leases the first
// segment at once. Use WaitLoaded to wait for it (the startup probe).
func New(ctx context.Context, store Store, cfg Config) (*Allocator, error) {
	cfg.Namespaces = append([]Namespace(nil), cfg.Namespaces...)
	cfg.setDefaults()
	if err := validateNamespaces(cfg.Namespaces); err != nil {
		return nil, err
	}
	for _, ns := range cfg.Namespaces {
		if err := store.EnsureNamespace(ctx, ns); err != nil {
			return nil, fmt.Errorf("idalloc: namespace %s: %w", ns.Name, err)
		}
	}
	a := &Allocator{
		cfg:       cfg,
		store:     store,
		log:       cfg.Logger.With("instance", cfg.Instance),
		loadSlots: make(chan struct{}, cfg.MaxConcurrentLoads),
		closing:   make(chan struct{}),
	}
	a.lastHeartbeat.Store(cfg.Now().UnixNano())
	t := &nsTable{byName: map[string]*nsAlloc{}}
	for _, ns := range cfg.Namespaces {
		t = t.with(a.newNS(ns))
	}
	a.table.Store(t)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.runCtx, a.cancel = runCtx, cancel
	for _, n := range t.ordered {
		a.loaders.Add(1)
		go n.run(runCtx)
	}
	a.janitor.Add(1)
	go a.runJanitor(runCtx)
	return a, nil
}

// Instance is the name this allocator records in the audit.
func (a *Allocator) Instance() string { return a.cfg.Instance }

// Next hands out the next ID of namespace. On the fast path it is one atomic
// add and allocates nothing. When the current range is used up it switches
// to the standby, or waits for the loader until ctx is done and then returns
// an error wrapping ErrUnavailable (and the loader's last failure). It does
// not wait at all when the loader is backing off past ctx's deadline. It
// returns ErrExhausted once the namespace's last ID has been handed out,
// ErrFenced while the authority is fenced and ErrClosed after Close.
//
// A namespace not configured is looked up (Config.Lookup) the first time,
// and then served like the others; without a Lookup, or when the authority
// has none of that name, Next returns an error wrapping
// ErrUnknownNamespace.
//
// Every ID returned must be followed by exactly one Done (see the package
// documentation).
func (a *Allocator) Next(ctx context.Context, namespace string) (uint64, error) {
	n := a.namespaces().byName[namespace]
	if n == nil {
		var err error
		if n, err = a.learn(ctx, namespace); err != nil {
			return 0, err
		}
	}
	if r := n.cur.Load(); r != nil {
		if id, off, ok := r.take(); ok {
			if off == r.prefetchAt {
				n.wake()
			}
			return id, nil
		}
	}
	return n.nextSlow(ctx)
}

// Done records that the create transaction using id (returned by Next) has
// finished and that no further transaction will use id; committed says
// whether it committed. Once every ID handed out from a used-up or retired
// range is done, the loader seals the range. Done never blocks or allocates.
// An id this allocator does not have open is counted in Stats.StrayDone.
func (a *Allocator) Done(id uint64, committed bool) {
	if n := a.namespaces().find(id); n != nil {
		n.done(id, committed)
		return
	}
	a.strayDone.Add(1)
}

// WaitLoaded waits until every namespace served so far (the configured ones,
// and those learned already) has a range to hand out from, or
// has failed for good (exhausted, fenced): the startup probe. It returns the
// first namespace's failure, or ctx's error.
func (a *Allocator) WaitLoaded(ctx context.Context) error {
	for _, n := range a.namespaces().ordered {
		for {
			n.mu.Lock()
			cur, fatal, ready := n.cur.Load(), n.fatal, n.ready
			n.mu.Unlock()
			if fatal != nil {
				return fmt.Errorf("idalloc: namespace %s: %w", n.ns.Name, fatal)
			}
			if cur != nil && cur.remaining() > 0 {
				break
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return fmt.Errorf("%w: namespace %s: first segment not loaded: %w", ErrUnavailable, n.ns.Name, ctx.Err())
			case <-a.closing:
				return ErrClosed
			}
		}
	}
	return nil
}

// Close drains the allocator: Next fails with ErrClosed from now on, the
// current and standby ranges are retired (their unused IDs are discarded,
// never returned to the authority), and Close waits until every handed-out
// ID has had its Done and its range is sealed, or ctx is done. Ranges still
// open then are left to the sweeper of another instance. Close returns an
// error naming how many segments were left open.
func (a *Allocator) Close(ctx context.Context) error {
	first := false
	a.closeOnce.Do(func() {
		first = true
		// Under learnMu: no namespace is learned (and no loader started)
		// once closing has begun.
		a.learnMu.Lock()
		a.closed.Store(true)
		a.learnMu.Unlock()
		close(a.closing)
		for _, n := range a.namespaces().ordered {
			n.mu.Lock()
			if cur := n.cur.Load(); cur != nil {
				n.retireLocked(cur)
			}
			if n.standby != nil {
				n.retireLocked(n.standby)
				n.standby = nil
			}
			n.mu.Unlock()
			n.wake()
		}
	})
	done := make(chan struct{})
	go func() { a.loaders.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		a.cancel()
		<-done
	}
	if first {
		a.cancel()
		a.janitor.Wait()
	}
	open := 0
	for _, n := range a.namespaces().ordered {
		open += len(*n.live.Load())
	}
	if open > 0 {
		return fmt.Errorf("idalloc: close: %d segments left open (creates still in flight): %w", open, ctx.Err())
	}
	return nil
}

// Closed reports whether Close has started.
func (a *Allocator) Closed() bool { return a.closed.Load() }

func (n *nsAlloc) nextSlow(ctx context.Context) (uint64, error) {
	waited := false
	for {
		if n.a.closed.Load() {
			return 0, ErrClosed
		}
		n.mu.Lock()
		if r := n.cur.Load(); r != nil {
			if id, off, ok := r.take(); ok {
				n.mu.Unlock()
				if off == r.prefetchAt {
					n.wake()
				}
				return id, nil
			}
		}
		if sb := n.standby; sb != nil {
			n.standby = nil
			n.cur.Store(sb)
			n.mu.Unlock()
			n.wake() // load the next standby
			continue
		}
		if n.fatal != nil {
			err := n.fatal
			n.mu.Unlock()
			return 0, err
		}
		ready, lastErr, retryAt := n.ready, n.lastErr, n.retryAt
		n.mu.Unlock()
		n.wake()
		if dl, ok := ctx.Deadline(); ok && lastErr != nil && dl.Before(retryAt) {
			return 0, n.unavailable(lastErr)
		}
		if !waited {
			waited = true
			n.waits.Add(1)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			if lastErr != nil {
				return 0, n.unavailable(fmt.Errorf("%w (last load failure: %w)", ctx.Err(), lastErr))
			}
			return 0, n.unavailable(ctx.Err())
		case <-n.a.closing:
			return 0, ErrClosed
		}
	}
}

func (n *nsAlloc) unavailable(cause error) error {
	return fmt.Errorf("%w: namespace %s: %w", ErrUnavailable, n.ns.Name, cause)
}
