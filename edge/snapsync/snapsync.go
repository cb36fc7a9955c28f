// Package snapsync keeps an edge's snapshot current: at boot it loads the
// local copy (in place, its entry sections verified in the background) or
// the newest snapshot in the JetStream object store and positions the change
// feed after it; while running it watches the bucket, verifies every newer
// snapshot, keeps it on local disk and swaps it in, and re-syncs the feed
// from a snapshot when the feed has lost events (it fell behind the stream's
// retention) or when the local copy it booted from proved corrupt.
package snapsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// ErrMismatch: a snapshot's header does not say the version its name says
// (a file put under the wrong name, or a stale copy).
var ErrMismatch = errors.New("snapshot does not match its name")

// Feed is the change feed the syncer positions.
type Feed interface {
	Restart(seq, version uint64)
	Complete() bool
	Position() changefeed.Position
}

// Config tunes a Syncer. Zero values take the defaults noted.
type Config struct {
	// Dir keeps the local copy of the newest snapshot; empty keeps none
	// (every boot then downloads).
	Dir string
	// Poll is how often the bucket is listed besides watching it (default
	// 30s): a watch can miss updates while NATS is away.
	Poll time.Duration
	// GapCheck is how often the feed is checked for lost events (default 1s).
	GapCheck time.Duration
	// BootWait bounds asking the bucket at boot when a local copy exists
	// (default 5s): with NATS down the edge serves its local copy at once.
	BootWait time.Duration
	// FetchTimeout bounds one download (default 2 minutes).
	FetchTimeout time.Duration
	// LockSnapshot keeps each mapped snapshot in service resident once it
	// is verified (snapshot.Snapshot.Lock), so that memory pressure from
	// elsewhere on the machine does not turn hits into reads from the
	// disk. It needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK of the file's size;
	// without, the edge logs that it could not and serves unlocked. Size
	// the machine for two snapshots: the next one is verified, so read in,
	// while the one in service stays locked.
	LockSnapshot bool
	Log          *slog.Logger
}

// Syncer owns the edge's snapshot lifecycle. Its counters are safe to read
// while it runs.
type Syncer struct {
	js     jetstream.JetStream
	layers *store.Layers
	feed   Feed
	cfg    Config
	log    *slog.Logger

	booted atomic.Bool
	// withdrawn is set while the snapshot in service was found corrupt by
	// the background verification and taken out of service, until a good
	// one replaces it.
	withdrawn atomic.Bool
	// verifying is set while VerifyInService reads the snapshot in service.
	verifying atomic.Bool
	// Swaps counts snapshots put in service (the boot's included);
	// Rejected counts files refused (corrupt, truncated, mismatched, bad
	// digest); Resyncs counts feed repositionings after lost events.
	// Withdrawals counts snapshots taken out of service because their
	// background verification failed; Refetches counts good snapshots put
	// in service in place of a withdrawn one.
	Swaps, Rejected, Resyncs, Withdrawals, Refetches atomic.Uint64
	lastErr                                          atomic.Pointer[rejection]

	mu         sync.Mutex        // serializes sync passes
	rejected   map[string]string // object name → digest refused; not fetched again
	resyncFrom string            // snapshot the last re-sync started from
	// stopVerify ends the background verification of the snapshot in
	// service when another one replaces it (under mu).
	stopVerify context.CancelFunc
	// objMu guards objects: the watcher and sync passes both look the
	// bucket up, concurrently.
	objMu   sync.Mutex
	objects jetstream.ObjectStore // cached bucket handle
}

type rejection struct{ err error }

// New returns a Syncer installing snapshots into layers (whose Snapshots
// must be set) and positioning feed.
func New(js jetstream.JetStream, layers *store.Layers, feed Feed, cfg Config) *Syncer {
	if cfg.Poll <= 0 {
		cfg.Poll = 30 * time.Second
	}
	if cfg.GapCheck <= 0 {
		cfg.GapCheck = time.Second
	}
	if cfg.BootWait <= 0 {
		cfg.BootWait = 5 * time.Second
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 2 * time.Minute
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Syncer{js: js, layers: layers, feed: feed, cfg: cfg, log: log, rejected: map[string]string{}}
}

// Booted reports whether Boot has finished (a snapshot is in service, or
// there was none to load and the feed replays the whole stream) and no
// snapshot is withdrawn: false again while the local copy the edge booted
// from is found corrupt and a good one is fetched (Run).
func (s *Syncer) Booted() bool { return s.booted.Load() && !s.withdrawn.Load() }

// State is what can be said of the edge's snapshot.
type State int

const (
	// StateNone: no snapshot in service and none withdrawn (booting, or
	// none published yet: the stream is replayed into an empty store).
	StateNone State = iota
	// StateUnverified: in service with its entry sections not checked yet
	// (a local copy opened in place, before or after an interrupted
	// VerifyInService).
	StateUnverified
	// StateVerifying: in service while VerifyInService checks it.
	StateVerifying
	// StateVerified: in service, every byte a lookup reads checked.
	StateVerified
	// StateWithdrawn: the snapshot that served failed verification and was
	// taken out of service; none replaces it yet.
	StateWithdrawn
	// NumStates is one more than the last State: range over
	// [StateNone, NumStates) to export one series each.
	NumStates
)

func (st State) String() string {
	switch st {
	case StateNone:
		return "none"
	case StateUnverified:
		return "unverified"
	case StateVerifying:
		return "verifying"
	case StateVerified:
		return "verified"
	case StateWithdrawn:
		return "withdrawn"
	}
	return fmt.Sprintf("State(%d)", int(st))
}

// State reports the state of the snapshot in service. Safe to call while
// the syncer runs; it does not wait for a sync pass.
func (s *Syncer) State() State {
	if s.withdrawn.Load() {
		return StateWithdrawn
	}
	l := s.layers.Snapshots.Current()
	switch {
	case l == nil:
		return StateNone
	case l.Snap.Verified():
		return StateVerified
	case s.verifying.Load():
		return StateVerifying
	}
	return StateUnverified
}

// LastRejection is the error of the last snapshot refused, or nil.
func (s *Syncer) LastRejection() error {
	if r := s.lastErr.Load(); r != nil {
		return r.err
	}
	return nil
}

func (s *Syncer) reject(err error) {
	s.Rejected.Add(1)
	s.lastErr.Store(&rejection{err})
	s.log.Error("snapshot rejected; keeping the one in service", "err", err)
}

// Boot puts the first snapshot in service and positions the feed after it:
// the local copy, or a newer one from the bucket. With a local copy it asks
// the bucket for at most BootWait (and not at all while NATS is
// disconnected), so an edge restarting during a NATS outage serves its local
// copy at once. Without one it waits for the bucket until ctx ends. When the
// bucket is confirmed empty the feed replays the stream from its start. Boot
// returns an error only when ctx ends first.
func (s *Syncer) Boot(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	local := s.loadLocal()
	if local != nil && s.js.Conn().IsConnected() {
		if err := s.checkStream(ctx, local); err != nil {
			// A copy kept from another cluster or from before the stream was
			// reset would serve another system's links: never use it.
			s.reject(err)
			s.log.Warn("snapshot: local copy does not belong to this change stream; ignoring it", "name", local.Name, "err", err)
			local = nil
		}
	}
	backoff := 250 * time.Millisecond
	for {
		if local != nil && !s.js.Conn().IsConnected() {
			s.log.Warn("snapshot: NATS unreachable at boot; serving the local copy", "name", local.Name)
			break
		}
		wait := s.cfg.FetchTimeout
		if local != nil {
			wait = s.cfg.BootWait
		}
		bctx, cancel := context.WithTimeout(ctx, wait)
		l, none, err := s.fetchNewest(bctx, local)
		cancel()
		if err == nil || local != nil {
			if err != nil {
				s.log.Warn("snapshot: bucket unavailable at boot; serving the local copy", "name", local.Name, "err", err)
			}
			if l != nil {
				local = l
			}
			if local != nil || none {
				break
			}
			// Every candidate was refused and there is nothing local:
			// wait for a good one like for an unreachable bucket.
		} else {
			s.log.Warn("snapshot: bucket unavailable at boot; retrying", "err", err, "retry_in", backoff)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	if local != nil && s.js.Conn().IsConnected() {
		if err := s.checkStream(ctx, local); err != nil {
			s.reject(err)
			s.log.Warn("snapshot: newest snapshot does not belong to this change stream; replaying the stream instead", "name", local.Name, "err", err)
			local = nil
		}
	}
	if local != nil {
		s.install(local)
		h := local.Snap.Header
		s.feed.Restart(h.StreamSeq, h.ChangeVersion)
	} else {
		s.log.Info("snapshot: none published yet; replaying the whole change stream")
	}
	s.booted.Store(true)
	return nil
}

// Run keeps the snapshot current until ctx ends: on every bucket update, on
// every Poll, and when the feed reports lost events. It first starts
// verifying the snapshot Boot put in service if that one is unverified (see
// VerifyInService). It returns nil when ctx ends.
func (s *Syncer) Run(ctx context.Context) error {
	trigger := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.watch(ctx, trigger) }()
	go func() {
		defer wg.Done()
		if err := s.VerifyInService(ctx); err != nil && ctx.Err() == nil {
			select { // fetch a good one now
			case trigger <- struct{}{}:
			default:
			}
		}
	}()
	defer wg.Wait()
	poll := time.NewTicker(s.cfg.Poll)
	defer poll.Stop()
	gapTick := time.NewTicker(s.cfg.GapCheck)
	defer gapTick.Stop()
	first := true // a first pass at once: boot may have used a local copy without asking the bucket
	for {
		if first {
			first = false
		} else {
			select {
			case <-ctx.Done():
				return nil
			case <-trigger:
			case <-poll.C:
			case <-gapTick.C:
				if s.feed.Complete() && !s.withdrawn.Load() {
					continue
				}
			}
		}
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("snapshot sync", "err", err)
		}
	}
}

// watch turns bucket updates into triggers; it re-watches after errors.
func (s *Syncer) watch(ctx context.Context, trigger chan<- struct{}) {
	backoff := time.Second
	for ctx.Err() == nil {
		if err := s.watchOnce(ctx, trigger); err != nil {
			s.log.Debug("snapshot watch", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		// Capped low: the bucket appears when control first publishes, and
		// a watch is what makes a swap prompt.
		backoff = min(backoff*2, 5*time.Second, s.cfg.Poll)
	}
}

func (s *Syncer) watchOnce(ctx context.Context, trigger chan<- struct{}) error {
	obs, err := s.bucket(ctx)
	if err != nil {
		return err
	}
	w, err := obs.Watch(ctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case info, ok := <-w.Updates():
			if !ok {
				return errors.New("watch closed")
			}
			if info == nil {
				continue
			}
			select { // coalesce: one pending trigger is enough
			case trigger <- struct{}{}:
			default:
			}
		}
	}
}

// Sync makes one pass: swap in a newer snapshot if the bucket has one (any,
// after a withdrawal), and re-position the feed after a snapshot if it lost
// events.
func (s *Syncer) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.layers.Snapshots.Current()
	l, _, err := s.fetchNewest(ctx, cur)
	if err != nil {
		return err
	}
	gap := !s.feed.Complete()
	if l != nil {
		s.install(l)
		h := l.Snap.Header
		// A feed behind the new snapshot skips ahead: the file holds
		// everything up to its position. A feed with lost events replays
		// from the snapshot, which fills the hole if it is new enough.
		// After a withdrawal the overlay no longer holds what the
		// withdrawn file superseded, and the new file may be older than
		// it: replay from the new one.
		if gap || s.withdrawn.Load() || s.feed.Position().Seq < h.StreamSeq {
			s.resync(l, gap)
		}
		if s.withdrawn.Swap(false) {
			s.Refetches.Add(1)
		}
		return nil
	}
	if cur == nil && s.withdrawn.Load() {
		return errors.New("snapshot withdrawn and none to replace it in the bucket yet")
	}
	if !gap || cur == nil || s.resyncFrom == cur.Name {
		return nil // nothing newer to re-sync from: the next build will do
	}
	first, err := s.streamFirstSeq(ctx)
	if err != nil {
		return err
	}
	if cur.Snap.Header.StreamSeq+1 < first {
		s.log.Error("change feed lost events and the newest snapshot is older than the stream; waiting for a newer snapshot",
			"snapshot_seq", cur.Snap.Header.StreamSeq, "stream_first_seq", first)
		s.resyncFrom = cur.Name // log once per snapshot
		return nil
	}
	s.resync(cur, true)
	return nil
}

func (s *Syncer) resync(l *store.Loaded, gap bool) {
	h := l.Snap.Header
	if gap {
		s.Resyncs.Add(1)
		s.resyncFrom = l.Name
		dropped := s.layers.Resynced(l)
		s.log.Warn("change feed re-synced from a snapshot after lost events", "name", l.Name, "stream_seq", h.StreamSeq,
			"overlay_dropped", dropped)
	}
	s.feed.Restart(h.StreamSeq, h.ChangeVersion)
}

func (s *Syncer) install(l *store.Loaded) {
	if s.stopVerify != nil {
		s.stopVerify() // the snapshot it verifies leaves service
		s.stopVerify = nil
	}
	var refused int64
	if d := s.layers.Domains; d != nil {
		refused = d.Refused.Load()
	}
	// Install hands the file's domain table to the layers' Domains
	// (Replace) before its links serve.
	pruned := s.layers.Install(l)
	s.Swaps.Add(1)
	if d := s.layers.Domains; d != nil {
		if n := d.Refused.Load() - refused; n > 0 {
			s.log.Error("snapshot: domains of its table refused as invalid; they keep their previous state", "name", l.Name, "refused", n)
		}
	}
	if s.booted.Load() && l.Snap.Verified() {
		// A swap while running: off the start-up path. Boot's snapshot is
		// locked by VerifyInService once Run starts.
		s.lock(l)
	}
	h := l.Snap.Header
	s.log.Info("snapshot in service", "name", l.Name, "entries", h.Entries, "domains", len(l.Snap.Domains()), "bytes", l.Size, "mapped", l.Snap.Mapped(),
		"verified", l.Snap.Verified(), "change_version", h.ChangeVersion, "stream_seq", h.StreamSeq, "overlay_pruned", pruned)
}

// VerifyInService verifies the entry sections of the snapshot in service
// if they are not verified yet: the local copy Boot loaded in place serves
// while this reads it (a download is verified before it serves). A copy
// that fails is refused like any bad file (counted in Rejected, renamed
// *.rejected) and withdrawn from service at once: lookups fall through to
// the overlay, the cache and the authority, Booted reports false, and the
// next sync passes (Run makes one every GapCheck meanwhile) fetch a good
// snapshot from the bucket and replay the stream from it. With
// LockSnapshot, the snapshot in service is locked in memory once verified
// (here, or before it served). It returns the verification's error, or
// ctx's when ctx ends or the snapshot is replaced first.
func (s *Syncer) VerifyInService(ctx context.Context) error {
	s.mu.Lock()
	l := s.layers.Snapshots.Current()
	if l == nil || l.Snap.Verified() {
		s.lock(l) // a download Boot put in service, verified before it served
		s.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.stopVerify = cancel
	s.verifying.Store(true)
	// Cleared last: a failure is withdrawn before it stops verifying, so
	// State never shows the corrupt copy as merely unverified.
	defer s.verifying.Store(false)
	s.mu.Unlock()
	start := time.Now()
	err := l.Verify(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil {
		s.log.Info("snapshot verified", "name", l.Name, "bytes", l.Size, "took", time.Since(start).Round(time.Millisecond))
		s.mu.Lock()
		if s.layers.Snapshots.Current() == l { // not replaced meanwhile
			s.lock(l)
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = fmt.Errorf("snapshot %s: %w", l.Name, err)
	s.reject(err)
	if s.layers.Withdraw(l) {
		s.Withdrawals.Add(1)
		s.withdrawn.Store(true)
		s.log.Error("snapshot in service failed verification; withdrawn, fetching a good one", "name", l.Name, "err", err)
	}
	if s.cfg.Dir != "" && filepath.Dir(l.Name) == filepath.Clean(s.cfg.Dir) { // a local copy: its name is its path
		if err := os.Rename(l.Name, l.Name+".rejected"); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("snapshot: set aside rejected local copy", "err", err)
		}
	}
	return err
}

// lock keeps l resident when the config asks for it (under mu, so that a
// swap cannot retire l meanwhile and leave a retired file locked).
func (s *Syncer) lock(l *store.Loaded) {
	if !s.cfg.LockSnapshot || l == nil || !l.Snap.Mapped() || l.Snap.Locked() {
		return
	}
	start := time.Now()
	if err := l.Snap.Lock(); err != nil {
		s.log.Warn("snapshot: cannot keep it resident; memory pressure may make hits read from the disk", "name", l.Name, "err", err)
		return
	}
	s.log.Info("snapshot locked in memory", "name", l.Name, "bytes", l.Size, "took", time.Since(start).Round(time.Millisecond))
}

// ErrForeign means a snapshot was not built from this change stream: the
// stream's event at the snapshot's position is another version, or the
// stream has not reached that position at all.
var ErrForeign = errors.New("snapshot: not built from this change stream")

// checkStream proves, where the stream still holds the snapshot's position,
// that the event there is the snapshot's change version. A position the
// stream has aged out cannot be checked; the feed's gap detection covers
// that case.
func (s *Syncer) checkStream(ctx context.Context, l *store.Loaded) error {
	h := l.Snap.Header
	if h.StreamSeq == 0 {
		return nil // built before anything was published: valid for any stream
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BootWait)
	defer cancel()
	st, err := s.js.Stream(ctx, linkevent.Stream)
	if err != nil {
		// Missing (control has not created it yet) or unreachable: nothing
		// to check against; static stability wins and the feed checks later.
		return nil
	}
	state := st.CachedInfo().State
	if state.LastSeq < h.StreamSeq {
		return fmt.Errorf("%w: stream ends at %d, snapshot is at %d", ErrForeign, state.LastSeq, h.StreamSeq)
	}
	msg, err := st.GetMsg(ctx, h.StreamSeq)
	if err != nil {
		return nil // aged out or unreachable: cannot be checked here
	}
	// A position is a message's sequence and the version of its last
	// event: a batch's inner versions are not positions.
	evs, err := linkevent.Decode(msg.Data, nil)
	var last uint64
	if err == nil {
		last = evs[len(evs)-1].Version
	}
	if last != h.ChangeVersion {
		return fmt.Errorf("%w: stream sequence %d holds version %d, snapshot says %d", ErrForeign, h.StreamSeq, last, h.ChangeVersion)
	}
	return nil
}

func (s *Syncer) streamFirstSeq(ctx context.Context) (uint64, error) {
	st, err := s.js.Stream(ctx, linkevent.Stream)
	if err != nil {
		return 0, fmt.Errorf("change stream: %w", err)
	}
	return st.CachedInfo().State.FirstSeq, nil
}

func (s *Syncer) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	s.objMu.Lock()
	defer s.objMu.Unlock()
	if s.objects != nil {
		return s.objects, nil
	}
	obs, err := s.js.ObjectStore(ctx, snapshot.Bucket)
	if err != nil {
		return nil, err
	}
	s.objects = obs
	return obs, nil
}
