package idalloc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
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

// Stats is one namespace's allocator state, for metrics and probes.
type Stats struct {
	Namespace        string
	CurrentRemaining uint64
	StandbyRemaining uint64
	// Rate is the observed rate of this instance in IDs per second, and
	// SecondsLeft the current plus standby runway at that rate (+Inf when
	// idle).
	Rate        float64
	SecondsLeft float64
	Loads       uint64
	Failures    uint64
	// LastFailure is the class of the last failed load ("lock_timeout",
	// "unavailable", "commit_unknown", "rejected", "fenced", "exhausted",
	// "other"), empty after a success; LastError is its error.
	LastFailure string
	LastError   error
	RetryAt     time.Time
	Fenced      bool
	Exhausted   bool
	// Waits counts Next calls that had to wait for a load.
	Waits uint64
	// OpenSegments are leased and not yet sealed; Sealed counts seals.
	OpenSegments int
	Sealed       uint64
	// Discarded counts IDs of retired ranges that were never handed out.
	Discarded uint64
	StrayDone uint64
	// PendingRequest is a lease request whose outcome is still unknown.
	PendingRequest bool
	// FailuresByClass counts failed loads by class (every class of
	// Classes is present).
	FailuresByClass map[string]uint64
	// Uncommitted counts IDs handed out whose create did not commit
	// (rolled back or failed): waste of the create path.
	Uncommitted uint64
	// SweptSegments counts segments of silent instances this allocator's
	// sweeper sealed (allocator-wide, the same in every namespace).
	SweptSegments uint64
	// WitnessSkipped counts witness reads or advances that failed and
	// were skipped (Config.WitnessBestEffort).
	WitnessSkipped uint64
}

// Stats reports namespace's state.
func (a *Allocator) Stats(namespace string) (Stats, error) {
	n := a.byName[namespace]
	if n == nil {
		return Stats{}, fmt.Errorf("%w: %q", ErrUnknownNamespace, namespace)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Stats{
		Namespace:      namespace,
		Rate:           n.rate,
		Loads:          n.loads.Load(),
		Failures:       n.failuresTotal.Load(),
		LastError:      n.lastErr,
		LastFailure:    classify(n.lastErr),
		RetryAt:        n.retryAt,
		Fenced:         errors.Is(n.fatal, ErrFenced),
		Exhausted:      errors.Is(n.fatal, ErrExhausted),
		Waits:          n.waits.Load(),
		OpenSegments:   len(*n.live.Load()),
		Sealed:         n.sealed.Load(),
		Discarded:      n.discarded.Load(),
		StrayDone:      n.strayDone.Load() + a.strayDone.Load(),
		PendingRequest: n.pendingReq.Load() != nil,
		Uncommitted:    n.uncommitted.Load(),
		SweptSegments:  a.swept.Load(),
		WitnessSkipped: n.witnessSkipped.Load(),
	}
	s.FailuresByClass = make(map[string]uint64, len(classes))
	for i, c := range classes {
		s.FailuresByClass[c] = n.failures[i].Load()
	}
	if cur := n.cur.Load(); cur != nil {
		s.CurrentRemaining = cur.remaining()
	}
	if n.standby != nil {
		s.StandbyRemaining = n.standby.remaining()
	}
	s.SecondsLeft = math.Inf(1)
	if s.Rate > 0 {
		s.SecondsLeft = float64(s.CurrentRemaining+s.StandbyRemaining) / s.Rate
	}
	return s, nil
}

// Progress is the oldest of the loaders' last turns round their loop: a
// loader turns at least every Tick, and at most LoadTimeout per lease or
// seal later while the authority is down, so an old Progress means a stuck
// process, not an outage. Loaders stop after Close: do not judge a
// closed allocator by it (see Closed).
func (a *Allocator) Progress() time.Time {
	var oldest int64
	for _, n := range a.ordered {
		if p := n.progress.Load(); oldest == 0 || p < oldest {
			oldest = p
		}
	}
	return time.Unix(0, oldest)
}

// Closed reports whether Close has started.
func (a *Allocator) Closed() bool { return a.closed.Load() }

// Capacity reports namespace's space accounting as the authority sees it
// (the store must implement CapacityReader), with the rate raised to this
// instance's observed rate when that is higher.
func (a *Allocator) Capacity(ctx context.Context, namespace string) (Capacity, error) {
	n := a.byName[namespace]
	if n == nil {
		return Capacity{}, fmt.Errorf("%w: %q", ErrUnknownNamespace, namespace)
	}
	cr, ok := a.store.(CapacityReader)
	if !ok {
		return Capacity{}, errors.New("idalloc: capacity: store does not report capacity")
	}
	c, err := cr.Capacity(ctx, namespace)
	if err != nil {
		return Capacity{}, fmt.Errorf("idalloc: capacity: %w", err)
	}
	n.mu.Lock()
	local := n.rate
	n.mu.Unlock()
	if local > c.Rate {
		c.Rate = local
	}
	c.DaysLeft = DaysLeft(c.Remaining, c.Rate)
	return c, nil
}

// DaysLeft is remaining IDs at rate IDs per second, in days (+Inf at rate 0).
func DaysLeft(remaining uint64, rate float64) float64 {
	if rate <= 0 {
		return math.Inf(1)
	}
	return float64(remaining) / rate / 86400
}

// nsAlloc is one namespace's double buffer and loader.
type nsAlloc struct {
	a  *Allocator
	ns Namespace

	// cur is the range Next takes from without a lock.
	cur atomic.Pointer[idRange]
	// live holds every leased range not yet sealed (copy-on-write under
	// mu), so Done finds an ID's range without a lock.
	live atomic.Pointer[[]*idRange]
	// kick wakes the loader; a full channel means a wake-up is pending.
	kick chan struct{}

	mu      sync.Mutex
	standby *idRange
	ready   chan struct{} // closed and replaced whenever waiters should look again
	fatal   error         // ErrExhausted or ErrFenced (wrapped)
	lastErr error
	retryAt time.Time
	fails   int     // consecutive failures, for backoff
	rate    float64 // IDs per second, EWMA

	// Owned by the loader goroutine.
	pendingReq   atomic.Pointer[string] // lease request id to retry (outcome unknown or failed)
	highWater    uint64                 // end of the highest segment this process got
	maxEpoch     int64
	sealedIssued uint64
	lastIssued   uint64
	lastSample   time.Time
	instRate     float64

	loads, failuresTotal, waits, sealed, discarded, strayDone atomic.Uint64
	// uncommitted counts Done(id, false): IDs whose create did not commit.
	uncommitted atomic.Uint64
	failures    [len(classes)]atomic.Uint64 // by classes index
	// progress is when the loader last went round its loop (Unix
	// nanoseconds): the liveness probe's evidence of progress.
	progress atomic.Int64

	// witnessSkipped counts best-effort witness failures.
	witnessSkipped atomic.Uint64
}

func (n *nsAlloc) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

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

func (n *nsAlloc) done(id uint64, committed bool) {
	for _, r := range *n.live.Load() {
		if r.contains(id) {
			if committed {
				r.committed.Add(1)
			} else {
				n.uncommitted.Add(1)
			}
			d := r.done.Add(1)
			if d == r.size || (r.retired.Load() && d >= r.handed.Load()) {
				n.wake()
			}
			return
		}
	}
	n.strayDone.Add(1)
}

// retireLocked stops r handing out IDs and counts its unused IDs as
// discarded. n.mu is held.
func (n *nsAlloc) retireLocked(r *idRange) {
	if r.retired.Load() {
		return
	}
	r.retire()
	n.discarded.Add(r.size - r.handed.Load())
}

func (n *nsAlloc) run(ctx context.Context) {
	defer n.a.loaders.Done()
	t := time.NewTicker(n.a.cfg.Tick)
	defer t.Stop()
	for {
		n.progress.Store(n.a.cfg.Now().UnixNano())
		n.sealFinished(ctx)
		if n.a.closed.Load() {
			if len(*n.live.Load()) == 0 {
				return
			}
		} else {
			n.sampleRate()
			n.maybeLoad(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		case <-t.C:
		}
	}
}

// trigger is how many remaining IDs make the loader fetch the standby.
func (n *nsAlloc) trigger(size uint64, rate float64) uint64 {
	t := size / 2
	if need := rate * n.a.cfg.PrefetchAhead.Seconds(); need > float64(t) {
		if need >= float64(size) {
			return size
		}
		t = uint64(need)
	}
	return t
}

func (n *nsAlloc) sampleRate() {
	now := n.a.cfg.Now()
	issued := n.sealedIssued
	for _, r := range *n.live.Load() {
		issued += r.taken()
	}
	if n.lastSample.IsZero() {
		n.lastSample, n.lastIssued = now, issued
		return
	}
	dt := now.Sub(n.lastSample).Seconds()
	if dt < 0.05 {
		return
	}
	inst := float64(issued-n.lastIssued) / dt
	alpha := 1 - math.Exp(-dt/5)
	n.mu.Lock()
	n.rate += alpha * (inst - n.rate)
	n.mu.Unlock()
	n.instRate = inst
	n.lastSample, n.lastIssued = now, issued
}

func (n *nsAlloc) maybeLoad(ctx context.Context) {
	now := n.a.cfg.Now()
	n.mu.Lock()
	rate := max(n.rate, n.instRate)
	cur := n.cur.Load()
	need := n.standby == nil && !errors.Is(n.fatal, ErrExhausted) && !now.Before(n.retryAt) &&
		(cur == nil || cur.remaining() <= n.trigger(cur.size, rate))
	n.mu.Unlock()
	if !need {
		return
	}
	select {
	case n.a.loadSlots <- struct{}{}:
	default:
		n.fail(ErrRejected)
		return
	}
	started := n.a.cfg.Now()
	seg, err := n.lease(ctx)
	<-n.a.loadSlots
	if f := n.a.cfg.OnLoad; f != nil {
		f(n.ns.Name, n.a.cfg.Now().Sub(started), classify(err))
	}
	if err != nil {
		n.fail(err)
		return
	}
	n.publish(seg, rate)
}

func (n *nsAlloc) lease(ctx context.Context) (Segment, error) {
	req := n.pendingReq.Load()
	retried := req != nil
	if req == nil {
		id := newRequestID()
		req = &id
		// Kept until a lease succeeds: a retry after any failure, above
		// all an unknown commit outcome, reuses the id and so gets the
		// committed interval back instead of a second one.
		n.pendingReq.Store(req)
	}
	n.loads.Add(1)
	started := n.a.cfg.Now()
	lctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout)
	defer cancel()
	floor, err := n.witnessFloor(lctx)
	if err != nil {
		return Segment{}, fmt.Errorf("lease segment: %w", err)
	}
	seg, err := n.a.store.Lease(lctx, LeaseRequest{RequestID: *req, Namespace: n.ns.Name, Instance: n.a.cfg.Instance, Floor: floor})
	if err != nil {
		return Segment{}, fmt.Errorf("lease segment: %w", err)
	}
	n.pendingReq.Store(nil)
	n.a.lastHeartbeat.Store(started.UnixNano()) // a lease is a heartbeat too
	switch {
	case seg.Namespace != n.ns.Name || seg.Start < n.ns.Start || seg.End > n.ns.End || seg.Start >= seg.End:
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) in %q, outside namespace %s [%d, %d)",
			ErrFenced, seg.Start, seg.End, seg.Namespace, n.ns.Name, n.ns.Start, n.ns.End)
	case seg.Start < n.highWater || seg.Epoch < n.maxEpoch:
		// The authority went back behind what this process already
		// holds (a promoted lagging replica): never hand these out.
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) epoch %d below this instance's high-water %d epoch %d",
			ErrFenced, seg.Start, seg.End, seg.Epoch, n.highWater, n.maxEpoch)
	case seg.Start < floor && !retried:
		// The store should have refused; a retry may legitimately get
		// its own earlier interval back, nothing else may start below.
		return Segment{}, fmt.Errorf("%w: lease returned [%d, %d) below the allocation witness %d",
			ErrFenced, seg.Start, seg.End, floor)
	}
	if err := n.witnessAdvance(lctx, seg.End); err != nil {
		// Retry under the same request id: it gets this very interval
		// back from the authority and records it again before using it.
		n.pendingReq.Store(req)
		return Segment{}, fmt.Errorf("lease segment: [%d, %d) confirmed but not witnessed: %w", seg.Start, seg.End, err)
	}
	n.highWater, n.maxEpoch = seg.End, seg.Epoch
	if f := n.a.cfg.OnSegment; f != nil {
		f(seg)
	}
	return seg, nil
}

// witnessFloor reads the namespace's high-water from the witness: the
// authority must be at or above it. Unreachable, it fails the lease unless
// the witness is best effort (then the floor is 0 and the lease proceeds
// unchecked, counted in Stats.WitnessSkipped).
func (n *nsAlloc) witnessFloor(ctx context.Context) (uint64, error) {
	w := n.a.cfg.Witness
	if w == nil {
		return 0, nil
	}
	// A third of the lease's time each: an unreachable witness must leave
	// a best-effort lease time to run.
	wctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout/3)
	defer cancel()
	hw, err := w.HighWater(wctx, n.ns.Name)
	if err == nil {
		return hw, nil
	}
	if n.a.cfg.WitnessBestEffort {
		n.witnessSkipped.Add(1)
		n.a.log.Warn("idalloc: allocation witness unreachable; leasing without the failover check (best effort)", "namespace", n.ns.Name, "err", err)
		return 0, nil
	}
	return 0, fmt.Errorf("%w: read allocation witness: %w", ErrStoreUnavailable, err)
}

// witnessAdvance records a confirmed segment's end in the witness before any
// of its IDs is handed out.
func (n *nsAlloc) witnessAdvance(ctx context.Context, end uint64) error {
	w := n.a.cfg.Witness
	if w == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout/3)
	defer cancel()
	err := w.Advance(wctx, n.ns.Name, end)
	if err == nil {
		return nil
	}
	if n.a.cfg.WitnessBestEffort {
		// A later successful advance covers this end too: the witness
		// keeps a high-water, not a list.
		n.witnessSkipped.Add(1)
		n.a.log.Warn("idalloc: allocation witness not advanced; segment used anyway (best effort)", "namespace", n.ns.Name, "end", end, "err", err)
		return nil
	}
	return fmt.Errorf("%w: advance allocation witness: %w", ErrStoreUnavailable, err)
}

func (n *nsAlloc) publish(seg Segment, rate float64) {
	size := seg.End - seg.Start
	r := newRange(seg, size-n.trigger(size, rate), n.a.cfg.Now())
	n.mu.Lock()
	live := append(append(make([]*idRange, 0, len(*n.live.Load())+1), *n.live.Load()...), r)
	n.live.Store(&live) // before any Next can see r, so Done finds it
	switch cur := n.cur.Load(); {
	case n.a.closed.Load():
		n.retireLocked(r)
	case cur == nil || cur.remaining() == 0:
		n.cur.Store(r)
	default:
		n.standby = r
	}
	n.lastErr, n.fails, n.retryAt = nil, 0, time.Time{}
	if errors.Is(n.fatal, ErrFenced) {
		n.fatal = nil
	}
	close(n.ready)
	n.ready = make(chan struct{})
	n.mu.Unlock()
	n.wake()
}

func (n *nsAlloc) fail(err error) {
	n.failuresTotal.Add(1)
	class := classify(err)
	n.failures[classIndex(class)].Add(1)
	n.mu.Lock()
	n.fails++
	n.lastErr = err
	backoff := n.a.cfg.BackoffMax
	if shift := n.fails - 1; shift < 20 {
		backoff = min(n.a.cfg.BackoffMax, n.a.cfg.BackoffMin<<shift)
	}
	switch class {
	case "exhausted", "fenced":
		n.fatal = err
		backoff = n.a.cfg.BackoffMax
	}
	// ±20% jitter so instances do not retry in step.
	backoff = time.Duration(float64(backoff) * (0.8 + 0.4*mathrand.Float64()))
	n.retryAt = n.a.cfg.Now().Add(backoff)
	close(n.ready)
	n.ready = make(chan struct{})
	n.mu.Unlock()
	n.a.log.Warn("idalloc: segment load failed", "namespace", n.ns.Name, "class", class, "backoff", backoff, "err", err)
}

// sealFinished seals every range that can no longer be used by a create.
func (n *nsAlloc) sealFinished(ctx context.Context) {
	for _, r := range *n.live.Load() {
		if !r.finished() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, n.a.cfg.LoadTimeout)
		err := n.a.store.Seal(sctx, SealRequest{RequestID: r.seg.RequestID, Instance: n.a.cfg.Instance, Used: r.committed.Load()})
		cancel()
		switch {
		case errors.Is(err, ErrUnknownSegment):
			// The authority lost the segment (a failover to a replica that
			// never had it): sealing can never succeed, and its range is
			// audited as waste by the recovery, not by this instance.
			n.a.log.Error("idalloc: segment unknown to the authority, dropped unsealed", "namespace", n.ns.Name,
				"start", r.start, "end", r.start+r.size, "err", err)
		case err != nil:
			// Retried on the next tick; sealing is idempotent.
			n.a.log.Warn("idalloc: seal segment failed", "namespace", n.ns.Name, "start", r.start, "end", r.start+r.size, "err", err)
			continue
		default:
			n.sealed.Add(1)
		}
		r.sealed.Store(true)
		n.mu.Lock()
		old := *n.live.Load()
		live := make([]*idRange, 0, len(old))
		for _, x := range old {
			if x != r {
				live = append(live, x)
			}
		}
		n.live.Store(&live)
		n.sealedIssued += r.taken()
		n.mu.Unlock()
	}
}

func (a *Allocator) runJanitor(ctx context.Context) {
	defer a.janitor.Done()
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		hctx, cancel := context.WithTimeout(ctx, a.cfg.LoadTimeout)
		swept, err := a.store.Heartbeat(hctx, a.cfg.Instance, a.cfg.AbandonAfter)
		cancel()
		now := a.cfg.Now()
		if err == nil {
			a.lastHeartbeat.Store(now.UnixNano())
			if swept > 0 {
				a.swept.Add(uint64(swept))
				a.log.Info("idalloc: sealed segments of silent instances", "segments", swept)
			}
		} else if ctx.Err() == nil {
			a.log.Warn("idalloc: heartbeat failed", "err", err)
		}
		if a.cfg.AbandonAfter > 0 && now.Sub(time.Unix(0, a.lastHeartbeat.Load())) > a.cfg.AbandonAfter/2 {
			a.selfFence()
		}
		select {
		case <-ctx.Done():
			return
		case <-a.closing:
			return
		case <-t.C:
		}
	}
}

// selfFence retires every range: another instance may soon consider this one
// dead and seal its segments.
func (a *Allocator) selfFence() {
	for _, n := range a.ordered {
		n.mu.Lock()
		retired := false
		if cur := n.cur.Load(); cur != nil && !cur.retired.Load() && cur.remaining() > 0 {
			n.retireLocked(cur)
			retired = true
		}
		if n.standby != nil {
			n.retireLocked(n.standby)
			n.standby = nil
			retired = true
		}
		n.mu.Unlock()
		if retired {
			a.log.Warn("idalloc: no heartbeat for half the abandon period: ranges retired", "namespace", n.ns.Name)
			n.wake()
		}
	}
}

// newRequestID returns a random UUID (version 4) string.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
