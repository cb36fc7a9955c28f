package idalloc

import (
	"context"
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
	// Namespaces are the namespaces this allocator serves; their ranges
	// must be pairwise disjoint.
	Namespaces []Namespace
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
	byName    map[string]*nsAlloc
	ordered   []*nsAlloc // by range start, for Done
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
		byName:    make(map[string]*nsAlloc, len(cfg.Namespaces)),
		loadSlots: make(chan struct{}, cfg.MaxConcurrentLoads),
		closing:   make(chan struct{}),
	}
	a.lastHeartbeat.Store(cfg.Now().UnixNano())
	for _, ns := range cfg.Namespaces {
		n := &nsAlloc{a: a, ns: ns, kick: make(chan struct{}, 1), ready: make(chan struct{})}
		n.live.Store(&[]*idRange{})
		n.progress.Store(cfg.Now().UnixNano())
		a.byName[ns.Name] = n
		a.ordered = append(a.ordered, n)
	}
	sort.Slice(a.ordered, func(i, j int) bool { return a.ordered[i].ns.Start < a.ordered[j].ns.Start })
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	for _, n := range a.ordered {
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
// Every ID returned must be followed by exactly one Done (see the package
// documentation).
func (a *Allocator) Next(ctx context.Context, namespace string) (uint64, error) {
	n := a.byName[namespace]
	if n == nil {
		return 0, fmt.Errorf("%w: %q", ErrUnknownNamespace, namespace)
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
	for _, n := range a.ordered {
		if id >= n.ns.Start && id < n.ns.End {
			n.done(id, committed)
			return
		}
	}
	a.strayDone.Add(1)
}

// WaitLoaded waits until every namespace has a range to hand out from, or
// has failed for good (exhausted, fenced): the startup probe. It returns the
// first namespace's failure, or ctx's error.
func (a *Allocator) WaitLoaded(ctx context.Context) error {
	for _, n := range a.ordered {
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
		a.closed.Store(true)
		close(a.closing)
		for _, n := range a.ordered {
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
	for _, n := range a.ordered {
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
