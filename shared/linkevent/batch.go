package linkevent

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/edgelink/edgelink/shared/link"
)

// FormatBatch is the first byte of a batch message: a run of consecutive
// events in one compact binary message (docs/edge.md, "The change stream").
// A message whose first byte is anything else is read as one JSON event, the
// shape controls before batching wrote: JSON starts with '{' or white space,
// never with this byte. A new layout takes a new format byte, and edges,
// upgraded before control, learn it first.
//
// Format 2 carries each link event's domain and domain events; Batch writes
// it. Decode still reads FormatBatchNoDomains, what controls before
// domains wrote, as links of link.DefaultDomain.
const FormatBatch byte = 0x02

// FormatBatchNoDomains is the batch format before domains: no domain in a
// link event and no domain events.
const FormatBatchNoDomains byte = 0x01

// FormatBatchExtras is format 2 whose link events may carry extras (a
// link's routing rules, password hash and click limit, shared/link
// Extras): bit 7 of a link event's status byte says its extras follow its
// URL, as a uvarint length and their wire form. Batch writes it only for a
// message holding an event with extras, and format 2 otherwise, byte for
// byte what it wrote before extras: edges of the release before read every
// message until a link has extras (docs/edge.md says the upgrade order).
const FormatBatchExtras byte = 0x03

// statusExtras is the status byte's flag (format 3) for extras that follow.
const statusExtras byte = 0x80

// batchHeader is the format byte and the event count (uint32, little
// endian), fixed-width so a Batch fills the count in when it is done.
const batchHeader = 5

// Field codes of the batch format.
const (
	kindLink    byte = 1
	kindSegment byte = 2
	kindDomain  byte = 3

	statusActive   byte = 1
	statusDisabled byte = 2
	statusDeleted  byte = 3

	segOpened byte = 1
	segSealed byte = 2

	domainActive  byte = 1
	domainRemoved byte = 2

	modeSequential byte = 1
	modeFF1        byte = 2
)

// Batch builds one batch message. Events are added in stream order and must
// chain: each one's Prev is the version of the one added before it, so a
// message holds a run of the stream with nothing left out, and only the
// first event's Prev is stored. The zero value is an empty batch; a Batch is
// not safe for concurrent use.
type Batch struct {
	buf         []byte
	n           int
	first, last uint64
	extras      bool // an event has extras: the message is format 3
}

// Add validates e and appends it. On error the batch is unchanged.
func (b *Batch) Add(e *Event) error {
	if err := e.validate(); err != nil {
		return err
	}
	if b.n > 0 && e.Prev != b.last {
		return fmt.Errorf("%w: version %d follows %d in a batch but says prev %d", errInvalid, e.Version, b.last, e.Prev)
	}
	if len(e.URL) > maxURL || len(e.Namespace) > maxNamespace {
		return fmt.Errorf("%w: version %d: url of %d bytes or namespace of %d bytes is too long for a batch", errInvalid, e.Version, len(e.URL), len(e.Namespace))
	}
	if b.n == math.MaxUint32 {
		return fmt.Errorf("%w: more than %d events in a batch", errInvalid, uint32(math.MaxUint32))
	}
	if b.n == 0 {
		b.buf = append(b.buf[:0], FormatBatch, 0, 0, 0, 0)
		b.buf = binary.AppendUvarint(b.buf, e.Prev)
		b.first = e.Version
	}
	b.buf = appendEvent(b.buf, e, e.Version-e.Prev)
	b.n++
	b.last = e.Version
	b.extras = b.extras || e.Extras != ""
	return nil
}

// Len is the number of events added.
func (b *Batch) Len() int { return b.n }

// Size is the length of the message so far, in bytes.
func (b *Batch) Size() int { return len(b.buf) }

// First and Last are the versions of the first and last event added.
func (b *Batch) First() uint64 { return b.first }
func (b *Batch) Last() uint64  { return b.last }

// Bytes returns the message. It is valid until the next Add or Reset; nil
// when the batch is empty.
func (b *Batch) Bytes() []byte {
	if b.n == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(b.buf[1:batchHeader], uint32(b.n))
	if b.extras {
		b.buf[0] = FormatBatchExtras
	}
	return b.buf
}

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() {
	b.buf, b.n, b.first, b.last, b.extras = b.buf[:0], 0, 0, 0, false
}

// BatchOverhead bounds what a batch takes besides its events' EncodedSize:
// the format byte, the count and the first event's Prev.
const BatchOverhead = batchHeader + binary.MaxVarintLen64

// EncodedSize is what Add adds to a batch's Size for e when e follows the
// batch's last event: enough for a caller to cut batches to a byte budget
// before adding. It does not allocate.
func EncodedSize(e *Event) int {
	n := uvarintLen(e.Version - e.Prev)
	switch e.Kind {
	case KindLink:
		n += 2 + varintLen(int64(e.RedirectType)) + varintLen(e.ExpiresAt) + stringLen(e.Code) + stringLen(e.URL)
		n += uvarintLen(uint64(e.Domain))
		if e.Extras != "" {
			n += stringLen(e.Extras)
		}
	case KindSegment:
		n += 2 + stringLen(e.Namespace) + uvarintLen(e.SegStart) + uvarintLen(e.SegEnd-e.SegStart)
	case KindDomain:
		if c := e.Conf; c != nil {
			n += 3 + uvarintLen(uint64(c.ID)) + uvarintLen(uint64(c.TenantID)) + stringLen(c.Host) +
				stringLen(c.RootRedirect) + stringLen(c.NotFoundRedirect) + stringLen(c.Robots) + uvarintLen(uint64(len(c.KeyIDs)))
			for _, k := range c.KeyIDs {
				n += stringLen(k)
			}
		}
	}
	return n
}

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// varintLen is the length of binary.AppendVarint's zig-zag encoding.
func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// appendEvent encodes a validated event, delta being its version less the
// previous event's. Only the fields of its kind are written.
func appendEvent(dst []byte, e *Event, delta uint64) []byte {
	dst = binary.AppendUvarint(dst, delta)
	switch e.Kind {
	case KindLink:
		st := statusCode(e.Status)
		if e.Extras != "" {
			st |= statusExtras
		}
		dst = append(dst, kindLink, st)
		dst = binary.AppendVarint(dst, int64(e.RedirectType))
		dst = binary.AppendVarint(dst, e.ExpiresAt)
		dst = binary.AppendUvarint(dst, uint64(e.Domain))
		dst = appendString(dst, e.Code)
		dst = appendString(dst, e.URL)
		if e.Extras != "" {
			dst = appendString(dst, e.Extras)
		}
	case KindDomain:
		c := e.Conf
		status, mode := domainActive, modeSequential
		if c.Status == link.DomainRemoved {
			status = domainRemoved
		}
		if c.CodeMode == link.CodesFF1 {
			mode = modeFF1
		}
		dst = append(dst, kindDomain, status, mode)
		dst = binary.AppendUvarint(dst, uint64(c.ID))
		dst = binary.AppendUvarint(dst, uint64(c.TenantID))
		dst = appendString(dst, c.Host)
		dst = appendString(dst, c.RootRedirect)
		dst = appendString(dst, c.NotFoundRedirect)
		dst = appendString(dst, c.Robots)
		dst = binary.AppendUvarint(dst, uint64(len(c.KeyIDs)))
		for _, k := range c.KeyIDs {
			dst = appendString(dst, k)
		}
	case KindSegment:
		state := segOpened
		if e.SegState == SegmentSealed {
			state = segSealed
		}
		dst = append(dst, kindSegment, state)
		dst = appendString(dst, e.Namespace)
		dst = binary.AppendUvarint(dst, e.SegStart)
		dst = binary.AppendUvarint(dst, e.SegEnd-e.SegStart)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func statusCode(s link.Status) byte {
	switch s {
	case link.Active:
		return statusActive
	case link.Disabled:
		return statusDisabled
	default: // validated: link.Deleted
		return statusDeleted
	}
}

// Decode reads one stream message, any shape: a batch (FormatBatch,
// FormatBatchExtras, or FormatBatchNoDomains with every link on
// link.DefaultDomain) or one JSON event. A domain event's Conf is its own, with Conf.Version the event's. It appends the events to dst[:0] in stream order, each
// with its Prev, and returns it. A message that is malformed anywhere is an
// error and yields no events, never some of them.
func Decode(b []byte, dst []Event) ([]Event, error) {
	dst = dst[:0]
	if len(b) == 0 || (b[0] != FormatBatch && b[0] != FormatBatchExtras && b[0] != FormatBatchNoDomains) {
		dst = append(dst, Event{})
		if err := Unmarshal(b, &dst[0]); err != nil {
			return dst[:0], err
		}
		return dst, nil
	}
	if len(b) < batchHeader {
		return dst, fmt.Errorf("%w: batch of %d bytes has no header", errInvalid, len(b))
	}
	n := binary.LittleEndian.Uint32(b[1:batchHeader])
	r := reader{b: b[batchHeader:], domains: b[0] != FormatBatchNoDomains, extras: b[0] == FormatBatchExtras}
	prev := r.uvarint("first prev")
	if n == 0 {
		r.fail("empty batch")
	}
	// Every event takes at least 5 bytes: never trust the count for more.
	dst = growEvents(dst, int(min(uint64(n), uint64(len(r.b)/5+1))))
	for i := uint32(0); i < n && r.err == nil; i++ {
		var e Event
		r.event(&e, prev)
		if r.err != nil {
			break
		}
		if err := e.validate(); err != nil {
			return dst[:0], fmt.Errorf("batch event %d: %w", i, err)
		}
		dst = append(dst, e)
		prev = e.Version
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Sprintf("%d bytes after the last event", len(r.b)))
	}
	if r.err != nil {
		return dst[:0], r.err
	}
	return dst, nil
}

func growEvents(dst []Event, n int) []Event {
	if cap(dst) < n {
		return make([]Event, 0, n)
	}
	return dst
}

// truncated ends the message of a field that runs past the end of a batch.
const truncated = "runs past the end of the message"

type reader struct {
	b []byte
	// domains: the format carries link domains and domain events.
	domains bool
	// extras: the format carries link extras (FormatBatchExtras).
	extras bool
	err    error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: batch: %s", errInvalid, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail(what + " " + truncated)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) varint(what string) int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail(what + " " + truncated)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) byte(what string) byte {
	if len(r.b) < 1 {
		r.fail(what + " " + truncated)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// string reads a length-prefixed string of at most max bytes.
func (r *reader) string(what string, max int) string {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(max) {
		r.fail(fmt.Sprintf("%s of %d bytes, more than %d", what, n, max))
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail(what + " " + truncated)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Bounds on a batch's strings: longer ones are refused before they are
// copied. A code is validated afterwards; these only stop a corrupt length.
const (
	maxURL       = 1 << 16
	maxNamespace = 1 << 10
	maxHost      = 253
)

// domain reads a domain number, refusing one past link.MaxDomainID.
func (r *reader) domain() link.DomainID {
	d := r.uvarint("domain")
	if r.err == nil && d > uint64(link.MaxDomainID) {
		r.fail(fmt.Sprintf("domain %d", d))
	}
	return link.DomainID(d)
}

// domainConf reads a domain event's configuration into a new Conf.
func (r *reader) domainConf(e *Event) {
	c := &link.Domain{Version: e.Version}
	switch st := r.byte("domain status"); st {
	case domainActive:
		c.Status = link.DomainActive
	case domainRemoved:
		c.Status = link.DomainRemoved
	default:
		r.fail(fmt.Sprintf("domain status %d", st))
		return
	}
	switch m := r.byte("code mode"); m {
	case modeSequential:
		c.CodeMode = link.CodesSequential
	case modeFF1:
		c.CodeMode = link.CodesFF1
	default:
		r.fail(fmt.Sprintf("code mode %d", m))
		return
	}
	c.ID = r.domain()
	tenant := r.uvarint("tenant")
	if r.err == nil && tenant > math.MaxInt64 {
		r.fail("tenant past int64")
	}
	c.TenantID = int64(tenant)
	c.Host = r.string("host", maxHost)
	c.RootRedirect = r.string("root redirect", MaxRedirectLen)
	c.NotFoundRedirect = r.string("not-found redirect", MaxRedirectLen)
	c.Robots = r.string("robots", link.MaxRobotsLen)
	n := r.uvarint("key id count")
	if r.err == nil && n > link.MaxKeyIDs {
		r.fail(fmt.Sprintf("%d key ids", n))
	}
	if r.err != nil {
		return
	}
	if n > 0 {
		c.KeyIDs = make([]string, n)
		for i := range c.KeyIDs {
			c.KeyIDs[i] = r.string("key id", link.MaxKeyIDLen)
		}
	}
	e.Conf = c
}

// event reads one event that follows version prev.
func (r *reader) event(e *Event, prev uint64) {
	delta := r.uvarint("version")
	if r.err != nil {
		return
	}
	if delta == 0 || delta > math.MaxUint64-prev {
		r.fail(fmt.Sprintf("version %d after %d", prev+delta, prev))
		return
	}
	e.Prev, e.Version = prev, prev+delta
	switch kind := r.byte("kind"); kind {
	case kindLink:
		e.Kind = KindLink
		st := r.byte("status")
		hasExtras := r.extras && st&statusExtras != 0
		if hasExtras {
			st &^= statusExtras
		}
		switch st {
		case statusActive:
			e.Status = link.Active
		case statusDisabled:
			e.Status = link.Disabled
		case statusDeleted:
			e.Status = link.Deleted
		default:
			r.fail(fmt.Sprintf("status %d", st))
			return
		}
		e.RedirectType = link.RedirectType(r.varint("redirect type"))
		e.ExpiresAt = r.varint("expiry")
		if r.domains {
			e.Domain = r.domain()
		}
		e.Code = r.string("code", link.MaxCodeLen)
		e.URL = r.string("url", maxURL)
		if hasExtras {
			if e.Extras = r.string("extras", link.MaxExtrasLen); r.err == nil && e.Extras == "" {
				r.fail("empty extras flagged")
			}
		}
	case kindDomain:
		if !r.domains {
			r.fail("a domain event in a format without domains")
			return
		}
		e.Kind = KindDomain
		r.domainConf(e)
	case kindSegment:
		e.Kind = KindSegment
		switch st := r.byte("segment state"); st {
		case segOpened:
			e.SegState = SegmentOpened
		case segSealed:
			e.SegState = SegmentSealed
		default:
			r.fail(fmt.Sprintf("segment state %d", st))
			return
		}
		e.Namespace = r.string("namespace", maxNamespace)
		e.SegStart = r.uvarint("segment start")
		size := r.uvarint("segment size")
		if r.err == nil && size > math.MaxUint64-e.SegStart {
			r.fail("segment end past the ID space")
			return
		}
		e.SegEnd = e.SegStart + size
	default:
		if r.err == nil {
			r.fail(fmt.Sprintf("kind %d", kind))
		}
	}
}
