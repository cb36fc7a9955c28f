package importjobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/edgelink/edgelink/control/importer"
	"github.com/edgelink/edgelink/control/links"
)

// Config tunes a Runner; zero values take the defaults.
type Config struct {
	// Instance names this runner in the leases it holds (default: host,
	// pid and a random suffix, unique per process).
	Instance string
	// MaxRunning bounds the jobs this instance runs at once (default 2);
	// PerTenant the jobs one tenant has running on all instances together
	// (default 1).
	MaxRunning, PerTenant int
	// Lease is how long a claim lasts without renewal (default 30s): an
	// instance that stops renewing loses its jobs that long after.
	// Heartbeat is how often progress is written and the lease renewed
	// (default 1s; at most a third of Lease).
	Lease, Heartbeat time.Duration
	// Poll is how often queued jobs are looked for (default 2s); Wake
	// looks at once.
	Poll time.Duration
	// MaxResumes is how many takeovers a job gets before it is failed
	// (default 3).
	MaxResumes int
	// Retention is how long finished jobs and their files are kept
	// (default 7 days); PurgeEvery how often they are purged (default an
	// hour).
	Retention, PurgeEvery time.Duration
	// Concurrency is batches in flight per job (default 2).
	Concurrency int
	Log         *slog.Logger
}

// Leases is what a Runner needs of the job store (pgstore.Store): leases
// judged by one clock all instances share.
type Leases interface {
	// Sweep fails the jobs that must not run again (their key revoked
	// before they ran, or out of takeovers) and says how many.
	Sweep(ctx context.Context, maxResumes int) (int64, error)
	// Claim takes the oldest job owner may run under a lease of lease:
	// queued, or running with its lease run out (a takeover), of a tenant
	// with fewer than perTenant jobs under live leases; nil when none.
	Claim(ctx context.Context, owner string, lease time.Duration, perTenant int) (*Claimed, error)
	// Heartbeat renews owner's lease of job id and writes p; alive is
	// false once owner no longer holds it, revoked true once its key is.
	Heartbeat(ctx context.Context, id, owner string, lease time.Duration, p importer.Progress) (alive, revoked bool, err error)
	// Finish writes the outcome of owner's run and drops the file; false
	// when owner no longer held the lease (nothing was written).
	Finish(ctx context.Context, id, owner string, o Outcome) (bool, error)
	// Release gives owner's job back to the queue, not as a takeover.
	Release(ctx context.Context, id, owner string) error
	// Purge deletes jobs finished longer than retention ago.
	Purge(ctx context.Context, retention time.Duration) (int64, error)
}

// Runner claims and runs import jobs. Build it with NewRunner and run it
// with Run; it is safe for concurrent use.
type Runner struct {
	store Leases
	links Links
	short links.ShortURLs
	cfg   Config
	log   *slog.Logger
	wake  chan struct{}
}

// NewRunner returns a runner of store's jobs that writes with l; short
// is the public URL's rules (its host is the platform's domain).
func NewRunner(store Leases, l Links, short links.ShortURLs, cfg Config) *Runner {
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 2
	}
	if cfg.PerTenant <= 0 {
		cfg.PerTenant = 1
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	cfg.Heartbeat = min(cfg.Heartbeat, cfg.Lease/3)
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.MaxResumes <= 0 {
		cfg.MaxResumes = 3
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.PurgeEvery <= 0 {
		cfg.PurgeEvery = time.Hour
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runner{store: store, links: l, short: short, cfg: cfg, log: cfg.Log, wake: make(chan struct{}, 1)}
}

// Wake makes the runner look for jobs now (one was just queued); it never
// blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run claims and runs jobs until ctx ends, then stops its jobs and gives
// them back to the queue for another instance (or this one, restarted),
// and returns once they have stopped.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, r.cfg.MaxRunning)
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	var lastPurge time.Time
	for {
		if time.Since(lastPurge) >= r.cfg.PurgeEvery {
			lastPurge = time.Now()
			if n, err := r.store.Purge(ctx, r.cfg.Retention); err != nil && ctx.Err() == nil {
				r.log.Warn("import job purge failed", "err", err)
			} else if n > 0 {
				r.log.Info("import jobs purged", "count", n)
			}
		}
		if n, err := r.store.Sweep(ctx, r.cfg.MaxResumes); err != nil && ctx.Err() == nil {
			r.log.Warn("import job sweep failed", "err", err)
		} else if n > 0 {
			r.log.Warn("import jobs failed: key revoked or interrupted too often", "count", n)
		}
	claim:
		for {
			select {
			case slots <- struct{}{}:
			default:
				break claim // every slot busy; a job ending wakes the loop
			}
			c, err := r.store.Claim(ctx, r.cfg.Instance, r.cfg.Lease, r.cfg.PerTenant)
			if err != nil || c == nil {
				<-slots
				if err != nil && ctx.Err() == nil {
					r.log.Warn("import job claim failed", "err", err)
				}
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots; r.Wake() }()
				r.run(ctx, c)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-r.wake:
		}
	}
}

// Why a run was stopped before its end.
var (
	errLeaseLost  = errors.New("the lease of this import was lost")
	errKeyRevoked = errors.New("the key that started this import was revoked")
)

// run imports c's file under its lease: a heartbeat renews the lease and
// writes progress until the import ends; the outcome is written only
// while the lease is held.
func (r *Runner) run(ctx context.Context, c *Claimed) {
	log := r.log.With("import_job", c.ID, "tenant", c.TenantID)
	if c.Resumes > 0 {
		log.Info("import job taken over from a stopped instance", "resumes", c.Resumes)
	} else {
		log.Info("import job started", "bytes", c.FileSize)
	}
	jctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var mu sync.Mutex
	progress := importer.Progress{BytesTotal: c.FileSize}
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		r.heartbeat(jctx, c, log, stop, func() importer.Progress { mu.Lock(); defer mu.Unlock(); return progress })
	}()

	o := r.importFile(jctx, c, func(p importer.Progress) { mu.Lock(); progress = p; mu.Unlock() })
	stop(nil)
	<-beat
	// The outcome is written on a context of its own: a shutdown after
	// the import's end must not lose it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch cause := context.Cause(jctx); {
	case o == nil && errors.Is(cause, errLeaseLost):
		log.Warn("import job stopped: another instance holds it now")
		return
	case o == nil && errors.Is(cause, errKeyRevoked):
		o = &Outcome{State: Failed, Message: "The API key that started this import was revoked, so it was stopped. Links it made before stay."}
	case o == nil:
		// This instance is stopping: give the job back, for another
		// instance to start again at once; its chunks replay.
		if err := r.store.Release(wctx, c.ID, r.cfg.Instance); err != nil {
			log.Warn("import job not given back; another instance takes it when its lease runs out", "err", err)
		} else {
			log.Info("import job given back to the queue (shutting down)")
		}
		return
	}
	ok, err := r.store.Finish(wctx, c.ID, r.cfg.Instance, *o)
	switch {
	case err != nil:
		log.Error("import job outcome not written; another instance runs it again when its lease runs out", "err", err)
	case !ok:
		log.Warn("import job outcome not written: another instance holds it now")
	default:
		log.Info("import job finished", "state", o.State, "rows", o.Counts.Rows, "imported", o.Counts.Imported(), "rejected", o.Counts.Rejected)
	}
}

// heartbeat renews c's lease and writes its progress every Heartbeat
// until ctx ends. It stops the run (stop) when the lease was lost, the
// key revoked, or the lease could not be renewed for as long as it lasts:
// another instance may hold the job by then.
func (r *Runner) heartbeat(ctx context.Context, c *Claimed, log *slog.Logger, stop context.CancelCauseFunc, progress func() importer.Progress) {
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		alive, revoked, err := r.store.Heartbeat(ctx, c.ID, r.cfg.Instance, r.cfg.Lease, progress())
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			if time.Since(renewed) >= r.cfg.Lease-r.cfg.Heartbeat {
				log.Warn("import lease not renewed for its whole length; stopping", "err", err)
				stop(errLeaseLost)
				return
			}
			log.Warn("import lease renewal failed; retrying", "err", err)
		case !alive:
			stop(errLeaseLost)
			return
		case revoked:
			stop(errKeyRevoked)
			return
		default:
			renewed = time.Now()
		}
	}
}

// importFile runs the importer over c's file; nil when ctx ended first
// (the run was stopped: the caller knows why).
func (r *Runner) importFile(ctx context.Context, c *Claimed, progress func(importer.Progress)) *Outcome {
	rd, err := importer.NewReader(bytes.NewReader(c.File), c.Format)
	if err != nil {
		return &Outcome{State: Failed, Message: "The file cannot be imported: " + ReaderMessage(err)}
	}
	client := NewClient(r.links, c.TenantID, r.short, r.log)
	sum, runErr := importer.Run(ctx, rd, client, importer.Options{
		Digest: c.Digest, BatchSize: c.Batch, Concurrency: r.cfg.Concurrency,
		RedirectType: c.RedirectType, DefaultDomains: c.DefaultDomains, Domain: c.Domain,
		Progress: progress, BytesTotal: c.FileSize,
	})
	if ctx.Err() != nil {
		return nil
	}
	if sum == nil {
		return &Outcome{State: Failed, Message: "The import could not start: " + runErr.Error()}
	}
	o := &Outcome{State: Done, Format: sum.Format,
		Progress: importer.Progress{BytesRead: rd.BytesRead(), BytesTotal: c.FileSize, Rows: sum.Rows, Done: len(sum.Outcomes),
			Imported: sum.Imported(), Rejected: sum.Rejected},
		Counts: Counts{Rows: sum.Rows, Kept: sum.Kept, Existing: sum.Existing, Recoded: sum.Recoded, Duplicates: sum.Dups,
			Rejected: sum.Rejected, Chunks: sum.Chunks, Replayed: sum.Replayed, Failed: sum.Failed}}
	var mb, rb bytes.Buffer
	if err := sum.WriteMapping(&mb); err != nil {
		return &Outcome{State: Failed, Message: "The mapping file could not be written: " + err.Error()}
	}
	if err := sum.WriteRejects(&rb); err != nil {
		return &Outcome{State: Failed, Message: "The rejects file could not be written: " + err.Error()}
	}
	o.Mapping, o.Rejects = mb.Bytes(), rb.Bytes()
	if runErr != nil {
		// Chunks that failed (their rows are in the rejects file), or a
		// file that could not be read to its end (what came before it
		// was imported).
		if sum.Failed > 0 {
			o.Message = fmt.Sprintf("%d of %d batches could not be written (their rows are in the rejects file). Upload the same file with the same options to import them: what was imported is replayed, not made twice.", sum.Failed, sum.Chunks)
		} else {
			o.State = Failed
			o.Message = "The file could not be read to its end: " + ReaderMessage(runErr) + ". The rows before that were imported."
		}
	}
	if ig := rd.Ignored(); len(ig) > 0 {
		// Said once, not a reject per row: the rows went in without them.
		o.Message = strings.TrimSpace(o.Message + " Columns not read (the " + string(sum.Format) + " format has no such column): " + strings.Join(ig, ", ") + ".")
	}
	return o
}
