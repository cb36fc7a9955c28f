// Package limitshare carries edges' reports of the limited links they
// redirect to one another (docs/click-limits.md): every Every, each edge
// publishes what it served of each limited link since its last report, on
// core NATS (Subject), and takes every other edge's into its own account.
// Added up, the reports stop a limited link on every edge about a report's
// interval after its last allowed click, instead of the second or more a
// click takes to be counted by the rollups and the change to come back.
//
// The reports only ever make an edge stop sooner, and never before the
// limit (redirect.ClickLimits says why). They are off the response path
// and best effort: a report lost, late or repeated is repaired by the next
// (each carries its edge's totals, not increments), and with NATS down
// every edge goes on alone within its own allowance. Whoever may publish on
// Subject can make edges stop limited links early: NATS is trusted
// infrastructure, as the change stream is.
package limitshare

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgelink/edgelink/shared/link"
)

// Subject is where edges publish their reports: SubjectPrefix and the
// reporting edge's name.
const (
	SubjectPrefix = "limits."
	Subjects      = SubjectPrefix + ">"
)

// Ledger is the edge's account of limited links (redirect.ClickLimits).
type Ledger interface {
	// Collect calls emit with a report of every limited link served since
	// the last Collect.
	Collect(emit func(d link.DomainID, code []byte, max, base, served int64))
	// Peer takes another edge process's report of a link.
	Peer(from string, d link.DomainID, code []byte, max, base, served int64)
}

// Config tunes a Share. Zero values take the defaults noted.
type Config struct {
	// Edge is the edge's name; a process adds a random suffix of its own,
	// so a restarted edge is told apart from its former self (whose
	// reports stand for clicks it really served).
	Edge string
	// Every is how often the edge publishes (default 50ms): about how late
	// other edges learn of its redirects.
	Every time.Duration
	Log   *slog.Logger
}

// Share publishes a ledger's reports and takes other edges'. Build it with
// New; Run does the work.
type Share struct {
	nc     *nats.Conn
	ledger Ledger
	cfg    Config
	id     string

	// Published and Received count reports (a link each); Bad counts
	// messages that did not decode; Failed counts publishes that failed.
	Published, Received, Bad, Failed atomic.Uint64
}

// New returns a share of ledger over nc.
func New(nc *nats.Conn, ledger Ledger, cfg Config) *Share {
	if cfg.Every <= 0 {
		cfg.Every = 50 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Share{nc: nc, ledger: ledger, cfg: cfg, id: cfg.Edge + "/" + hex.EncodeToString(b[:])}
}

// ID is the name this process reports under.
func (s *Share) ID() string { return s.id }

// Run subscribes to the other edges' reports and publishes this edge's
// every Every until ctx ends; it then publishes once more.
func (s *Share) Run(ctx context.Context) error {
	sub, err := s.nc.Subscribe(Subjects, s.take)
	if err != nil {
		return fmt.Errorf("subscribe to limit reports: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.publish()
			return nil
		case <-t.C:
			s.publish()
		}
	}
}

// maxMessage keeps a message well under NATS's default max payload (1 MiB).
const maxMessage = 64 << 10

// publish sends what the ledger has to report, in messages of at most
// maxMessage bytes. A failed publish is counted and dropped: the next
// report carries the same totals.
func (s *Share) publish() {
	var msg []byte
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		if err := s.nc.Publish(SubjectPrefix+subjectToken(s.cfg.Edge), msg); err != nil {
			s.Failed.Add(1)
			s.cfg.Log.Debug("limit report not published", "err", err)
		} else {
			s.Published.Add(uint64(n))
		}
		msg, n = msg[:0], 0
	}
	s.ledger.Collect(func(d link.DomainID, code []byte, max, base, served int64) {
		if n == 0 {
			msg = AppendHeader(msg[:0], s.id)
		}
		msg = AppendReport(msg, d, code, max, base, served)
		n++
		if len(msg) >= maxMessage-128 {
			flush()
		}
	})
	flush()
}

// take is the subscription's handler: every report of another process
// goes to the ledger.
func (s *Share) take(m *nats.Msg) {
	from, rest, err := ReadHeader(m.Data)
	if err != nil {
		s.Bad.Add(1)
		return
	}
	if from == s.id {
		return // our own, echoed
	}
	for len(rest) > 0 {
		var r Report
		if r, rest, err = ReadReport(rest); err != nil {
			s.Bad.Add(1)
			return
		}
		s.ledger.Peer(from, r.Domain, r.Code, r.Max, r.Base, r.Served)
		s.Received.Add(1)
	}
}

// subjectToken makes an edge's name one subject token.
func subjectToken(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '.' || c == '*' || c == '>' || c <= ' ' || c >= 0x7f {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "edge"
	}
	return string(b)
}

// The message format, version 1:
//
//	byte     1
//	uvarint  length, then the reporting process's id (at most 256 bytes)
//	then reports until the end, each:
//	uvarint  domain
//	uvarint  length, then the code (link.ValidCodeSyntax)
//	uvarint  max clicks (1 to link.MaxClicksLimit)
//	uvarint  base: the count the edge started from
//	uvarint  served since
const formatVersion = 1

// Report is one link's report.
type Report struct {
	Domain            link.DomainID
	Code              []byte // points into the message
	Max, Base, Served int64
}

// AppendHeader starts a message from process id.
func AppendHeader(dst []byte, id string) []byte {
	dst = append(dst, formatVersion)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	return append(dst, id...)
}

// AppendReport appends one link's report.
func AppendReport(dst []byte, d link.DomainID, code []byte, max, base, served int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(d))
	dst = binary.AppendUvarint(dst, uint64(len(code)))
	dst = append(dst, code...)
	dst = binary.AppendUvarint(dst, uint64(max))
	dst = binary.AppendUvarint(dst, uint64(base))
	return binary.AppendUvarint(dst, uint64(served))
}

var errFormat = errors.New("limit report: malformed")

// ReadHeader reads a message's header: the reporting process and the
// reports after it.
func ReadHeader(b []byte) (from string, rest []byte, err error) {
	if len(b) == 0 || b[0] != formatVersion {
		return "", nil, fmt.Errorf("%w: version", errFormat)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n == 0 || n > 256 || n > uint64(len(b)-1-k) {
		return "", nil, fmt.Errorf("%w: sender", errFormat)
	}
	start := 1 + k
	return string(b[start : start+int(n)]), b[start+int(n):], nil
}

// ReadReport reads one report off b, checked: a domain in range, a code of
// valid syntax, a limit in range, counts within it.
func ReadReport(b []byte) (r Report, rest []byte, err error) {
	var vals [5]uint64
	for i := range vals {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return r, nil, fmt.Errorf("%w: field %d", errFormat, i)
		}
		b = b[k:]
		vals[i] = v
		if i == 1 { // the code's length, then the code
			if v > link.MaxCodeLen || v > uint64(len(b)) {
				return r, nil, fmt.Errorf("%w: code length %d", errFormat, v)
			}
			r.Code, b = b[:v:v], b[v:]
		}
	}
	if vals[0] > uint64(link.MaxDomainID) || !link.ValidCodeSyntax(r.Code) ||
		vals[2] == 0 || vals[2] > link.MaxClicksLimit || vals[3] > link.MaxClicksLimit || vals[4] > link.MaxClicksLimit {
		return r, nil, fmt.Errorf("%w: values out of range", errFormat)
	}
	r.Domain, r.Max, r.Base, r.Served = link.DomainID(vals[0]), int64(vals[2]), int64(vals[3]), int64(vals[4])
	return r, b, nil
}
