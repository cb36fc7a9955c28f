package snapshot

import (
	"bytes"
	"context"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Format 1, as control wrote it before format 2: sorted IDs with a record
// array, verified completely when opened (its entry counts live inside the
// entries section, so nothing of it is safe to read before its checksum).
// FORMAT.md describes it under "Format 1".
const (
	v1Sections   = 4
	v1RecordLen  = 12
	v1ExpiryLen  = 12
	v1NewerLen   = 12
	v1ExpiryFlag = 0x80 // in a record's redirect byte: it has an expiry row
	v1NewerFlag  = 0x80 // in a record's status byte: it has a newer-version row
	idsPerBucket = 8    // the index's target bucket size: about half a byte of index per link
)

// legacy is a format 1 file's entries.
type legacy struct {
	gen  []byte // G × u64 IDs
	nGen int
	// genIndex narrows a generated-code search to one bucket of the file's
	// ID span.
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

func openV1(data []byte) (*Snapshot, error) {
	h, secs, err := preface(data, v1Sections, 1)
	if err != nil {
		return nil, err
	}
	for _, sec := range secs {
		if err := checksum(context.Background(), sec); err != nil {
			return nil, err
		}
	}
	s := &Snapshot{Header: h, format: 1, bloom: secs[1].b}
	if s.sealed, err = decodeSealed(secs[0].b); err != nil {
		return nil, err
	}
	if s.origins, err = decodeDict(secs[2].b); err != nil {
		return nil, err
	}
	if err := s.v1.decode(secs[3].b, len(s.origins), h.ChangeVersion); err != nil {
		return nil, err
	}
	if h.Entries != uint64(s.v1.nGen+s.v1.nCustom) {
		return nil, corrupt("header says %d entries, file has %d", h.Entries, s.v1.nGen+s.v1.nCustom)
	}
	s.v1.buildIndex()
	s.verified.Store(true)
	return s, nil
}

func (v *legacy) buildIndex() {
	if v.nGen == 0 {
		return
	}
	lo, hi := le.Uint64(v.gen), le.Uint64(v.gen[(v.nGen-1)*8:])
	buckets := uint64(v.nGen/idsPerBucket + 1)
	v.genMin = lo
	v.genBucket = (hi-lo)/buckets + 1 // span of one bucket, so (hi-lo)/genBucket < buckets
	v.genIndex = make([]uint32, buckets+1)
	b := uint64(0)
	for i := range v.nGen {
		for bi := (le.Uint64(v.gen[i*8:]) - lo) / v.genBucket; b <= bi; b++ {
			v.genIndex[b] = uint32(i)
		}
	}
	for ; b <= buckets; b++ {
		v.genIndex[b] = uint32(v.nGen)
	}
}

func (v *legacy) decode(b []byte, origins int, changeVersion uint64) error {
	c := cursor{b: b}
	g := c.u64()
	if g > uint64(len(b))/8 {
		return corrupt("entries: %d generated codes in %d bytes", g, len(b))
	}
	v.gen, v.nGen = c.bytes(g*8), int(g)
	cn := c.u64()
	if cn > uint64(len(b))/4 {
		return corrupt("entries: %d custom codes in %d bytes", cn, len(b))
	}
	v.codeOffs, v.nCustom = c.bytes((cn+1)*4), int(cn)
	if c.err != nil {
		return c.err
	}
	v.codeBytes = c.bytes(uint64(le.Uint32(v.codeOffs[cn*4:])))
	c.align4(len(b))
	total := g + cn
	if total > uint64(len(b))/v1RecordLen {
		return corrupt("entries: %d records in %d bytes", total, len(b))
	}
	v.records = c.bytes(total * v1RecordLen)
	v.rest = c.bytes(c.u64())
	c.align4(len(b))
	e := c.u64()
	if e > uint64(len(b))/v1ExpiryLen {
		return corrupt("entries: %d expiries in %d bytes", e, len(b))
	}
	v.exp, v.nExp = c.bytes(e*v1ExpiryLen), int(e)
	nv := c.u64()
	if nv > uint64(len(b))/v1NewerLen {
		return corrupt("entries: %d newer versions in %d bytes", nv, len(b))
	}
	v.newer, v.nNewer = c.bytes(nv*v1NewerLen), int(nv)
	if c.err != nil {
		return c.err
	}
	if len(c.b) != 0 {
		return corrupt("entries: %d trailing bytes", len(c.b))
	}
	return v.validate(origins, changeVersion)
}

// validate checks every field a lookup will trust.
func (v *legacy) validate(origins int, changeVersion uint64) error {
	var last uint64
	for i := range v.nGen {
		id := le.Uint64(v.gen[i*8:])
		if id < base62.MinID || id > base62.MaxID || (i > 0 && id <= last) {
			return corrupt("entries: generated id %d at %d out of order or range", id, i)
		}
		last = id
	}
	var prev []byte
	for i := range v.nCustom {
		a, b := le.Uint32(v.codeOffs[i*4:]), le.Uint32(v.codeOffs[i*4+4:])
		if (i == 0 && a != 0) || a > b || uint64(b) > uint64(len(v.codeBytes)) {
			return corrupt("entries: custom code offsets out of order")
		}
		code := v.codeBytes[a:b]
		if !link.ValidCodeSyntax(code) || (len(code) == base62.Length && base62.Valid(code)) || (i > 0 && bytes.Compare(prev, code) >= 0) {
			return corrupt("entries: custom code %q invalid or out of order", code)
		}
		prev = code
	}
	flagged, flaggedNewer := 0, 0
	for i := range v.nGen + v.nCustom {
		r := v.records[i*v1RecordLen:]
		origin, off, n, rt, st := le.Uint32(r), le.Uint32(r[4:]), le.Uint16(r[8:]), r[10], r[11]
		typ, status := rt&^v1ExpiryFlag, st&^v1NewerFlag
		if uint64(origin) >= uint64(origins) || uint64(off)+uint64(n) > uint64(len(v.rest)) ||
			typ > 4 || status == 0 || int(status) >= len(statusCodes) || (typ == 0 && status == statusActive) {
			return corrupt("entries: record %d out of range", i)
		}
		if rt&v1ExpiryFlag != 0 {
			flagged++
		}
		if st&v1NewerFlag != 0 {
			flaggedNewer++
		}
	}
	if flagged != v.nExp || flaggedNewer != v.nNewer {
		return corrupt("entries: %d/%d records flagged as expiring/newer, %d/%d rows", flagged, flaggedNewer, v.nExp, v.nNewer)
	}
	for i := range v.nNewer {
		idx := le.Uint32(v.newer[i*v1NewerLen:])
		if uint64(idx) >= uint64(v.nGen+v.nCustom) || (i > 0 && idx <= le.Uint32(v.newer[(i-1)*v1NewerLen:])) ||
			v.records[int(idx)*v1RecordLen+11]&v1NewerFlag == 0 || le.Uint64(v.newer[i*v1NewerLen+4:]) <= changeVersion {
			return corrupt("entries: newer-version row %d invalid", i)
		}
	}
	for i := range v.nExp {
		idx := le.Uint32(v.exp[i*v1ExpiryLen:])
		if uint64(idx) >= uint64(v.nGen+v.nCustom) || (i > 0 && idx <= le.Uint32(v.exp[(i-1)*v1ExpiryLen:])) ||
			v.records[int(idx)*v1RecordLen+10]&v1ExpiryFlag == 0 || le.Uint64(v.exp[i*v1ExpiryLen+4:]) == 0 {
			return corrupt("entries: expiry row %d invalid", i)
		}
	}
	return nil
}

func (v *legacy) find(code []byte) (int, bool) {
	if len(code) == base62.Length && base62.Valid(code) {
		id, _ := base62.Digits(code)
		if v.nGen == 0 || id < v.genMin {
			return 0, false
		}
		bi := (id - v.genMin) / v.genBucket
		if bi+1 >= uint64(len(v.genIndex)) {
			return 0, false
		}
		lo, hi := int(v.genIndex[bi]), int(v.genIndex[bi+1])
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if le.Uint64(v.gen[m*8:]) < id {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo, lo < int(v.genIndex[bi+1]) && le.Uint64(v.gen[lo*8:]) == id
	}
	lo, hi := 0, v.nCustom
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(v.custom(m), code) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < v.nCustom && bytes.Equal(v.custom(lo), code) {
		return v.nGen + lo, true
	}
	return 0, false
}

func (v *legacy) custom(i int) []byte {
	return v.codeBytes[le.Uint32(v.codeOffs[i*4:]):le.Uint32(v.codeOffs[i*4+4:])]
}

func (v *legacy) entry(s *Snapshot, i int) Entry {
	r := v.records[i*v1RecordLen:]
	off, n := le.Uint32(r[4:]), uint32(le.Uint16(r[8:]))
	e := Entry{
		Origin:       s.origins[le.Uint32(r)],
		Rest:         v.rest[off : off+n],
		RedirectType: redirectCodes[r[10]&^v1ExpiryFlag],
		Status:       statusCodes[r[11]&^v1NewerFlag],
		Version:      s.Header.ChangeVersion,
		snap:         s,
	}
	if r[11]&v1NewerFlag != 0 {
		e.Version = le.Uint64(v.newer[v1RowIndex(v.newer, v.nNewer, v1NewerLen, i)*v1NewerLen+4:])
	}
	if r[10]&v1ExpiryFlag != 0 {
		e.ExpiresAt = int64(le.Uint64(v.exp[v1RowIndex(v.exp, v.nExp, v1ExpiryLen, i)*v1ExpiryLen+4:]))
	}
	return e
}

// v1RowIndex finds record i's row in a side table of n rows of rowLen bytes
// keyed by a leading u32 record index. Validation guarantees it is there.
func v1RowIndex(table []byte, n, rowLen, i int) int {
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

func (v *legacy) each(s *Snapshot, fn func(code []byte, e Entry) bool) {
	var buf [base62.Length]byte
	for i := range v.nGen {
		_ = base62.Put(buf[:], le.Uint64(v.gen[i*8:]))
		if !fn(buf[:], v.entry(s, i)) {
			return
		}
	}
	for i := range v.nCustom {
		if !fn(v.custom(i), v.entry(s, v.nGen+i)) {
			return
		}
	}
}
