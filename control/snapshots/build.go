// Package snapshots builds the edge's snapshot file from the authority and
// publishes it to the JetStream object store edges boot from.
package snapshots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/link"
	"github.com/edgelink/edgelink/shared/linkevent"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// BloomFalsePositive is each domain's bloom's target false-positive rate:
// 1% costs about 1.2 bytes per code.
const BloomFalsePositive = snapshot.BloomFalsePositive

// Authority is what a build reads: the links, the domains and the sealed
// segments, in one consistent view.
type Authority interface {
	// ReadLinks reads one consistent, read-only view of the authority,
	// taken after the call starts: it calls begin with the number of links
	// of each domain, every namespace's sealed segments (adjacent ones
	// merged into one interval) and every domain (removed ones too, with
	// their status), then each with every link in turn, its domain set and
	// its URL included whatever its status. An error from begin or each
	// ends the read and is returned.
	ReadLinks(ctx context.Context, begin func(counts map[link.DomainID]int64, sealed []snapshot.Sealed, domains []link.Domain) error, each func(snapshot.Link) error) error
}

// Builder reads the authority and writes snapshots. Safe for concurrent use.
type Builder struct {
	auth Authority
	js   jetstream.JetStream
	log  *slog.Logger
	now  func() time.Time

	budget int     // entries kept in memory-budget mode; 0 keeps all
	hot    Hotness // ranks links for the budget
}

// Hotness ranks links for a memory-budget snapshot. Hottest returns at most
// n links by (domain, code), hottest first; links it does not know are
// ignored. The
// click-based source belongs to the analytics side (per-link click
// rollups); any other ranking (a list of campaign codes, say) plugs in
// the same way.
type Hotness interface {
	Hottest(ctx context.Context, n int) ([]snapshot.Key, error)
}

// WithBudget returns a Builder that keeps only the n hottest links by hot in
// its snapshots' entries (flagged partial) and still puts every code in its
// domain's bloom, so an edge answers a cold link from its cache or the authority and
// an unknown code without one. n <= 0 or a nil hot keeps every link.
func (b *Builder) WithBudget(n int, hot Hotness) *Builder {
	c := *b
	c.budget, c.hot = n, hot
	if n <= 0 || hot == nil {
		c.budget, c.hot = 0, nil
	}
	return &c
}

// New returns a Builder reading auth.
func New(auth Authority, js jetstream.JetStream, log *slog.Logger) *Builder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Builder{auth: auth, js: js, log: log, now: time.Now}
}

// Progress is told how many links have been read of the total.
type Progress func(done, total int64)

// Build writes a snapshot of every link of every domain to w, with the
// domain table and each domain's bloom, and returns its header. Links
// carry their extras (rules, password hash, click limit): a file with any
// is format 4, else format 3 (shared/snapshot).
//
// Consistency: it first reads the newest message on the change stream
// (sequence S, the version V of its last event), then reads the authority in one consistent snapshot
// (Authority.ReadLinks: a REPEATABLE READ transaction in PostgreSQL).
// V was committed before it was published, and every version below V was
// either published before it or provably never committed (the relay's
// guarantee), so every change at or below V is in that view, domain
// changes included. Links changed after V carry their own version in the
// file. An edge that loads the file and replays the stream after S
// therefore misses nothing.
func (b *Builder) Build(ctx context.Context, w io.Writer, progress Progress) (snapshot.Header, error) {
	h := snapshot.Header{CreatedMillis: b.now().UnixMilli()}
	var err error
	if h.ChangeVersion, h.StreamSeq, err = streamPosition(ctx, b.js); err != nil {
		return h, err
	}
	var (
		wr      snapshot.Writer
		sealed  []snapshot.Sealed
		domains []link.Domain
		filters map[link.DomainID]*domainBloom
		keep    map[snapshot.Key]struct{} // memory-budget mode: the links whose entries stay
	)
	if b.budget > 0 {
		keys, err := b.hot.Hottest(ctx, b.budget)
		if err != nil {
			return h, fmt.Errorf("snapshot: rank links: %w", err)
		}
		keep = make(map[snapshot.Key]struct{}, min(len(keys), b.budget))
		for _, k := range keys[:min(len(keys), b.budget)] {
			keep[k] = struct{}{}
		}
		h.Flags |= snapshot.FlagPartial
	}
	var total, done int64
	var last *domainBloom
	err = b.auth.ReadLinks(ctx, func(counts map[link.DomainID]int64, s []snapshot.Sealed, ds []link.Domain) error {
		sealed, domains = s, ds
		filters = make(map[link.DomainID]*domainBloom, len(ds))
		for _, d := range ds {
			n := counts[d.ID]
			total += n
			filters[d.ID] = &domainBloom{id: d.ID, f: bloom.NewWithEstimates(uint(max(n, snapshot.BloomMinCodes)), BloomFalsePositive)}
		}
		return nil
	}, func(l snapshot.Link) error {
		if l.Status != link.Active {
			// Neither targets nor extras (rules, password, limit) of dead
			// links are needed to answer 410.
			l.URL, l.Extras = "", nil
		}
		if last == nil || last.id != l.Domain {
			if last = filters[l.Domain]; last == nil {
				return fmt.Errorf("link %q of domain %d, which the domain table lacks", l.Code, l.Domain)
			}
		}
		last.f.AddString(l.Code)
		last.n++
		if _, hot := keep[snapshot.Key{Domain: l.Domain, Code: l.Code}]; keep == nil || hot {
			if err := wr.Add(l); err != nil {
				return err
			}
		}
		if done++; progress != nil && done%10000 == 0 {
			progress(done, total)
		}
		return nil
	})
	if err != nil {
		return h, fmt.Errorf("snapshot: read authority: %w", err)
	}
	if progress != nil {
		progress(done, total)
	}
	blooms := make(map[link.DomainID][]byte, len(filters))
	for id, f := range filters {
		var bb bytes.Buffer
		if _, err := f.f.WriteTo(&bb); err != nil {
			return h, err
		}
		blooms[id], f.f = bb.Bytes(), nil // its bytes replace it
	}
	err = wr.Write(w, h, sealed, domains, func(d link.DomainID) ([]byte, uint64) {
		if f := filters[d]; f != nil {
			return blooms[d], f.n
		}
		return nil, 0
	})
	if err != nil {
		return h, fmt.Errorf("snapshot: write: %w", err)
	}
	h.Entries = uint64(wr.Len())
	h.BloomCount = uint64(done)
	return h, nil
}

// domainBloom is one domain's bloom as a build fills it.
type domainBloom struct {
	id link.DomainID
	f  *bloom.BloomFilter
	n  uint64 // codes added
}

// streamPosition is the change stream's newest message: its sequence and
// the version of its last event (a message carries a run of events, and
// its version header names the last), so a feed restarted after that
// sequence resumes at the next version. An empty or missing stream is
// position zero.
func streamPosition(ctx context.Context, js jetstream.JetStream) (version, seq uint64, err error) {
	stream, err := js.Stream(ctx, linkevent.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot: change stream: %w", err)
	}
	// The stream's last sequence is read before its last message: when
	// there is no message (none yet, or all aged out), that sequence is the
	// position, and a message published between the two reads is either
	// the one found (its own version and sequence) or after the position,
	// replayed by the edge. Read the other way round, a first message
	// published in between gave a position past it with version 0.
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot: change stream: %w", err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, linkevent.Subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, info.State.LastSeq, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot: change stream: %w", err)
	}
	v, err := strconv.ParseUint(msg.Header.Get(linkevent.HeaderVersion), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("snapshot: stream message %d has no version", msg.Sequence)
	}
	return v, msg.Sequence, nil
}
