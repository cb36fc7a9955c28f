package authority

import (
	"encoding/binary"
	"fmt"

	"github.com/edgelink/edgelink/shared/link"
)

// AskSubject receives questions: many codes in one message, and the
// allocation frontier with its promise (see Answer). Control instances
// answer it in QueueGroup, as they answer Subject.
const AskSubject = "edgelink.authority.ask"

// MaxCodes bounds the codes of one question. A found link carries its target
// (at most 4 KiB), so an answer stays far below NATS's 1 MiB payload.
const MaxCodes = 128

// The first byte of questions and answers on AskSubject. Format 3 carries a
// domain per code (a question) or per found link (an answer); format 2 is
// the same without them, every code on link.DefaultDomain. A question or
// answer about the platform's domain only is written in format 2, so edges
// and controls of the release before domains understand each other with
// this one in either order of upgrade; one about another domain is
// format 3, which an older control refuses (answering Unavailable: never a
// NotFound it did not look up).
//
// Questions say in their flags whether the asker reads a link's extras
// (Question.Extras); an answer to one that does marks each found link that
// has extras (bit 7 of its status byte) and carries them after its URL, in
// any format. A control from before extras refuses such a question
// (Unavailable), so controls are upgraded before edges; a control asked
// about a link with extras by an edge that does not read them answers
// Unavailable rather than the link without them (docs/edge.md).
//
// Format 4 is format 3 followed by hosts: a question that asks which
// domain each of some hosts is, and an answer that carries the domains
// found (see Question.Hosts). It is written only when hosts are asked or
// answered, so what an older control or edge reads is unchanged; an older
// control refuses a format 4 question (Unavailable), which an edge must
// take as "cannot tell", never as "no such host".
const (
	askFormatNoDomains byte = 2
	askFormat          byte = 3
	askFormatHosts     byte = 4
)

// Question is what an edge asks in one message.
type Question struct {
	// Frontier asks for every namespace's frontier and ceiling.
	Frontier bool
	// Codes are asked about one by one; each is answered in Answer.Replies
	// at its index.
	Codes []string
	// Domains are the codes' domains, Domains[i] for Codes[i]; empty means
	// every code is on link.DefaultDomain (as UnmarshalQuestion leaves it
	// for a question about that domain only).
	Domains []link.DomainID
	// Hosts are asked about as a whole: which active domain has each
	// (canonical, link.CanonicalHost), answered in Answer.Domains. At most
	// MaxHosts.
	Hosts []string
	// Extras says the asker reads links' extras in the answer (flags bit
	// 1): edges of the release with extras always set it.
	Extras bool
}

// Question flags.
const (
	flagFrontier byte = 1 << 0
	flagExtras   byte = 1 << 1
)

// statusExtras marks a found reply's status byte (in an answer to a
// question with Extras) whose link's extras follow its URL.
const statusExtras byte = 0x80

// Domain is the domain of Codes[i]: Domains[i], or link.DefaultDomain
// when Domains is empty.
func (q *Question) Domain(i int) link.DomainID {
	if len(q.Domains) == 0 {
		return link.DefaultDomain
	}
	return q.Domains[i]
}

// hasDomains reports whether any code is on a domain other than the
// platform's: whether the question takes format 3.
func (q *Question) hasDomains() bool {
	for _, d := range q.Domains {
		if d != link.DefaultDomain {
			return true
		}
	}
	return false
}

// Frontier is one namespace's allocation state, as the authority read it
// after the question was sent.
type Frontier struct {
	Namespace string
	// Start and End bound the namespace's IDs, [Start, End).
	Start, End uint64
	// Next is the namespace's counter: every confirmed lease ended at or
	// below it, so no ID at or above it had been handed out when it was
	// read.
	Next uint64
	// Ceiling is the highest end any lease may reach before the answer's
	// promise runs out (see Answer.PromiseMillis). Next <= Ceiling <= End.
	Ceiling uint64
}

// Answer is the authority's answer to one Question.
type Answer struct {
	// Kind is Found when the question was answered (each code's own answer
	// is in Replies) and Unavailable when the authority could not read its
	// database; the edge must then not take any code for unknown.
	Kind Kind
	// Version is the change version the authority had reached when it read
	// (the newest value taken from the sequence, maybe by a transaction
	// still running): a NotFound reply is as of it, and any change of the
	// code with a newer version the edge applies later wins over it.
	Version uint64
	// PromiseMillis is how long after the question was *sent* the edge may
	// rely on each frontier's Ceiling: the allocator confirms no lease
	// ending above a ceiling an answer reported until at least twice that
	// long after the ceiling was raised. Zero: no promise.
	PromiseMillis uint32
	// Frontiers, when the question asked for them, every namespace's.
	Frontiers []Frontier
	// Replies are the codes' answers, Found or NotFound, in the question's
	// order; a Found reply's Code is the code asked.
	Replies []Reply
	// Domains are the active domains that have one of the question's
	// Hosts, read after the question was sent: a host asked that none of
	// them has was no active domain's when the authority read.
	Domains []link.Domain
}

// MarshalQuestion appends q's encoding to dst after checking it.
//
// Layout: format, flags (bit 0: frontier, bit 1: reads extras), uvarint
// count, then per code (in format 3) a uvarint domain, and a uvarint length
// and the code.
func MarshalQuestion(dst []byte, q *Question) ([]byte, error) {
	if len(q.Codes) > MaxCodes {
		return nil, fmt.Errorf("%w: %d codes in one question, at most %d", errInvalid, len(q.Codes), MaxCodes)
	}
	if len(q.Codes) == 0 && !q.Frontier && len(q.Hosts) == 0 {
		return nil, fmt.Errorf("%w: an empty question", errInvalid)
	}
	if err := checkHosts(q.Hosts); err != nil {
		return nil, err
	}
	if len(q.Domains) != 0 && len(q.Domains) != len(q.Codes) {
		return nil, fmt.Errorf("%w: %d domains for %d codes", errInvalid, len(q.Domains), len(q.Codes))
	}
	var flags byte
	if q.Frontier {
		flags |= flagFrontier
	}
	if q.Extras {
		flags |= flagExtras
	}
	format := askFormatNoDomains
	switch {
	case len(q.Hosts) > 0:
		format = askFormatHosts
	case q.hasDomains():
		format = askFormat
	}
	domains := format != askFormatNoDomains
	dst = append(dst, format, flags)
	dst = binary.AppendUvarint(dst, uint64(len(q.Codes)))
	for i, c := range q.Codes {
		if !link.ValidCodeSyntax(c) {
			return nil, fmt.Errorf("%w: code %d of %d bytes is not a valid code", errInvalid, i, len(c))
		}
		if domains {
			if q.Domain(i) > link.MaxDomainID {
				return nil, fmt.Errorf("%w: code %d on domain %d", errInvalid, i, q.Domain(i))
			}
			dst = binary.AppendUvarint(dst, uint64(q.Domain(i)))
		}
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	if format == askFormatHosts {
		dst = appendHosts(dst, q.Hosts)
	}
	return dst, nil
}

// UnmarshalQuestion decodes and validates a question, of either format: one
// in format 2 leaves Domains empty (every code on link.DefaultDomain), one
// in format 3 gives every code its domain. A malformed question is an
// error and leaves q empty.
func UnmarshalQuestion(b []byte, q *Question) error {
	if err := unmarshalQuestion(b, q); err != nil {
		*q = Question{}
		return err
	}
	return nil
}

func unmarshalQuestion(b []byte, q *Question) error {
	*q = Question{}
	if len(b) < 3 || b[0] < askFormatNoDomains || b[0] > askFormatHosts || b[1]&^(flagFrontier|flagExtras) != 0 {
		return fmt.Errorf("%w: bad question header", errInvalid)
	}
	format := b[0]
	domains := format != askFormatNoDomains
	q.Frontier = b[1]&flagFrontier != 0
	q.Extras = b[1]&flagExtras != 0
	b = b[2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > MaxCodes {
		return fmt.Errorf("%w: code count", errInvalid)
	}
	b = b[k:]
	if n == 0 && !q.Frontier && format != askFormatHosts {
		return fmt.Errorf("%w: an empty question", errInvalid)
	}
	q.Codes = make([]string, 0, n)
	if domains {
		q.Domains = make([]link.DomainID, 0, n)
	}
	for range n {
		if domains {
			d, k := binary.Uvarint(b)
			if k <= 0 || d > uint64(link.MaxDomainID) {
				return fmt.Errorf("%w: domain", errInvalid)
			}
			q.Domains = append(q.Domains, link.DomainID(d))
			b = b[k:]
		}
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return fmt.Errorf("%w: truncated code", errInvalid)
		}
		c := b[k : k+int(l)]
		if !link.ValidCodeSyntax(c) {
			return fmt.Errorf("%w: code of %d bytes is not a valid code", errInvalid, len(c))
		}
		q.Codes = append(q.Codes, string(c))
		b = b[k+int(l):]
	}
	if format == askFormatHosts {
		var err error
		if q.Hosts, b, err = readHosts(b); err != nil {
			return err
		}
		if !q.hasDomains() {
			q.Domains = nil // as a format 2 question leaves it
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: trailing bytes", errInvalid)
	}
	return nil
}

// MarshalAnswer appends a's encoding to dst after checking it. It takes
// format 3 when a found link is on a domain other than the platform's (so
// an edge from before domains, which asks about that domain only, always
// gets format 2).
//
// Layout: format, kind, uvarint version, uvarint promise, uvarint count of
// frontiers, each a uvarint-length name and uvarint start, end, next and
// ceiling; uvarint count of replies, each a kind byte and for Found (in
// format 3) a uvarint domain, and a uvarint version, status byte, uvarint
// redirect type, varint expires-at and a uvarint-length URL, then, when
// the status byte has bit 7, the uvarint-length extras. It writes a reply's
// extras whatever the question: the responder must not put them in an
// answer to a question without Extras.
func MarshalAnswer(dst []byte, a *Answer) ([]byte, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	format := askFormatNoDomains
	for i := range a.Replies {
		if a.Replies[i].Domain != link.DefaultDomain {
			format = askFormat
		}
	}
	if len(a.Domains) > 0 {
		format = askFormatHosts
	}
	dst = append(dst, format, byte(a.Kind))
	dst = binary.AppendUvarint(dst, a.Version)
	dst = binary.AppendUvarint(dst, uint64(a.PromiseMillis))
	dst = binary.AppendUvarint(dst, uint64(len(a.Frontiers)))
	for _, f := range a.Frontiers {
		dst = binary.AppendUvarint(dst, uint64(len(f.Namespace)))
		dst = append(dst, f.Namespace...)
		for _, v := range [...]uint64{f.Start, f.End, f.Next, f.Ceiling} {
			dst = binary.AppendUvarint(dst, v)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(a.Replies)))
	for i := range a.Replies {
		r := &a.Replies[i]
		dst = append(dst, byte(r.Kind))
		if r.Kind != Found {
			continue
		}
		if format != askFormatNoDomains {
			dst = binary.AppendUvarint(dst, uint64(r.Domain))
		}
		dst = binary.AppendUvarint(dst, r.Version)
		st := statusByte[r.Status]
		if r.Extras != "" {
			st |= statusExtras
		}
		dst = append(dst, st)
		dst = binary.AppendUvarint(dst, uint64(r.RedirectType))
		dst = binary.AppendVarint(dst, r.ExpiresAt)
		dst = binary.AppendUvarint(dst, uint64(len(r.URL)))
		dst = append(dst, r.URL...)
		if r.Extras != "" {
			dst = binary.AppendUvarint(dst, uint64(len(r.Extras)))
			dst = append(dst, r.Extras...)
		}
	}
	if format == askFormatHosts {
		return appendDomains(dst, a.Domains)
	}
	return dst, nil
}

// UnmarshalAnswer decodes and validates the answer to q: it must reply to
// each of q's codes, in order, each found link on the domain of the code
// asked, and carry frontiers only if q asked. A found reply's Code and
// Domain are the code asked and its domain. A malformed answer is an error
// and leaves a empty.
func UnmarshalAnswer(b []byte, q *Question, a *Answer) error {
	if err := unmarshalAnswer(b, q, a); err != nil {
		*a = Answer{}
		return err
	}
	return nil
}

func unmarshalAnswer(b []byte, q *Question, a *Answer) error {
	*a = Answer{}
	if len(b) < 2 || b[0] < askFormatNoDomains || b[0] > askFormatHosts {
		return fmt.Errorf("%w: bad answer header", errInvalid)
	}
	format := b[0]
	domains := format != askFormatNoDomains
	a.Kind = Kind(b[1])
	b = b[2:]
	var err error
	next := func() uint64 {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			err = fmt.Errorf("%w: truncated answer", errInvalid)
			return 0
		}
		b = b[k:]
		return v
	}
	a.Version = next()
	promise := next()
	if promise > 1<<31 {
		return fmt.Errorf("%w: promise of %d ms", errInvalid, promise)
	}
	a.PromiseMillis = uint32(promise)
	nf := next()
	if err != nil || nf > 1<<16 {
		return fmt.Errorf("%w: frontier count", errInvalid)
	}
	for range nf {
		l := next()
		if err != nil || l > uint64(len(b)) {
			return fmt.Errorf("%w: namespace", errInvalid)
		}
		f := Frontier{Namespace: string(b[:l])}
		b = b[l:]
		f.Start, f.End, f.Next, f.Ceiling = next(), next(), next(), next()
		if err != nil {
			return err
		}
		a.Frontiers = append(a.Frontiers, f)
	}
	nr := next()
	if err != nil || nr > MaxCodes {
		return fmt.Errorf("%w: reply count", errInvalid)
	}
	for i := range nr {
		if len(b) < 1 {
			return fmt.Errorf("%w: truncated reply", errInvalid)
		}
		r := Reply{Kind: Kind(b[0])}
		b = b[1:]
		if r.Kind == Found {
			var asked link.DomainID
			if int(i) < len(q.Codes) {
				asked = q.Domain(int(i))
			}
			if domains {
				r.Domain = link.DomainID(next())
			}
			if err != nil || r.Domain != asked {
				// A link of another domain than the one asked is
				// never taken for the code's: that is the other
				// domain's namespace.
				return fmt.Errorf("%w: reply %d on domain %d to a question about domain %d", errInvalid, i, r.Domain, asked)
			}
			r.Version = next()
			if err != nil || len(b) < 1 {
				return fmt.Errorf("%w: truncated reply", errInvalid)
			}
			st := b[0]
			b = b[1:]
			hasExtras := st&statusExtras != 0
			if hasExtras && !q.Extras {
				// Never taken as the link without them: they may be its
				// password.
				return fmt.Errorf("%w: reply %d carries extras the question did not ask for", errInvalid, i)
			}
			r.Status = statusOf(st &^ statusExtras)
			rt := next()
			if err != nil || rt > 999 {
				return fmt.Errorf("%w: redirect type", errInvalid)
			}
			r.RedirectType = link.RedirectType(rt)
			exp, k := binary.Varint(b)
			if k <= 0 {
				return fmt.Errorf("%w: expiry", errInvalid)
			}
			r.ExpiresAt, b = exp, b[k:]
			ul := next()
			if err != nil || ul > uint64(len(b)) {
				return fmt.Errorf("%w: url", errInvalid)
			}
			r.URL, b = string(b[:ul]), b[ul:]
			if hasExtras {
				xl := next()
				if err != nil || xl == 0 || xl > uint64(len(b)) || xl > link.MaxExtrasLen {
					return fmt.Errorf("%w: extras", errInvalid)
				}
				r.Extras, b = string(b[:xl]), b[xl:]
			}
			if int(i) < len(q.Codes) {
				r.Code = q.Codes[i]
			}
		}
		a.Replies = append(a.Replies, r)
	}
	if format == askFormatHosts {
		if a.Domains, b, err = readDomains(b, q); err != nil {
			return err
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: trailing bytes", errInvalid)
	}
	if err := a.validate(); err != nil {
		return err
	}
	if a.Kind == Found && (len(a.Replies) != len(q.Codes) || (len(a.Frontiers) > 0 && !q.Frontier)) {
		return fmt.Errorf("%w: %d replies and %d frontiers to %d codes (frontier asked: %v)",
			errInvalid, len(a.Replies), len(a.Frontiers), len(q.Codes), q.Frontier)
	}
	return nil
}

func statusOf(b byte) link.Status {
	for s, c := range statusByte {
		if c == b {
			return s
		}
	}
	return ""
}

func (a *Answer) validate() error {
	switch a.Kind {
	case Unavailable:
		if len(a.Replies) != 0 || len(a.Frontiers) != 0 || len(a.Domains) != 0 || a.PromiseMillis != 0 {
			return fmt.Errorf("%w: an unavailable answer with content", errInvalid)
		}
		return nil
	case Found:
	default:
		return fmt.Errorf("%w: answer kind %q", errInvalid, byte(a.Kind))
	}
	if len(a.Replies) > MaxCodes {
		return fmt.Errorf("%w: %d replies", errInvalid, len(a.Replies))
	}
	if err := checkDomains(a.Domains); err != nil {
		return err
	}
	for _, f := range a.Frontiers {
		if f.Namespace == "" || len(f.Namespace) > 255 || f.Start >= f.End || f.Next < f.Start || f.Next > f.End ||
			f.Ceiling < f.Next || f.Ceiling > f.End {
			return fmt.Errorf("%w: frontier of %q: [%d, %d) next %d ceiling %d", errInvalid, f.Namespace, f.Start, f.End, f.Next, f.Ceiling)
		}
	}
	for i := range a.Replies {
		r := a.Replies[i]
		switch r.Kind {
		case NotFound:
			if r.Version != 0 || r.Domain != 0 || r.Code != "" || r.URL != "" || r.Status != "" || r.RedirectType != 0 || r.ExpiresAt != 0 || r.Extras != "" {
				return fmt.Errorf("%w: reply %d: not found with link fields", errInvalid, i)
			}
		case Found:
			if r.Code == "" {
				r.Code = "0000" // the code is implied by the question; check the rest
			}
			if err := r.validate(); err != nil {
				return fmt.Errorf("reply %d: %w", i, err)
			}
		default:
			return fmt.Errorf("%w: reply %d of kind %q", errInvalid, i, byte(r.Kind))
		}
	}
	return nil
}
