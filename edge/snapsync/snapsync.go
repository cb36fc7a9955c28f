// Package snapsync keeps an edge's snapshot current: at boot it loads the
// local copy or the newest snapshot in the JetStream object store and
// positions the change feed after it; while running it watches the bucket,
// verifies every newer snapshot, keeps it on local disk and swaps it in, and
// re-syncs the feed from a snapshot when the feed has lost events (it fell
// behind the stream's retention).
package snapsync

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/changefeed"
	"github.com/edgelink/edgelink/edge/store"
	"github.com/edgelink/edgelink/internal/atomicfile"
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
	// Swaps counts snapshots put in service (the boot's included);
	// Rejected counts files refused (corrupt, truncated, mismatched, bad
	// digest); Resyncs counts feed repositionings after lost events.
	Swaps, Rejected, Resyncs atomic.Uint64
	lastErr                  atomic.Pointer[rejection]

	mu         sync.Mutex        // serializes sync passes
	rejected   map[string]string // object name → digest refused; not fetched again
	resyncFrom string            // snapshot the last re-sync started from
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

// Booted reports whether Boot has finished: a snapshot is in service, or
// there was none to load and the feed replays the whole stream.
func (s *Syncer) Booted() bool { return s.booted.Load() }

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
// every Poll, and when the feed reports lost events. It returns nil when ctx
// ends.
func (s *Syncer) Run(ctx context.Context) error {
	trigger := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.watch(ctx, trigger) }()
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
				if s.feed.Complete() {
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

// Sync makes one pass: swap in a newer snapshot if the bucket has one, and
// re-position the feed after a snapshot if it lost events.
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
		if gap || s.feed.Position().Seq < h.StreamSeq {
			s.resync(l, gap)
		}
		return nil
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
		s.log.Warn("change feed re-synced from a snapshot after lost events", "name", l.Name, "stream_seq", h.StreamSeq)
	}
	s.feed.Restart(h.StreamSeq, h.ChangeVersion)
}

func (s *Syncer) install(l *store.Loaded) {
	pruned := s.layers.Install(l)
	s.Swaps.Add(1)
	h := l.Snap.Header
	s.log.Info("snapshot in service", "name", l.Name, "entries", h.Entries, "bytes", l.Size,
		"change_version", h.ChangeVersion, "stream_seq", h.StreamSeq, "overlay_pruned", pruned)
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

// fetchNewest downloads and verifies the newest snapshot in the bucket that
// is newer than cur (any, when cur is nil), trying older ones when the newest
// is refused. It returns nil without error when there is none; none reports
// that the bucket holds no snapshot at all (or does not exist yet).
func (s *Syncer) fetchNewest(ctx context.Context, cur *store.Loaded) (l *store.Loaded, none bool, err error) {
	obs, err := s.bucket(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("snapshot bucket: %w", err)
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list snapshots: %w", err)
	}
	type candidate struct {
		v    uint64
		info *jetstream.ObjectInfo
	}
	var cands []candidate
	for _, info := range infos {
		if v, ok := snapshot.ParseObjectName(info.Name); ok && !info.Deleted {
			cands = append(cands, candidate{v, info})
		}
	}
	if len(cands) == 0 {
		return nil, true, nil
	}
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.v, a.v) }) // newest first
	for _, c := range cands {
		if cur != nil && c.v <= cur.Snap.Header.ChangeVersion {
			break
		}
		if s.rejected[c.info.Name] == c.info.Digest {
			continue // refused before, unchanged since
		}
		l, err := s.fetch(ctx, obs, c.info, c.v)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, err
			}
			var dl downloadError
			if errors.As(err, &dl) {
				s.log.Warn("snapshot download failed; will retry", "name", c.info.Name, "err", err)
				continue // transient (deleted by pruning, timeout): try again later
			}
			s.rejected[c.info.Name] = c.info.Digest
			s.reject(err)
			continue
		}
		return l, false, nil
	}
	return nil, false, nil
}

// downloadError is a failure to get the bytes, not a verdict on them.
type downloadError struct{ err error }

func (e downloadError) Error() string { return e.err.Error() }
func (e downloadError) Unwrap() error { return e.err }

// fetch downloads one object into a buffer of exactly its size (the buffer
// becomes the in-memory snapshot), checks the object store's SHA-256 digest
// and the file's own checksums, and keeps it on disk.
func (s *Syncer) fetch(ctx context.Context, obs jetstream.ObjectStore, info *jetstream.ObjectInfo, v uint64) (*store.Loaded, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	defer cancel()
	res, err := obs.Get(ctx, info.Name)
	if err != nil {
		return nil, downloadError{fmt.Errorf("get %s: %w", info.Name, err)}
	}
	data := make([]byte, info.Size)
	// A read blocked on chunks that stopped coming (the NATS node serving
	// them went away) waits for the client's read deadline and ignores
	// cancellation, and Close waits for that read: leave both behind when
	// ctx ends, so shutdown and the next sync pass are not held up.
	read := make(chan error, 1)
	go func() { _, err := io.ReadFull(res, data); read <- err }()
	select {
	case err = <-read:
	case <-ctx.Done():
		go func() { <-read; res.Close() }()
		return nil, downloadError{fmt.Errorf("read %s: %w", info.Name, ctx.Err())}
	}
	defer res.Close()
	if err != nil {
		if errors.Is(err, jetstream.ErrDigestMismatch) {
			return nil, fmt.Errorf("snapshot %s: %w", info.Name, err)
		}
		return nil, downloadError{fmt.Errorf("read %s: %w", info.Name, err)}
	}
	// Reading to EOF is what makes the client compare the digest.
	var one [1]byte
	if n, err := res.Read(one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if errors.Is(err, jetstream.ErrDigestMismatch) {
			return nil, fmt.Errorf("snapshot %s: %w", info.Name, err)
		}
		return nil, downloadError{fmt.Errorf("read %s: size or end of object wrong: %v", info.Name, err)}
	}
	l, err := verify(info.Name, v, data)
	if err != nil {
		return nil, err
	}
	if err := s.persist(info.Name, data); err != nil {
		// The disk is a cache: serve the verified snapshot anyway.
		s.log.Warn("snapshot: keep local copy", "name", info.Name, "err", err)
	}
	return l, nil
}

// verify loads data and checks that it is the snapshot its name says.
func verify(name string, v uint64, data []byte) (*store.Loaded, error) {
	l, err := store.Load(name, data)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	if got := l.Snap.Header.ChangeVersion; got != v {
		return nil, fmt.Errorf("snapshot %s: %w: its header says change version %d", name, ErrMismatch, got)
	}
	return l, nil
}

// loadLocal returns the newest valid snapshot in Dir, or nil. Files that
// fail verification are renamed *.rejected (kept for inspection, never
// loaded again).
func (s *Syncer) loadLocal() *store.Loaded {
	if s.cfg.Dir == "" {
		return nil
	}
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("snapshot: read local copies", "err", err)
		}
		return nil
	}
	type file struct {
		name string
		v    uint64
	}
	var files []file
	for _, e := range ents {
		if v, ok := snapshot.ParseObjectName(e.Name()); ok && e.Type().IsRegular() {
			files = append(files, file{e.Name(), v})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmp.Compare(b.v, a.v) })
	for _, f := range files {
		path := filepath.Join(s.cfg.Dir, f.name)
		data, err := os.ReadFile(path)
		if err == nil {
			var l *store.Loaded
			if l, err = verify(path, f.v, data); err == nil {
				return l
			}
		}
		s.reject(err)
		if err := os.Rename(path, path+".rejected"); err != nil {
			s.log.Warn("snapshot: set aside rejected local copy", "err", err)
		}
	}
	return nil
}

// persist writes data as Dir/name atomically (temporary file, fsync,
// rename, fsync of the folder) and removes older copies.
func (s *Syncer) persist(name string, data []byte) error {
	if s.cfg.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(s.cfg.Dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(s.cfg.Dir, name), data); err != nil {
		return err
	}
	v, _ := snapshot.ParseObjectName(name)
	ents, _ := os.ReadDir(s.cfg.Dir)
	for _, e := range ents {
		if old, ok := snapshot.ParseObjectName(e.Name()); ok && old < v {
			_ = os.Remove(filepath.Join(s.cfg.Dir, e.Name()))
		}
	}
	return nil
}
