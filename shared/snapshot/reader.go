package snapshot

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Snapshot is an opened snapshot. It is immutable and safe for concurrent
// use; lookups read the file's bytes in place.
//
// A Snapshot from OpenDeferred or OpenFile answers lookups before its large
// sections are verified (Verify): every lookup is bounds-checked, so bytes
// that are wrong can make it answer wrongly or miss, never fault or read
// outside the file.
type Snapshot struct {
	Header Header

	format  uint32
	size    int
	mapped  bool
	file    []byte // the mapping, when mapped
	sealed  []Sealed
	bloom   []byte
	origins [][]byte
	v1      legacy // format 1 entries
	t       tables // format 2 and 3 entries
	// parts are the domains' tables in ascending domain number (one, domain
	// 0's, in format 2; none in format 1), byID indexes them by number
	// when the numbers are dense (nil: binary search).
	parts   []part
	byID    []uint32
	domains []link.Domain // format 3's table; nil before

	// unchecked are the sections whose checksums Verify has yet to check.
	unchecked []section
	verified  atomic.Bool
	verifyMu  sync.Mutex
	verifyErr error

	lockMu sync.Mutex // serializes Lock and ReleasePages
	locked atomic.Bool
}

type section struct {
	kind int
	sum  uint32
	b    []byte
}

// Entry is a looked-up link. Origin and Rest point into the snapshot's
// file and must not be modified. They stay valid while the Entry (or the
// Snapshot) is reachable: an Entry keeps a mapped file mapped. Copy them
// before dropping the Entry; AppendURL does.
type Entry struct {
	Origin, Rest []byte // the target is Origin followed by Rest
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	// Version is the link's version when the file recorded one above the
	// header's change version, else the header's change version: an upper
	// bound, which is what replaying the stream after it needs.
	Version uint64
	// Extras are the link's extras in their wire form (shared/link
	// ExtrasView reads them in place); nil for a plain link. They point
	// into the file as Origin and Rest do.
	Extras []byte

	snap *Snapshot // keeps the bytes above mapped
}

// AppendURL appends the entry's target to dst.
func (e *Entry) AppendURL(dst []byte) []byte {
	dst = append(append(dst, e.Origin...), e.Rest...)
	runtime.KeepAlive(e.snap)
	return dst
}

var le = binary.LittleEndian

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Open validates data completely (OpenDeferred, then Verify) and returns
// the snapshot over it. data must not be modified afterwards. Any
// inconsistency is an error wrapping ErrCorrupt; nothing is half-loaded.
func Open(data []byte) (*Snapshot, error) {
	s, err := OpenDeferred(data)
	if err != nil {
		return nil, err
	}
	if err := s.Verify(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenDeferred returns the snapshot over data after the checks that do not
// grow with the number of links: the header and its checksum, the section
// table, every section's bounds, and the checksums and contents of the
// sealed, bloom, dictionary and layout sections (everything a miss may be
// answered from without the authority). The checksums and fields of the
// entry sections are left to Verify; until it returned nil, an answer may
// come from bytes that are wrong (see Snapshot). A format 1 file is
// verified completely here. data must not be modified afterwards.
func OpenDeferred(data []byte) (*Snapshot, error) {
	if len(data) < headerLen {
		return nil, corrupt("%d bytes, shorter than the %d-byte header", len(data), headerLen)
	}
	if string(data[:8]) != magic {
		return nil, corrupt("not a snapshot (bad magic)")
	}
	var (
		s   *Snapshot
		err error
	)
	switch v := le.Uint32(data[8:]); v {
	case 1:
		s, err = openV1(data)
	case 2, 3, 4:
		s, err = openV2(data, v)
	default:
		return nil, corrupt("format version %d, this reader knows 1 to 4", v)
	}
	if err != nil {
		return nil, err
	}
	s.size = len(data)
	return s, nil
}

// preface parses the header and the section table of a file of n
// sections, checking the header's checksum and every section's bounds.
func preface(data []byte, n int, format uint32) (Header, []section, error) {
	var h Header
	if len(data) < prefaceLen(n) {
		return h, nil, corrupt("%d bytes, shorter than the %d-byte header", len(data), prefaceLen(n))
	}
	crcAt := headerLen + n*tableRowLen
	if crc32.Checksum(data[:crcAt], castagnoli) != le.Uint32(data[crcAt:]) {
		return h, nil, corrupt("header checksum mismatch")
	}
	if le.Uint32(data[crcAt+4:]) != 0 || le.Uint32(data[60:]) != 0 {
		return h, nil, corrupt("reserved header bytes are not zero")
	}
	h = Header{
		Flags:         le.Uint32(data[12:]),
		ChangeVersion: le.Uint64(data[16:]),
		StreamSeq:     le.Uint64(data[24:]),
		CreatedMillis: int64(le.Uint64(data[32:])),
		Entries:       le.Uint64(data[40:]),
		BloomCount:    le.Uint64(data[48:]),
	}
	if c := le.Uint32(data[56:]); c != uint32(n) {
		return h, nil, corrupt("%d sections, want %d", c, n)
	}
	secs := make([]section, n)
	next := uint64(prefaceLen(n))
	for i := range secs {
		row := data[headerLen+i*tableRowLen:]
		kind, sum, off, size := le.Uint32(row), le.Uint32(row[4:]), le.Uint64(row[8:]), le.Uint64(row[16:])
		if kind != uint32(i+1) || off != align(next, format) || size > uint64(len(data)) || off+size > uint64(len(data)) {
			return h, nil, corrupt("section %d: kind %d at %d+%d in a %d-byte file", i+1, kind, off, size, len(data))
		}
		for _, b := range data[next:off] {
			if b != 0 {
				return h, nil, corrupt("section %d: non-zero padding before it", i+1)
			}
		}
		secs[i] = section{kind: i + 1, sum: sum, b: data[off : off+size : off+size]}
		next = off + size
	}
	if next != uint64(len(data)) {
		return h, nil, corrupt("%d trailing bytes", uint64(len(data))-next)
	}
	return h, secs, nil
}

// sectionAlign is where format 2 and 3 sections start: at multiples of 64
// bytes from the file's start (a mapping's start is page-aligned), so that
// no table row straddles two cache lines. Format 1 sections follow each
// other.
const sectionAlign = 64

func align(off uint64, format uint32) uint64 {
	if format == 1 {
		return off
	}
	return (off + sectionAlign - 1) &^ (sectionAlign - 1)
}

// checksum checks sec's CRC in chunks, giving up when ctx ends.
func checksum(ctx context.Context, sec section) error {
	const chunk = 8 << 20
	var sum uint32
	for b := sec.b; len(b) > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(b), chunk)
		sum = crc32.Update(sum, castagnoli, b[:n])
		b = b[n:]
	}
	if sum != sec.sum {
		return corrupt("section %d checksum mismatch", sec.kind)
	}
	return nil
}

// Verify checks what OpenDeferred left unchecked: the checksum of every
// entry section and every field a lookup reads. It returns nil at once once
// it has returned nil, and the same error again once it has found one; when
// ctx ends first it returns ctx's error and may be called again. It may run
// while lookups do.
func (s *Snapshot) Verify(ctx context.Context) error {
	if s.verified.Load() {
		return nil
	}
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if s.verified.Load() {
		return nil
	}
	if s.verifyErr != nil {
		return s.verifyErr
	}
	err := s.verify(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.verifyErr = err
		}
		return err
	}
	s.verified.Store(true)
	return nil
}

func (s *Snapshot) verify(ctx context.Context) error {
	for _, sec := range s.unchecked {
		if err := checksum(ctx, sec); err != nil {
			return err
		}
	}
	defer runtime.KeepAlive(s)
	return s.validateTables(ctx)
}

// Verified reports whether every byte a lookup reads has been checked:
// always for Open, after Verify returned nil for OpenDeferred and OpenFile.
func (s *Snapshot) Verified() bool { return s.verified.Load() }

// Format is the file's format version.
func (s *Snapshot) Format() int { return int(s.format) }

// Size is the file's length in bytes.
func (s *Snapshot) Size() int { return s.size }

// Mapped reports whether the file is read in place from a mapping
// (OpenFile) rather than from memory the caller gave.
func (s *Snapshot) Mapped() bool { return s.mapped }

// cursor reads a section with bounds checks that turn into errors.
type cursor struct {
	b   []byte
	err error
}

func (c *cursor) uvarint() uint64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Uvarint(c.b)
	if n <= 0 {
		c.err = corrupt("bad varint")
		return 0
	}
	c.b = c.b[n:]
	return v
}

func (c *cursor) bytes(n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > uint64(len(c.b)) {
		c.err = corrupt("field of %d bytes runs past its section", n)
		return nil
	}
	out := c.b[:n:n]
	c.b = c.b[n:]
	return out
}

func (c *cursor) u64() uint64 {
	b := c.bytes(8)
	if b == nil {
		return 0
	}
	return le.Uint64(b)
}

func (c *cursor) align4(sectionLen int) {
	if c.err != nil {
		return
	}
	used := sectionLen - len(c.b)
	if pad := (4 - used%4) % 4; pad > 0 {
		p := c.bytes(uint64(pad))
		for _, x := range p {
			if x != 0 {
				c.err = corrupt("non-zero padding")
			}
		}
	}
}

func decodeSealed(b []byte) ([]Sealed, error) {
	c := cursor{b: b}
	n := c.uvarint()
	if n > uint64(len(b)) {
		return nil, corrupt("sealed: %d namespaces in %d bytes", n, len(b))
	}
	out := make([]Sealed, 0, n)
	for range n {
		name := c.bytes(c.uvarint())
		k := c.uvarint()
		if c.err != nil {
			return nil, c.err
		}
		if len(name) == 0 || k > uint64(len(c.b)) {
			return nil, corrupt("sealed: bad namespace entry")
		}
		s := Sealed{Namespace: string(name), Intervals: make([]Interval, 0, k)}
		var last uint64
		for i := range k {
			iv := Interval{c.uvarint(), c.uvarint()}
			if c.err != nil {
				return nil, c.err
			}
			if iv.Start >= iv.End || (i > 0 && iv.Start < last) {
				return nil, corrupt("sealed: intervals of %q out of order", s.Namespace)
			}
			last = iv.End
			s.Intervals = append(s.Intervals, iv)
		}
		out = append(out, s)
	}
	if c.err == nil && len(c.b) != 0 {
		return nil, corrupt("sealed: %d trailing bytes", len(c.b))
	}
	return out, c.err
}

func decodeDict(b []byte) ([][]byte, error) {
	c := cursor{b: b}
	n := c.uvarint()
	if n > uint64(len(b)) {
		return nil, corrupt("dictionary: %d origins in %d bytes", n, len(b))
	}
	out := make([][]byte, 0, n)
	for range n {
		out = append(out, c.bytes(c.uvarint()))
	}
	if c.err == nil && len(c.b) != 0 {
		return nil, corrupt("dictionary: %d trailing bytes", len(c.b))
	}
	return out, c.err
}

// Lookup finds code on domain d. It does not allocate. A format 1 or 2
// file holds domain 0's codes only.
func (s *Snapshot) Lookup(d link.DomainID, code []byte) (Entry, bool) {
	i, ok := s.find(d, code)
	if !ok {
		return Entry{}, false
	}
	return s.entry(i)
}

// Find returns the index of code on domain d, in [0, Slots()): a number
// per entry, unique across all domains, that callers may index their own
// per-entry state by. It does not allocate.
func (s *Snapshot) Find(d link.DomainID, code []byte) (int, bool) {
	i, ok := s.find(d, code)
	if ok && s.format != 1 {
		w0, w1, _ := s.t.row(i)
		ok = s.rowOK(w0, w1)
	}
	return i, ok
}

// At returns the entry at index i, as Find gave it; the zero Entry for an
// index Find cannot give.
func (s *Snapshot) At(i int) Entry {
	e, _ := s.entry(i)
	return e
}

// Slots bounds the indexes Find returns: at least Len, more where the
// file's tables have empty rows.
func (s *Snapshot) Slots() int {
	if s.format == 1 {
		return s.v1.nGen + s.v1.nCustom
	}
	return s.t.genRows + len(s.t.custom)/customRowLen
}

func (s *Snapshot) find(d link.DomainID, code []byte) (int, bool) {
	if s.format == 1 {
		if d != link.DefaultDomain {
			return 0, false
		}
		return s.v1.find(code)
	}
	p := s.partOf(d)
	if p == nil {
		return 0, false
	}
	if len(code) == base62.Length && base62.Valid(code) {
		id, _ := base62.Digits(code)
		return p.findGenerated(id)
	}
	return p.findCustom(&s.t, code)
}

func (s *Snapshot) entry(i int) (Entry, bool) {
	if s.format == 1 {
		if i < 0 || i >= s.v1.nGen+s.v1.nCustom {
			return Entry{}, false
		}
		return s.v1.entry(s, i), true
	}
	return s.entryV2(i)
}

// Sealed returns the sealed-segment intervals per namespace, by global ID
// (link.IDRange: every domain's IDs are its own range).
func (s *Snapshot) Sealed() []Sealed { return s.sealed }

// Bloom returns domain d's bloom, the bytes of a bits-and-blooms/bloom/v3
// filter over every code of d the authority held, valid while s is
// reachable; nil for a domain the file does not have. A format 1 or 2
// file has one bloom, domain 0's.
func (s *Snapshot) Bloom(d link.DomainID) []byte {
	if s.format == 1 {
		if d != link.DefaultDomain {
			return nil
		}
		return s.bloom
	}
	if p := s.partOf(d); p != nil {
		return p.bloom
	}
	return nil
}

// Len is the number of entries.
func (s *Snapshot) Len() int { return int(s.Header.Entries) }

// Each calls fn for every entry, with its domain, generated codes first,
// until fn returns false. code is only valid during the call. Entries
// whose bytes are wrong in a file not verified yet are skipped.
func (s *Snapshot) Each(fn func(d link.DomainID, code []byte, e Entry) bool) {
	defer runtime.KeepAlive(s)
	if s.format == 1 {
		s.v1.each(s, func(code []byte, e Entry) bool { return fn(link.DefaultDomain, code, e) })
		return
	}
	var buf [base62.Length]byte
	for pi := range s.parts {
		p := &s.parts[pi]
		for r := range len(p.gen) / genRowLen {
			e, ok := s.entryV2(p.genBase + r)
			if !ok || base62.Put(buf[:], le.Uint64(p.gen[r*genRowLen:])&keyMask) != nil {
				continue
			}
			if !fn(p.id, buf[:], e) {
				return
			}
		}
	}
	for pi := range s.parts {
		p := &s.parts[pi]
		for r := range len(p.custom) / customRowLen {
			e, ok := s.entryV2(p.customBase + r)
			if !ok {
				continue
			}
			code := s.t.codeAt(le.Uint64(p.custom[r*customRowLen:]) & keyMask)
			if code == nil {
				continue
			}
			if !fn(p.id, code, e) {
				return
			}
		}
	}
}
