package snapshot

import (
	"bytes"
	"context"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Format 2 rows. A row is little-endian words; bit fields from the low end.
//
//	word 0: key 36 | rest length 16 | redirect 3 | status 2 | expiry flag 1 | newer flag 1 | zero 5
//	word 1: rest offset 40 | origin 24
//	word 2: code hash (custom rows only)
//
// A generated row's key is the ID; a custom row's is its code's offset in
// the codes section plus one. Key 0 is an empty row, all zero.
const (
	genRowLen     = 16
	customRowLen  = 24
	sideRowLen    = 16 // u64 row index, u64 value
	layoutLen     = 32
	keyMask       = 1<<36 - 1
	lenShift      = 36
	redirectShift = 52
	statusShift   = 55
	expiryBit     = 1 << 57
	newerBit      = 1 << 58
	spareBits     = 0xf800_0000_0000_0000 // the 5 bits above the newer flag
	offMask       = 1<<40 - 1
	originShift   = 40
	maxOrigins    = 1 << 24
	maxRestBytes  = 1 << 40
	statusActive  = 1
)

// tables is a format 2 file's entries: two open-addressing tables, one of
// generated codes keyed by ID and one of custom codes keyed by a hash of
// the code, and the bytes their rows point into.
type tables struct {
	gen, custom           []byte
	genRows               int
	genHomes, customHomes uint64
	genCount, customCount int
	codes, rest           []byte
	exp, newer            []byte
}

func openV2(data []byte) (*Snapshot, error) {
	h, secs, err := preface(data, sectionCount, 2)
	if err != nil {
		return nil, err
	}
	// The small sections are checked now: the sealed intervals and the
	// bloom decide misses without the authority, and the dictionary and
	// the layout give every lookup its bounds.
	for _, sec := range secs[:sectionLayout] {
		if err := checksum(context.Background(), sec); err != nil {
			return nil, err
		}
	}
	s := &Snapshot{Header: h, format: 2, bloom: secs[sectionBloom-1].b, unchecked: secs[sectionLayout:]}
	if s.sealed, err = decodeSealed(secs[sectionSealed-1].b); err != nil {
		return nil, err
	}
	if s.origins, err = decodeDict(secs[sectionDict-1].b); err != nil {
		return nil, err
	}
	if len(s.origins) > maxOrigins {
		return nil, corrupt("dictionary: %d origins, at most %d", len(s.origins), maxOrigins)
	}
	l := secs[sectionLayout-1].b
	if len(l) != layoutLen {
		return nil, corrupt("layout: %d bytes, want %d", len(l), layoutLen)
	}
	t := &s.t
	t.genHomes, t.customHomes = le.Uint64(l), le.Uint64(l[16:])
	gc, cc := le.Uint64(l[8:]), le.Uint64(l[24:])
	t.gen, t.custom = secs[sectionGenerated-1].b, secs[sectionCustom-1].b
	t.codes, t.rest = secs[sectionCodes-1].b, secs[sectionRest-1].b
	t.exp, t.newer = secs[sectionExpiry-1].b, secs[sectionNewer-1].b
	if len(t.gen)%genRowLen != 0 || len(t.custom)%customRowLen != 0 || len(t.exp)%sideRowLen != 0 || len(t.newer)%sideRowLen != 0 {
		return nil, corrupt("layout: a table is not whole rows")
	}
	if err := checkTable("generated", gc, t.genHomes, uint64(len(t.gen)/genRowLen)); err != nil {
		return nil, err
	}
	if err := checkTable("custom", cc, t.customHomes, uint64(len(t.custom)/customRowLen)); err != nil {
		return nil, err
	}
	if gc+cc != h.Entries {
		return nil, corrupt("header says %d entries, the tables hold %d", h.Entries, gc+cc)
	}
	t.genRows, t.genCount, t.customCount = len(t.gen)/genRowLen, int(gc), int(cc)
	return s, nil
}

// checkTable checks a table's counts against its size: n keys in homes
// home rows (a load factor of at most 1) and rows rows, of which at most n
// lie past the homes (a key is placed at its home or after the key before).
func checkTable(name string, n, homes, rows uint64) error {
	if (n == 0 && (homes != 0 || rows != 0)) || n > homes || homes > rows || rows-homes > n {
		return corrupt("layout: %s table of %d keys, %d homes, %d rows", name, n, homes, rows)
	}
	return nil
}

// findGenerated returns the row of ID id. Rows are sorted by mix(ID), so
// the scan from the ID's home row stops at an empty row or at a row whose
// hash is larger.
func (t *tables) findGenerated(id uint64) (int, bool) {
	if id == 0 || t.genHomes == 0 {
		return 0, false
	}
	m := mix(id)
	for p := int(home(m, t.genHomes)); p < t.genRows; p++ {
		k := le.Uint64(t.gen[p*genRowLen:]) & keyMask
		if k == id {
			return p, true
		}
		if k == 0 || mix(k) > m {
			return 0, false
		}
	}
	return 0, false
}

// findCustom returns the index of custom code's row (after the generated
// rows). Rows are sorted by hash, then code.
func (t *tables) findCustom(code []byte) (int, bool) {
	if t.customHomes == 0 {
		return 0, false
	}
	h := codeHash(code)
	rows := len(t.custom) / customRowLen
	for p := int(home(h, t.customHomes)); p < rows; p++ {
		r := t.custom[p*customRowLen : p*customRowLen+customRowLen]
		k := le.Uint64(r) & keyMask
		if k == 0 {
			return 0, false
		}
		rh := le.Uint64(r[16:])
		if rh == h && bytes.Equal(t.codeAt(k), code) {
			return t.genRows + p, true
		}
		if rh > h {
			return 0, false
		}
	}
	return 0, false
}

// codeAt is the custom code of key k (a length byte and the code at
// offset k-1), or nil when the bytes are not there.
func (t *tables) codeAt(k uint64) []byte {
	off := k - 1
	if k == 0 || off >= uint64(len(t.codes)) {
		return nil
	}
	n := uint64(t.codes[off])
	if n > uint64(len(t.codes))-off-1 {
		return nil
	}
	return t.codes[off+1 : off+1+n : off+1+n]
}

// row returns the words of row i (custom rows after the generated ones).
func (t *tables) row(i int) (w0, w1 uint64, ok bool) {
	if i < 0 {
		return 0, 0, false
	}
	if i < t.genRows {
		r := t.gen[i*genRowLen : i*genRowLen+genRowLen]
		return le.Uint64(r), le.Uint64(r[8:]), true
	}
	i -= t.genRows
	if i >= len(t.custom)/customRowLen {
		return 0, 0, false
	}
	r := t.custom[i*customRowLen : i*customRowLen+customRowLen]
	return le.Uint64(r), le.Uint64(r[8:]), true
}

// entryV2 decodes row i. It reports false for an empty row and for one
// whose fields are out of range, which only an unverified file can hold.
func (s *Snapshot) entryV2(i int) (Entry, bool) { return s.decodeV2(i, true) }

// decodeV2 is entryV2; with warm it also prefetches the target's bytes
// (BenchmarkHit compares the two).
func (s *Snapshot) decodeV2(i int, warm bool) (Entry, bool) {
	w0, w1, ok := s.t.row(i)
	if !ok || !s.rowOK(w0, w1) {
		return Entry{}, false
	}
	o, off, n := w1>>originShift, w1&offMask, (w0>>lenShift)&0xffff
	rest := s.t.rest
	if warm && n > 0 {
		// The target is the second miss of a hit in a large file (the
		// row was the first), and nothing reads it before the caller
		// has written its headers: start it now.
		prefetch(&rest[off])
		if off%64+n > 64 {
			prefetch(&rest[off+n-1]) // it ends in the next line
		}
	}
	rt, st := (w0>>redirectShift)&7, (w0>>statusShift)&3
	e := Entry{
		Origin:       s.origins[o],
		Rest:         rest[off : off+n : off+n],
		RedirectType: redirectCodes[rt],
		Status:       statusCodes[st],
		Version:      s.Header.ChangeVersion,
		snap:         s,
	}
	if w0&newerBit != 0 {
		if v, ok := sideValue(s.t.newer, i); ok {
			e.Version = v
		}
	}
	if w0&expiryBit != 0 {
		if v, ok := sideValue(s.t.exp, i); ok {
			e.ExpiresAt = int64(v)
		}
	}
	return e, true
}

// rowOK reports whether a row's words decode to an entry that reads
// inside the file.
func (s *Snapshot) rowOK(w0, w1 uint64) bool {
	o, off, n := w1>>originShift, w1&offMask, (w0>>lenShift)&0xffff
	rt, st := (w0>>redirectShift)&7, (w0>>statusShift)&3
	return w0&keyMask != 0 && o < uint64(len(s.origins)) && off <= uint64(len(s.t.rest)) && n <= uint64(len(s.t.rest))-off &&
		st != 0 && (st != statusActive || redirectCodes[rt] != 0)
}

// sideValue finds row i's value in a side table sorted by row index.
func sideValue(table []byte, i int) (uint64, bool) {
	lo, hi := 0, len(table)/sideRowLen
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if le.Uint64(table[m*sideRowLen:]) < uint64(i) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(table)/sideRowLen && le.Uint64(table[lo*sideRowLen:]) == uint64(i) {
		return le.Uint64(table[lo*sideRowLen+8:]), true
	}
	return 0, false
}

// validateTables checks every row of a format 2 file: each key is where a
// lookup finds it (sorted by hash, at or after its home, no empty row in
// between), no key twice, every field in range, and the side tables match
// the flags. A file that passes answers exactly what its writer was given.
func (s *Snapshot) validateTables(ctx context.Context) error {
	if s.format != 2 {
		return nil
	}
	t := &s.t
	var exp, newer int
	record := func(i int, w0, w1 uint64) error {
		o, off, n := w1>>originShift, w1&offMask, (w0>>lenShift)&0xffff
		rt, st := (w0>>redirectShift)&7, (w0>>statusShift)&3
		if w0&spareBits != 0 || o >= uint64(len(s.origins)) || off > uint64(len(t.rest)) || n > uint64(len(t.rest))-off ||
			rt >= 5 || st == 0 || (st == statusActive && rt == 0) {
			return corrupt("entries: row %d out of range", i)
		}
		if w0&expiryBit != 0 {
			exp++
		}
		if w0&newerBit != 0 {
			newer++
		}
		return nil
	}
	var prev uint64
	count, occupied := 0, false
	for i := range t.genRows {
		if i%(1<<16) == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		r := t.gen[i*genRowLen:]
		w0, w1 := le.Uint64(r), le.Uint64(r[8:])
		id := w0 & keyMask
		if id == 0 {
			if w0|w1 != 0 {
				return corrupt("entries: generated row %d is empty but not zero", i)
			}
			occupied = false
			continue
		}
		m := mix(id)
		h := home(m, t.genHomes)
		if id > base62.MaxID || (count > 0 && m <= prev) || h > uint64(i) || (h < uint64(i) && !occupied) {
			return corrupt("entries: generated row %d (id %d) out of order or out of reach", i, id)
		}
		if err := record(i, w0, w1); err != nil {
			return err
		}
		prev, occupied = m, true
		count++
	}
	if count != t.genCount {
		return corrupt("entries: %d generated rows, the layout says %d", count, t.genCount)
	}
	var prevCode []byte
	count, occupied = 0, false
	for i := range len(t.custom) / customRowLen {
		if i%(1<<16) == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		r := t.custom[i*customRowLen:]
		w0, w1, hash := le.Uint64(r), le.Uint64(r[8:]), le.Uint64(r[16:])
		k := w0 & keyMask
		if k == 0 {
			if w0|w1|hash != 0 {
				return corrupt("entries: custom row %d is empty but not zero", i)
			}
			occupied = false
			continue
		}
		code := t.codeAt(k)
		h := home(hash, t.customHomes)
		if !link.ValidCodeSyntax(code) || (len(code) == base62.Length && base62.Valid(code)) || codeHash(code) != hash {
			return corrupt("entries: custom row %d: code %q invalid or not its hash", i, code)
		}
		if (count > 0 && (hash < prev || (hash == prev && bytes.Compare(code, prevCode) <= 0))) || h > uint64(i) || (h < uint64(i) && !occupied) {
			return corrupt("entries: custom row %d (%q) out of order or out of reach", i, code)
		}
		if err := record(t.genRows+i, w0, w1); err != nil {
			return err
		}
		prev, prevCode, occupied = hash, code, true
		count++
	}
	if count != t.customCount {
		return corrupt("entries: %d custom rows, the layout says %d", count, t.customCount)
	}
	if err := s.checkSide("expiry", t.exp, expiryBit, exp, func(v uint64) bool { return v != 0 }); err != nil {
		return err
	}
	return s.checkSide("newer-version", t.newer, newerBit, newer, func(v uint64) bool { return v > s.Header.ChangeVersion })
}

// checkSide checks that a side table has one row, in row order, for each
// of the flagged rows.
func (s *Snapshot) checkSide(name string, table []byte, flag uint64, flagged int, valid func(uint64) bool) error {
	n := len(table) / sideRowLen
	if n != flagged {
		return corrupt("entries: %d rows flagged, %d %s rows", flagged, n, name)
	}
	var last uint64
	for j := range n {
		i, v := le.Uint64(table[j*sideRowLen:]), le.Uint64(table[j*sideRowLen+8:])
		if (j > 0 && i <= last) || i >= uint64(s.Slots()) {
			return corrupt("entries: %s row %d out of order", name, j)
		}
		w0, _, _ := s.t.row(int(i))
		if w0&keyMask == 0 || w0&flag == 0 || !valid(v) {
			return corrupt("entries: %s row %d invalid", name, j)
		}
		last = i
	}
	return nil
}
