package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Snapshot is a validated, loaded snapshot. It is immutable and safe for
// concurrent use; lookups read the file's bytes in place.
type Snapshot struct {
	Header Header

	sealed  []Sealed
	bloom   []byte
	origins [][]byte

	gen  []byte // G × u64 IDs
	nGen int
	// genIndex narrows a generated-code search to one bucket of the file's
	// ID span: IDs are allocated densely, so a bucket holds a handful of
	// entries and a lookup touches one or two cache lines instead of the
	// twenty of a binary search over millions.
	genIndex          []uint32
	genMin, genBucket uint64
	codeOffs          []byte // (C+1) × u32
	codeBytes         []byte
	nCustom           int
	records           []byte
	rest              []byte
	exp               []byte
	nExp              int
	newer             []byte
	nNewer            int
}

// Entry is a looked-up link. Its byte slices point into the snapshot and
// must not be modified.
type Entry struct {
	Origin, Rest []byte // the target is Origin followed by Rest
	RedirectType link.RedirectType
	Status       link.Status
	ExpiresAt    int64 // Unix milliseconds; 0 means never
	// Version is the link's version when the file recorded one above the
	// header's change version, else the header's change version: an upper
	// bound, which is what replaying the stream after it needs.
	Version uint64
}

// AppendURL appends the entry's target to dst.
func (e *Entry) AppendURL(dst []byte) []byte {
	return append(append(dst, e.Origin...), e.Rest...)
}

var le = binary.LittleEndian

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Open validates data completely and returns the snapshot over it. data must
// not be modified afterwards. Any inconsistency is an error wrapping
// ErrCorrupt; nothing is half-loaded.
func Open(data []byte) (*Snapshot, error) {
	if len(data) < prefaceLen {
		return nil, corrupt("%d bytes, shorter than the %d-byte header", len(data), prefaceLen)
	}
	if string(data[:8]) != magic {
		return nil, corrupt("not a snapshot (bad magic)")
	}
	if v := le.Uint32(data[8:]); v != FormatVersion {
		return nil, corrupt("format version %d, this reader knows %d", v, FormatVersion)
	}
	crcAt := headerLen + sectionCount*tableRowLen
	if crc32.Checksum(data[:crcAt], castagnoli) != le.Uint32(data[crcAt:]) {
		return nil, corrupt("header checksum mismatch")
	}
	if le.Uint32(data[crcAt+4:]) != 0 || le.Uint32(data[60:]) != 0 {
		return nil, corrupt("reserved header bytes are not zero")
	}
	s := &Snapshot{Header: Header{
		Flags:         le.Uint32(data[12:]),
		ChangeVersion: le.Uint64(data[16:]),
		StreamSeq:     le.Uint64(data[24:]),
		CreatedMillis: int64(le.Uint64(data[32:])),
		Entries:       le.Uint64(data[40:]),
		BloomCount:    le.Uint64(data[48:]),
	}}
	if n := le.Uint32(data[56:]); n != sectionCount {
		return nil, corrupt("%d sections, want %d", n, sectionCount)
	}
	var secs [sectionCount][]byte
	next := uint64(prefaceLen)
	for i := range secs {
		row := data[headerLen+i*tableRowLen:]
		kind, sum, off, n := le.Uint32(row), le.Uint32(row[4:]), le.Uint64(row[8:]), le.Uint64(row[16:])
		if kind != uint32(i+1) || off != next || n > uint64(len(data)) || off+n > uint64(len(data)) {
			return nil, corrupt("section %d: kind %d at %d+%d in a %d-byte file", i+1, kind, off, n, len(data))
		}
		secs[i] = data[off : off+n]
		if crc32.Checksum(secs[i], castagnoli) != sum {
			return nil, corrupt("section %d checksum mismatch", i+1)
		}
		next = off + n
	}
	if next != uint64(len(data)) {
		return nil, corrupt("%d trailing bytes", uint64(len(data))-next)
	}
	var err error
	if s.sealed, err = decodeSealed(secs[0]); err != nil {
		return nil, err
	}
	s.bloom = secs[1]
	if s.origins, err = decodeDict(secs[2]); err != nil {
		return nil, err
	}
	if err := s.decodeEntries(secs[3]); err != nil {
		return nil, err
	}
	if s.Header.Entries != uint64(s.nGen+s.nCustom) {
		return nil, corrupt("header says %d entries, file has %d", s.Header.Entries, s.nGen+s.nCustom)
	}
	s.buildIndex()
	return s, nil
}

// idsPerBucket is the index's target bucket size: about half a byte of index
// per link.
const idsPerBucket = 8

func (s *Snapshot) buildIndex() {
	if s.nGen == 0 {
		return
	}
	lo, hi := le.Uint64(s.gen), le.Uint64(s.gen[(s.nGen-1)*8:])
	buckets := uint64(s.nGen/idsPerBucket + 1)
	s.genMin = lo
	s.genBucket = (hi-lo)/buckets + 1 // span of one bucket, so (hi-lo)/genBucket < buckets
	s.genIndex = make([]uint32, buckets+1)
	b := uint64(0)
	for i := range s.nGen {
		for bi := (le.Uint64(s.gen[i*8:]) - lo) / s.genBucket; b <= bi; b++ {
			s.genIndex[b] = uint32(i)
		}
	}
	for ; b <= buckets; b++ {
		s.genIndex[b] = uint32(s.nGen)
	}
}

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

func (s *Snapshot) decodeEntries(b []byte) error {
	c := cursor{b: b}
	g := c.u64()
	if g > uint64(len(b))/8 {
		return corrupt("entries: %d generated codes in %d bytes", g, len(b))
	}
	s.gen, s.nGen = c.bytes(g*8), int(g)
	cn := c.u64()
	if cn > uint64(len(b))/4 {
		return corrupt("entries: %d custom codes in %d bytes", cn, len(b))
	}
	s.codeOffs, s.nCustom = c.bytes((cn+1)*4), int(cn)
	if c.err != nil {
		return c.err
	}
	s.codeBytes = c.bytes(uint64(le.Uint32(s.codeOffs[cn*4:])))
	c.align4(len(b))
	total := g + cn
	if total > uint64(len(b))/recordLen {
		return corrupt("entries: %d records in %d bytes", total, len(b))
	}
	s.records = c.bytes(total * recordLen)
	s.rest = c.bytes(c.u64())
	c.align4(len(b))
	e := c.u64()
	if e > uint64(len(b))/expiryLen {
		return corrupt("entries: %d expiries in %d bytes", e, len(b))
	}
	s.exp, s.nExp = c.bytes(e*expiryLen), int(e)
	nv := c.u64()
	if nv > uint64(len(b))/newerLen {
		return corrupt("entries: %d newer versions in %d bytes", nv, len(b))
	}
	s.newer, s.nNewer = c.bytes(nv*newerLen), int(nv)
	if c.err != nil {
		return c.err
	}
	if len(c.b) != 0 {
		return corrupt("entries: %d trailing bytes", len(c.b))
	}
	return s.validateEntries()
}

// validateEntries checks every field a lookup will trust.
func (s *Snapshot) validateEntries() error {
	var last uint64
	for i := range s.nGen {
		id := le.Uint64(s.gen[i*8:])
		if id < base62.MinID || id > base62.MaxID || (i > 0 && id <= last) {
			return corrupt("entries: generated id %d at %d out of order or range", id, i)
		}
		last = id
	}
	var prev []byte
	for i := range s.nCustom {
		a, b := le.Uint32(s.codeOffs[i*4:]), le.Uint32(s.codeOffs[i*4+4:])
		if (i == 0 && a != 0) || a > b || uint64(b) > uint64(len(s.codeBytes)) {
			return corrupt("entries: custom code offsets out of order")
		}
		code := s.codeBytes[a:b]
		if !link.ValidCodeSyntax(code) || (len(code) == base62.Length && base62.Valid(code)) || (i > 0 && bytes.Compare(prev, code) >= 0) {
			return corrupt("entries: custom code %q invalid or out of order", code)
		}
		prev = code
	}
	flagged, flaggedNewer := 0, 0
	for i := range s.nGen + s.nCustom {
		r := s.records[i*recordLen:]
		origin, off, n, rt, st := le.Uint32(r), le.Uint32(r[4:]), le.Uint16(r[8:]), r[10], r[11]
		typ, status := rt&^expiryFlag, st&^newerFlag
		if uint64(origin) >= uint64(len(s.origins)) || uint64(off)+uint64(n) > uint64(len(s.rest)) ||
			int(typ) >= len(redirectCodes) || status == 0 || int(status) >= len(statusCodes) ||
			(typ == 0 && statusCodes[status] == link.Active) {
			return corrupt("entries: record %d out of range", i)
		}
		if rt&expiryFlag != 0 {
			flagged++
		}
		if st&newerFlag != 0 {
			flaggedNewer++
		}
	}
	if flagged != s.nExp || flaggedNewer != s.nNewer {
		return corrupt("entries: %d/%d records flagged as expiring/newer, %d/%d rows", flagged, flaggedNewer, s.nExp, s.nNewer)
	}
	for i := range s.nNewer {
		idx := le.Uint32(s.newer[i*newerLen:])
		if uint64(idx) >= uint64(s.nGen+s.nCustom) || (i > 0 && idx <= le.Uint32(s.newer[(i-1)*newerLen:])) ||
			s.records[int(idx)*recordLen+11]&newerFlag == 0 || le.Uint64(s.newer[i*newerLen+4:]) <= s.Header.ChangeVersion {
			return corrupt("entries: newer-version row %d invalid", i)
		}
	}
	for i := range s.nExp {
		idx := le.Uint32(s.exp[i*expiryLen:])
		if uint64(idx) >= uint64(s.nGen+s.nCustom) || (i > 0 && idx <= le.Uint32(s.exp[(i-1)*expiryLen:])) ||
			s.records[int(idx)*recordLen+10]&expiryFlag == 0 || le.Uint64(s.exp[i*expiryLen+4:]) == 0 {
			return corrupt("entries: expiry row %d invalid", i)
		}
	}
	return nil
}

// Lookup finds code. It does not allocate.
func (s *Snapshot) Lookup(code []byte) (Entry, bool) {
	i, ok := s.find(code)
	if !ok {
		return Entry{}, false
	}
	return s.entry(i), true
}

// Find returns code's record index, in [0, Len()): a dense number per
// entry that callers may index their own per-entry state by. It does not
// allocate.
func (s *Snapshot) Find(code []byte) (int, bool) { return s.find(code) }

// At returns the entry at record index i, as Find gave it.
func (s *Snapshot) At(i int) Entry { return s.entry(i) }

func (s *Snapshot) find(code []byte) (int, bool) {
	if len(code) == base62.Length && base62.Valid(code) {
		id, _ := base62.Digits(code)
		if s.nGen == 0 || id < s.genMin {
			return 0, false
		}
		bi := (id - s.genMin) / s.genBucket
		if bi+1 >= uint64(len(s.genIndex)) {
			return 0, false
		}
		lo, hi := int(s.genIndex[bi]), int(s.genIndex[bi+1])
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if le.Uint64(s.gen[m*8:]) < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo, lo < int(s.genIndex[bi+1]) && le.Uint64(s.gen[lo*8:]) == id
	}
	lo, hi := 0, s.nCustom
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(s.custom(m), code) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < s.nCustom && bytes.Equal(s.custom(lo), code) {
		return s.nGen + lo, true
	}
	return 0, false
}

func (s *Snapshot) custom(i int) []byte {
	return s.codeBytes[le.Uint32(s.codeOffs[i*4:]):le.Uint32(s.codeOffs[i*4+4:])]
}

func (s *Snapshot) entry(i int) Entry {
	r := s.records[i*recordLen:]
	off, n := le.Uint32(r[4:]), uint32(le.Uint16(r[8:]))
	e := Entry{
		Origin:       s.origins[le.Uint32(r)],
		Rest:         s.rest[off : off+n],
		RedirectType: redirectCodes[r[10]&^expiryFlag],
		Status:       statusCodes[r[11]&^newerFlag],
		Version:      s.Header.ChangeVersion,
	}
	if r[11]&newerFlag != 0 {
		e.Version = le.Uint64(s.newer[rowIndex(s.newer, s.nNewer, newerLen, i)*newerLen+4:])
	}
	if r[10]&expiryFlag != 0 {
		e.ExpiresAt = int64(le.Uint64(s.exp[rowIndex(s.exp, s.nExp, expiryLen, i)*expiryLen+4:]))
	}
	return e
}

// rowIndex finds record i's row in a side table of n rows of rowLen bytes
// keyed by a leading u32 record index. Validation guarantees it is there.
func rowIndex(table []byte, n, rowLen, i int) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(le.Uint32(table[m*rowLen:])) < i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Sealed returns the sealed-segment intervals per namespace.
func (s *Snapshot) Sealed() []Sealed { return s.sealed }

// Bloom returns the bloom section's bytes.
func (s *Snapshot) Bloom() []byte { return s.bloom }

// Len is the number of entries.
func (s *Snapshot) Len() int { return s.nGen + s.nCustom }

// Each calls fn for every entry in code order (generated first) until fn
// returns false. code is only valid during the call.
func (s *Snapshot) Each(fn func(code []byte, e Entry) bool) {
	var buf [base62.Length]byte
	for i := range s.nGen {
		_ = base62.Put(buf[:], le.Uint64(s.gen[i*8:]))
		if !fn(buf[:], s.entry(i)) {
			return
		}
	}
	for i := range s.nCustom {
		if !fn(s.custom(i), s.entry(s.nGen+i)) {
			return
		}
	}
}
