// Package clicks is what edges publish to the CLICKS stream and control rolls
// up: click batches and redirect service-time histograms, their compact
// binary encodings, the user-agent classifier and the referrer-host rule.
//
// Clicks are at-most-once on the edge by design: the edge records them off
// the response path, and a full buffer or an unreachable NATS drops them
// (counted) rather than slow a redirect down. Everything after the stream is
// exactly-once: control stores its stream position in the same transaction
// as the rollups.
//
// What a click carries (format 5): the domain and code, the time, the edge,
// the status answered, which of the link's targets served it (Rule), the
// referrer's host only, the device class, bot flag, browser and OS families
// derived from the User-Agent on the edge, the client's country, and a
// visitor hash for counting uniques. What it never carries: the client's IP
// address, the raw User-Agent, the full referrer URL. The country is looked
// up on the edge and the address forgotten; the visitor hash is a keyed hash
// of the address and User-Agent under a salt of the click's UTC day that
// every edge shares and that is deleted soon after the day ends
// (SaltBucket), so once the salt is gone no one, the operator included, can
// recompute a visitor's hash from an address, nor link one day's visitors to
// another's.
package clicks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/link"
)

const (
	// Stream is the JetStream stream holding click batches and histograms.
	Stream = "CLICKS"
	// SubjectPrefix starts every click subject; an edge publishes on
	// SubjectPrefix + its name, so a consumer can tell edges apart.
	SubjectPrefix = "clicks."
	// Subjects is the stream's subject filter.
	Subjects = SubjectPrefix + ">"
)

// Stream limits. Both sides create the stream with these so neither
// silently changes the other's: if control falls behind, the stream keeps at
// most MaxBytes and MaxAge of clicks and discards the oldest (control counts
// what it never saw); edges keep redirecting whatever happens.
const (
	MaxAge     = 7 * 24 * time.Hour
	MaxBytes   = 1 << 30
	Duplicates = 2 * time.Minute
)

// Subject is the subject edge publishes on.
func Subject(edge string) string { return SubjectPrefix + edge }

// Limits of the fields a click carries. Longer input is cut, never
// rejected: statistics should not lose a click over a long header.
const (
	MaxEdgeLen     = 64
	MaxBootLen     = 32
	MaxReferrerLen = 64 // a referrer host; DNS allows 253, real ones rarely pass 64
)

// Click is one redirect served. Fields a format does not carry are zero:
// before format 5 a click has no country, browser, OS, visitor or rule.
type Click struct {
	Domain   link.DomainID // with Code, the link's key
	Code     string
	At       int64  // Unix milliseconds
	Status   uint16 // the HTTP status answered: 301, 302, 307, 308 (0 from format 1)
	Device   Device
	Bot      bool
	Referrer string // the referrer's host, lower case; "" when none
	// Country is the client's ISO 3166-1 alpha-2 code, upper case; zero
	// when unknown (no geo data on the edge, or an address it lacks).
	Country [2]byte
	Browser Browser
	OS      OS
	// Visitor is a keyed hash of the client for counting unique visitors
	// per day; 0 when unknown (the edge had no salt for the click's day).
	// Equal within a UTC day across edges, unrelated across days.
	Visitor uint64
	// Rule says which target served the click: 0 the link's own, i its
	// i-th rule.
	Rule uint8
}

// Day is the UTC day of the click, as rollups key it.
func (c Click) Day() time.Time { return DayOf(c.At) }

// DayOf is the UTC midnight of the day holding atMillis.
func DayOf(atMillis int64) time.Time {
	return time.UnixMilli(atMillis).UTC().Truncate(24 * time.Hour)
}

// Source says which edge process sent a message and what it had counted
// when it sent it: Offered clicks (every hit it tried to record) and Dropped
// ones (buffer full or publish failed). Control keeps the highest numbers
// per Edge and Boot; Offered − Dropped − clicks applied is what a boot lost
// without knowing it (an edge killed with clicks in its buffer).
type Source struct {
	Edge    string
	Boot    string // random per process start
	Offered uint64
	Dropped uint64
}

// Batch is one message of the stream: clicks or a histogram delta.
type Batch struct {
	Source
	Clicks  []Click
	Latency *Histogram // for a histogram message; nil for clicks
	At      int64      // when a histogram message was cut, Unix milliseconds
}

// Message formats: the first byte of every message. Control decodes every
// one of them, so batches an older edge published (still in the stream
// after an upgrade, or from an edge not yet upgraded) keep counting: their
// clicks are on the platform's domain, the only one there was.
const (
	formatClicksV1 byte = 1 // code and time only (the first edge release)
	formatClicksV2 byte = 2 // no domain (before issue 20)
	formatLatency  byte = 3
	formatClicksV4 byte = 4 // a domain per click
	formatClicks   byte = 5 // and country, browser, OS, visitor, rule (issue 22)
)

var errInvalid = errors.New("clicks: invalid message")

func appendString[S string | []byte](dst []byte, s S, max int) []byte {
	if len(s) > max {
		s = s[:max]
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

func appendSource(dst []byte, src Source) []byte {
	dst = appendString(dst, src.Edge, MaxEdgeLen)
	dst = appendString(dst, src.Boot, MaxBootLen)
	dst = binary.AppendUvarint(dst, src.Offered)
	return binary.AppendUvarint(dst, src.Dropped)
}

// AppendHeader starts a click batch of n clicks from src in dst.
func AppendHeader(dst []byte, src Source, n int) []byte {
	dst = append(dst, formatClicks)
	dst = appendSource(dst, src)
	return binary.AppendUvarint(dst, uint64(n))
}

// AppendClick appends one click of a batch. c.Code must be a valid code,
// c.Domain at most link.MaxDomainID, c.Status within 100-599, c.Country two
// upper-case letters or zero and the classes known ones (Decode refuses the
// batch otherwise); c.Referrer is cut to MaxReferrerLen. It keeps nothing
// of c and allocates only when dst must grow.
func AppendClick(dst []byte, c ClickView) []byte {
	dst = binary.AppendVarint(dst, c.At)
	dst = binary.AppendUvarint(dst, uint64(c.Status))
	flags := byte(c.Device) & deviceMask
	if c.Bot {
		flags |= botFlag
	}
	dst = append(dst, flags)
	dst = appendString(dst, c.Referrer, MaxReferrerLen)
	dst = binary.AppendUvarint(dst, uint64(c.Domain))
	// A code is never cut to fit: cut, it could name another link. One
	// that is too long stays too long, and Decode refuses the batch.
	dst = appendString(dst, c.Code, link.MaxCodeLen+1)
	// Format 5's fields, after format 4's: fixed width, so a click is
	// still one pass with no lengths to check.
	dst = append(dst, c.Country[0], c.Country[1], byte(c.Browser), byte(c.OS))
	dst = binary.LittleEndian.AppendUint64(dst, c.Visitor)
	return append(dst, c.Rule)
}

const (
	deviceMask byte = 0x0f
	botFlag    byte = 0x80
)

// AppendLatency encodes a histogram message: the source, when it was cut,
// and the non-zero buckets.
func AppendLatency(dst []byte, src Source, at int64, h *Histogram) []byte {
	dst = append(dst, formatLatency)
	dst = appendSource(dst, src)
	dst = binary.AppendVarint(dst, at)
	n := 0
	for _, c := range h {
		if c != 0 {
			n++
		}
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for i, c := range h {
		if c != 0 {
			dst = binary.AppendUvarint(dst, uint64(i))
			dst = binary.AppendUvarint(dst, c)
		}
	}
	return dst
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errInvalid, what)
	}
}

func (r *reader) uvarint(what string) uint64 { return readVarint(r, what, binary.Uvarint) }

func (r *reader) varint(what string) int64 { return readVarint(r, what, binary.Varint) }

// readVarint reads one varint with decode, failing r with what when the
// rest holds none.
func readVarint[T uint64 | int64](r *reader, what string, decode func([]byte) (T, int)) T {
	v, k := decode(r.b)
	if k <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *reader) byte(what string) byte {
	if len(r.b) < 1 {
		r.fail(what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) bytes(what string, max int) []byte {
	n := int(r.byte(what))
	if n > max || len(r.b) < n {
		r.fail(what)
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) source() Source {
	var s Source
	s.Edge = string(r.bytes("edge", MaxEdgeLen))
	s.Boot = string(r.bytes("boot", MaxBootLen))
	s.Offered = r.uvarint("offered")
	s.Dropped = r.uvarint("dropped")
	return s
}

// Decode reads a message of any format, validating every field.
func Decode(b []byte) (Batch, error) {
	var v View
	if err := DecodeView(b, &v); err != nil {
		return Batch{}, err
	}
	out := Batch{Source: v.Source, Latency: v.Latency, At: v.At}
	if v.Latency == nil {
		out.Clicks = make([]Click, len(v.Clicks))
		for i, c := range v.Clicks {
			out.Clicks[i] = Click{Domain: c.Domain, Code: string(c.Code), At: c.At, Status: c.Status, Device: c.Device, Bot: c.Bot,
				Referrer: string(c.Referrer), Country: c.Country, Browser: c.Browser, OS: c.OS, Visitor: c.Visitor, Rule: c.Rule}
		}
	}
	return out, nil
}

// View is a message as DecodeView reads it: a Batch whose clicks alias the
// message's bytes instead of copying them.
type View struct {
	Source
	Clicks  []ClickView
	Latency *Histogram // for a histogram message; nil for clicks
	At      int64      // when a histogram message was cut, Unix milliseconds
}

// ClickView is a Click whose Code and Referrer alias the message it was
// read from: valid while that message's bytes are, and not to be changed.
// It is also what AppendClick encodes, from bytes the caller holds.
type ClickView struct {
	Domain   link.DomainID // link.DefaultDomain from formats without one
	Code     []byte
	At       int64
	Status   uint16
	Device   Device
	Bot      bool
	Referrer []byte
	Country  [2]byte // zero when unknown, and from formats 1-4
	Browser  Browser
	OS       OS
	Visitor  uint64 // 0 when unknown, and from formats 1-4
	Rule     uint8
}

// View is c as a ClickView aliasing c's strings' bytes: for encoding
// (AppendClick copies them); the bytes must not be changed.
func (c *Click) View() ClickView {
	return ClickView{Domain: c.Domain, Code: bytesOf(c.Code), At: c.At, Status: c.Status, Device: c.Device, Bot: c.Bot,
		Referrer: bytesOf(c.Referrer), Country: c.Country, Browser: c.Browser, OS: c.OS, Visitor: c.Visitor, Rule: c.Rule}
}

// bytesOf is s's bytes without a copy; they must not be changed.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ValidCountry reports whether c is a country as a click carries it: two
// upper-case ASCII letters, or zero (unknown).
func ValidCountry(c [2]byte) bool {
	return c == [2]byte{} || 'A' <= c[0] && c[0] <= 'Z' && 'A' <= c[1] && c[1] <= 'Z'
}

// Day is the UTC day of the click, as rollups key it.
func (c *ClickView) Day() time.Time { return DayOf(c.At) }

// DecodeView reads a message of any format into v, validating every field
// as Decode does, without copying the clicks' bytes: v.Clicks reuses its
// storage, so a caller that keeps one View decodes message after message
// without allocating (only the edge and boot names are copied). On error v
// holds nothing of the message.
func DecodeView(b []byte, v *View) error {
	clicks := v.Clicks[:0]
	*v = View{}
	if len(b) < 2 {
		return fmt.Errorf("%w: too short", errInvalid)
	}
	r := &reader{b: b[1:]}
	switch b[0] {
	case formatClicksV1:
		clicks = r.clicksV1(clicks)
	case formatClicksV2, formatClicksV4, formatClicks:
		v.Source = r.source()
		clicks = r.clicks(clicks, b[0])
	case formatLatency:
		v.Source = r.source()
		v.At = r.varint("time")
		v.Latency = r.histogram()
	default:
		return fmt.Errorf("%w: unknown format %d", errInvalid, b[0])
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		*v = View{Clicks: clicks[:0]}
		return r.err
	}
	v.Clicks = clicks
	return nil
}

// count reads a count of items each at least min bytes long, refusing one
// the rest of the message cannot hold (so a forged count cannot make Decode
// allocate much).
func (r *reader) count(min int) int {
	n := r.uvarint("count")
	if n > uint64(len(r.b)/min) {
		r.fail("count")
		return 0
	}
	return int(n)
}

func (r *reader) code() []byte {
	c := r.bytes("code", link.MaxCodeLen)
	if r.err == nil && !link.ValidCodeSyntax(c) {
		r.fail("code")
	}
	return c
}

// grow returns out emptied, with room for n views.
func grow(out []ClickView, n int) []ClickView {
	if cap(out) < n {
		return make([]ClickView, 0, n)
	}
	return out[:0]
}

func (r *reader) clicksV1(out []ClickView) []ClickView {
	n := r.count(3)
	out = grow(out, n)
	for range n {
		at := r.varint("time")
		c := r.code()
		if r.err != nil {
			return out[:0]
		}
		out = append(out, ClickView{Code: c, At: at})
	}
	return out
}

// Smallest encoded click of each format: time, status, flags, referrer
// length and code length a byte each (a code is at least one byte), then
// the domain's byte (format 4) and format 5's 13 fixed bytes.
const (
	minClickV2 = 6
	minClickV4 = minClickV2 + 1
	minClick   = minClickV4 + 2 + 1 + 1 + 8 + 1
)

// clicks reads the clicks of a batch of format 2 (no domain: on the
// default one), 4 (a domain per click) or 5 (and the fields added by
// issue 22).
func (r *reader) clicks(out []ClickView, format byte) []ClickView {
	min := minClick
	switch format {
	case formatClicksV2:
		min = minClickV2
	case formatClicksV4:
		min = minClickV4
	}
	n := r.count(min)
	out = grow(out, n)
	for range n {
		var c ClickView
		c.At = r.varint("time")
		st := r.uvarint("status")
		flags := r.byte("flags")
		ref := r.bytes("referrer", MaxReferrerLen)
		if format >= formatClicksV4 {
			d := r.uvarint("domain")
			if d > uint64(link.MaxDomainID) {
				r.fail("domain")
			}
			c.Domain = link.DomainID(d)
		}
		c.Code = r.code()
		if format >= formatClicks {
			r.fixed(&c)
		}
		if r.err != nil {
			return out[:0]
		}
		if st < 100 || st > 599 || Device(flags&deviceMask) >= numDevices || flags&^(deviceMask|botFlag) != 0 {
			r.fail("click fields")
			return out[:0]
		}
		c.Status, c.Device, c.Bot, c.Referrer = uint16(st), Device(flags&deviceMask), flags&botFlag != 0, ref
		out = append(out, c)
	}
	return out
}

// fixed reads format 5's fixed-width fields into c, refusing a country
// that is not two upper-case letters or zero and classes it does not know.
func (r *reader) fixed(c *ClickView) {
	const n = 2 + 1 + 1 + 8 + 1
	if r.err != nil {
		return
	}
	if len(r.b) < n {
		r.fail("click fields")
		return
	}
	b := r.b[:n]
	r.b = r.b[n:]
	c.Country = [2]byte{b[0], b[1]}
	c.Browser, c.OS = Browser(b[2]), OS(b[3])
	c.Visitor = binary.LittleEndian.Uint64(b[4:12])
	c.Rule = b[12]
	switch {
	case !ValidCountry(c.Country):
		r.fail("country")
	case c.Browser >= numBrowsers:
		r.fail("browser")
	case c.OS >= numOSes:
		r.fail("os")
	}
}

func (r *reader) histogram() *Histogram {
	n := r.count(2)
	h := new(Histogram)
	last := -1
	for range n {
		i := r.uvarint("bucket")
		c := r.uvarint("bucket count")
		if r.err != nil {
			return nil
		}
		// Ascending, non-zero buckets only: one encoding per histogram.
		if i >= Buckets || int(i) <= last || c == 0 {
			r.fail("bucket")
			return nil
		}
		h[i], last = c, int(i)
	}
	return h
}

// StreamConfig is the CLICKS stream as whoever creates it first, an edge or
// control, creates it: one definition, so neither changes the other's
// limits. Old batches are discarded when it is full: edges never wait for a
// consumer that fell behind, and control counts what it never saw.
func StreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:       Stream,
		Subjects:   []string{Subjects},
		Storage:    jetstream.FileStorage,
		MaxAge:     MaxAge,
		MaxBytes:   MaxBytes,
		Duplicates: Duplicates,
		Discard:    jetstream.DiscardOld,
	}
}
