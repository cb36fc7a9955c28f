package snapshot

import (
	"bytes"
	"context"
	"slices"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Format 2 and 3 rows. A row is little-endian words; bit fields from the low end.
//
//	word 0: key 36 | rest length 16 | redirect 3 | status 2 | expiry flag 1 | newer flag 1 | zero 5
//	word 1: rest offset 40 | origin 24
//	word 2: code hash (custom rows only)
//
// A generated row's key is the code's value (base62.Digits: the ID in
// format 2; in format 3 the local ID, or its FF1 image on an FF1 domain);
// a custom row's is its code's offset in the codes section plus one. Key 0
// is an empty row, all zero.
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
	extrasBit     = 1 << 59               // format 4
	spareBits     = 0xf800_0000_0000_0000 // format 3: the 5 bits above the newer flag
	spareBitsV4   = 0xf000_0000_0000_0000 // format 4: the 4 bits above the extras flag
	// An extras row's value is the extras' offset in their section shifted
	// left by extraLenBits, or'ed with their length (at most
	// link.MaxExtrasLen, below 2^extraLenBits).
	extraLenBits = 20
	extraLenMask = 1<<extraLenBits - 1
	offMask      = 1<<40 - 1
	originShift  = 40
	maxOrigins   = 1 << 24
	maxRestBytes = 1 << 40
	statusActive = 1
)

// tables is a format 2 to 4 file's entries: the rows of the generated
// tables (codes keyed by their value) and of the custom tables (keyed by a
// hash of the code), every domain's one after the other, and the bytes
// their rows point into. A format 2 file is one part, domain 0's.
type tables struct {
	gen, custom []byte
	genRows     int
	codes, rest []byte
	exp, newer  []byte
	// extras (format 4): rows of row number and offset<<20|length into
	// extraBytes.
	extras, extraBytes []byte
}

func openV2(data []byte, format uint32) (*Snapshot, error) {
	h, secs, err := preface(data, sectionsOf(format), format)
	if err != nil {
		return nil, err
	}
	// The small sections are checked now: the sealed intervals and the
	// blooms decide misses without the authority, the dictionary and the
	// layout give every lookup its bounds, and the domain table says which
	// hosts the file answers for.
	checked := secs[:sectionLayout]
	if format >= 3 {
		checked = append(slices.Clip(checked), secs[sectionDomains-1])
	}
	for _, sec := range checked {
		if err := checksum(context.Background(), sec); err != nil {
			return nil, err
		}
	}
	s := &Snapshot{Header: h, format: format, bloom: secs[sectionBloom-1].b, unchecked: secs[sectionLayout:sectionNewer]}
	if format >= 4 {
		s.unchecked = append(slices.Clip(s.unchecked), secs[sectionExtras-1:sectionExtraBytes]...)
		s.t.extras, s.t.extraBytes = secs[sectionExtras-1].b, secs[sectionExtraBytes-1].b
	}
	if s.sealed, err = decodeSealed(secs[sectionSealed-1].b); err != nil {
		return nil, err
	}
	if s.origins, err = decodeDict(secs[sectionDict-1].b); err != nil {
		return nil, err
	}
	if len(s.origins) > maxOrigins {
		return nil, corrupt("dictionary: %d origins, at most %d", len(s.origins), maxOrigins)
	}
	t := &s.t
	t.gen, t.custom = secs[sectionGenerated-1].b, secs[sectionCustom-1].b
	t.codes, t.rest = secs[sectionCodes-1].b, secs[sectionRest-1].b
	t.exp, t.newer = secs[sectionExpiry-1].b, secs[sectionNewer-1].b
	if len(t.gen)%genRowLen != 0 || len(t.custom)%customRowLen != 0 || len(t.exp)%sideRowLen != 0 || len(t.newer)%sideRowLen != 0 ||
		len(t.extras)%sideRowLen != 0 {
		return nil, corrupt("layout: a table is not whole rows")
	}
	t.genRows = len(t.gen) / genRowLen
	l := secs[sectionLayout-1].b
	if format == 2 {
		if len(l) != layoutLen {
			return nil, corrupt("layout: %d bytes, want %d", len(l), layoutLen)
		}
		s.parts = []part{{bloom: s.bloom, bloomCount: h.BloomCount}}
		err = s.layoutRow(&s.parts[0], l[:8], l[8:16], nil, l[16:24], l[24:32], nil, 0, 0)
	} else {
		if s.domains, err = decodeDomains(secs[sectionDomains-1].b); err != nil {
			return nil, err
		}
		err = s.layoutV3(l)
	}
	if err != nil {
		return nil, err
	}
	var entries uint64
	for _, p := range s.parts {
		entries += uint64(p.genCount + p.customCount)
	}
	if entries != h.Entries {
		return nil, corrupt("header says %d entries, the tables hold %d", h.Entries, entries)
	}
	s.index()
	return s, nil
}

// layoutV3 reads a format 3 layout: a row per domain of the domain table,
// whose tables and blooms follow each other in that order and fill their
// sections exactly.
func (s *Snapshot) layoutV3(l []byte) error {
	if uint64(len(l)) != uint64(len(s.domains))*layoutRowLen {
		return corrupt("layout: %d bytes for %d domains", len(l), len(s.domains))
	}
	s.parts = make([]part, len(s.domains))
	var genAt, customAt, bloomAt, bloomCount uint64
	for i := range s.parts {
		r := l[i*layoutRowLen : (i+1)*layoutRowLen]
		p := &s.parts[i]
		if d := le.Uint64(r); d != uint64(s.domains[i].ID) {
			return corrupt("layout: row %d is domain %d, the table's is %d", i, d, s.domains[i].ID)
		}
		p.id = s.domains[i].ID
		nb, bc := le.Uint64(r[56:]), le.Uint64(r[64:])
		if nb > uint64(len(s.bloom))-bloomAt {
			return corrupt("layout: domain %d: bloom of %d bytes past its section", p.id, nb)
		}
		p.bloom = s.bloom[bloomAt : bloomAt+nb : bloomAt+nb]
		bloomAt += nb
		if p.bloomCount = bc; bloomCount+bc < bloomCount {
			return corrupt("layout: bloom counts overflow")
		}
		bloomCount += bc
		if err := s.layoutRow(p, r[8:], r[16:], r[24:], r[32:], r[40:], r[48:], genAt, customAt); err != nil {
			return err
		}
		genAt += uint64(len(p.gen) / genRowLen)
		customAt += uint64(len(p.custom) / customRowLen)
	}
	if genAt != uint64(s.t.genRows) || customAt != uint64(len(s.t.custom)/customRowLen) || bloomAt != uint64(len(s.bloom)) {
		return corrupt("layout: the domains' rows and blooms do not fill their sections")
	}
	if bloomCount != s.Header.BloomCount {
		return corrupt("layout: blooms of %d codes, the header says %d", bloomCount, s.Header.BloomCount)
	}
	return nil
}

// layoutRow sets p's tables from a layout row's fields (homes, count and
// rows of each table; rows nil: the whole section, as in format 2), the
// tables starting genAt and customAt rows into their sections.
func (s *Snapshot) layoutRow(p *part, hg, ng, rg, hc, nc, rc []byte, genAt, customAt uint64) error {
	t := &s.t
	genLeft, customLeft := uint64(t.genRows)-genAt, uint64(len(t.custom)/customRowLen)-customAt
	gr, cr := genLeft, customLeft
	if rg != nil {
		gr, cr = le.Uint64(rg), le.Uint64(rc)
	}
	if gr > genLeft || cr > customLeft {
		return corrupt("layout: domain %d: tables past their sections", p.id)
	}
	p.genHomes, p.customHomes = le.Uint64(hg), le.Uint64(hc)
	gc, cc := le.Uint64(ng), le.Uint64(nc)
	if err := checkTable("generated", gc, p.genHomes, gr); err != nil {
		return err
	}
	if err := checkTable("custom", cc, p.customHomes, cr); err != nil {
		return err
	}
	p.gen = t.gen[genAt*genRowLen : (genAt+gr)*genRowLen : (genAt+gr)*genRowLen]
	p.custom = t.custom[customAt*customRowLen : (customAt+cr)*customRowLen : (customAt+cr)*customRowLen]
	p.genBase, p.customBase = int(genAt), t.genRows+int(customAt)
	p.genCount, p.customCount = int(gc), int(cc)
	return nil
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

// findGenerated returns the row of the generated code of value id. Rows
// are sorted by mix(value), so the scan from its home row stops at an
// empty row or at a row whose hash is larger.
func (p *part) findGenerated(id uint64) (int, bool) {
	if id == 0 || p.genHomes == 0 {
		return 0, false
	}
	m := mix(id)
	rows := len(p.gen) / genRowLen
	for r := int(home(m, p.genHomes)); r < rows; r++ {
		k := le.Uint64(p.gen[r*genRowLen:]) & keyMask
		if k == id {
			return p.genBase + r, true
		}
		if k == 0 || mix(k) > m {
			return 0, false
		}
	}
	return 0, false
}

// findCustom returns the row of custom code. Rows are sorted by hash,
// then code.
func (p *part) findCustom(t *tables, code []byte) (int, bool) {
	if p.customHomes == 0 {
		return 0, false
	}
	h := codeHash(code)
	rows := len(p.custom) / customRowLen
	for r := int(home(h, p.customHomes)); r < rows; r++ {
		row := p.custom[r*customRowLen : r*customRowLen+customRowLen]
		k := le.Uint64(row) & keyMask
		if k == 0 {
			return 0, false
		}
		rh := le.Uint64(row[16:])
		if rh == h && bytes.Equal(t.codeAt(k), code) {
			return p.customBase + r, true
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
	if w0&extrasBit != 0 {
		// A link flagged for extras that cannot be found is no answer at
		// all (a miss, which the authority settles), never the link
		// without them: it may be a password's.
		if e.Extras = s.t.extrasOf(i); e.Extras == nil {
			return Entry{}, false
		}
	}
	return e, true
}

// extrasOf is row i's extras, nil when its extras row is missing or points
// outside their section.
func (t *tables) extrasOf(i int) []byte {
	v, ok := sideValueNear(t.extras, i, t.genRows+len(t.custom)/customRowLen)
	if !ok {
		return nil
	}
	b, ok := t.extraAt(v)
	if !ok {
		return nil
	}
	return b
}

// extraAt is the extras an extras row's value points at.
func (t *tables) extraAt(v uint64) ([]byte, bool) {
	off, n := v>>extraLenBits, v&extraLenMask
	if n == 0 || off > uint64(len(t.extraBytes)) || n > uint64(len(t.extraBytes))-off {
		return nil, false
	}
	return t.extraBytes[off : off+n : off+n], true
}

// rowOK reports whether a row's words decode to an entry that reads
// inside the file.
func (s *Snapshot) rowOK(w0, w1 uint64) bool {
	o, off, n := w1>>originShift, w1&offMask, (w0>>lenShift)&0xffff
	rt, st := (w0>>redirectShift)&7, (w0>>statusShift)&3
	return w0&keyMask != 0 && o < uint64(len(s.origins)) && off <= uint64(len(s.t.rest)) && n <= uint64(len(s.t.rest))-off &&
		st != 0 && (st != statusActive || redirectCodes[rt] != 0)
}

// sideValueNear is sideValue for a side table whose rows may be many (the
// extras of every link, say): row numbers spread over the file's slots,
// so row i's entry is near i's share of the table, and a search that
// starts there and widens its step (1, 2, 4, ...) until it brackets i
// reads a few rows where a binary search over a million reads twenty, each
// a cache miss. Whatever the spread, it reads at most twice the binary
// search's rows.
func sideValueNear(table []byte, i, slots int) (uint64, bool) {
	n := len(table) / sideRowLen
	if n == 0 || i < 0 {
		return 0, false
	}
	at := func(j int) uint64 { return le.Uint64(table[j*sideRowLen:]) }
	g := n - 1
	if slots > 0 && i < slots {
		g = int(uint64(i) * uint64(n) / uint64(slots))
	}
	lo, hi := 0, n // the entry, if any, is in [lo, hi)
	if at(g) < uint64(i) {
		lo = g + 1
		for step := 1; ; step *= 2 {
			if next := g + step; next >= n || at(next) >= uint64(i) {
				hi = min(next+1, n)
				break
			} else {
				lo = next + 1
			}
		}
	} else {
		hi = g + 1
		for step := 1; ; step *= 2 {
			if next := g - step; next < 0 || at(next) < uint64(i) {
				lo = max(next+1, 0)
				break
			} else {
				hi = next + 1
			}
		}
	}
	return sideValue(table[lo*sideRowLen:hi*sideRowLen], i)
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

// validateTables checks every row of a format 2 or 3 file: each key is
// where a lookup in its domain's table finds it (sorted by hash, at or
// after its home, no empty row in between), no key twice in a domain,
// every field in range, and the side tables match the flags. A file that
// passes answers exactly what its writer was given.
func (s *Snapshot) validateTables(ctx context.Context) error {
	if s.format < 2 {
		return nil
	}
	t := &s.t
	var exp, newer, extras int
	spare := uint64(spareBits)
	if s.format >= 4 {
		spare = spareBitsV4
	}
	record := func(i int, w0, w1 uint64) error {
		o, off, n := w1>>originShift, w1&offMask, (w0>>lenShift)&0xffff
		rt, st := (w0>>redirectShift)&7, (w0>>statusShift)&3
		if w0&spare != 0 || o >= uint64(len(s.origins)) || off > uint64(len(t.rest)) || n > uint64(len(t.rest))-off ||
			rt >= 5 || st == 0 || (st == statusActive && rt == 0) {
			return corrupt("entries: row %d out of range", i)
		}
		if w0&expiryBit != 0 {
			exp++
		}
		if w0&newerBit != 0 {
			newer++
		}
		if w0&extrasBit != 0 {
			extras++
		}
		return nil
	}
	for pi := range s.parts {
		p := &s.parts[pi]
		var prev uint64
		count, occupied := 0, false
		for i := range len(p.gen) / genRowLen {
			if i%(1<<16) == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			r := p.gen[i*genRowLen:]
			w0, w1 := le.Uint64(r), le.Uint64(r[8:])
			id := w0 & keyMask
			if id == 0 {
				if w0|w1 != 0 {
					return corrupt("entries: generated row %d is empty but not zero", p.genBase+i)
				}
				occupied = false
				continue
			}
			m := mix(id)
			h := home(m, p.genHomes)
			if id > base62.MaxID || (count > 0 && m <= prev) || h > uint64(i) || (h < uint64(i) && !occupied) {
				return corrupt("entries: generated row %d (value %d) out of order or out of reach", p.genBase+i, id)
			}
			if err := record(p.genBase+i, w0, w1); err != nil {
				return err
			}
			prev, occupied = m, true
			count++
		}
		if count != p.genCount {
			return corrupt("entries: domain %d: %d generated rows, the layout says %d", p.id, count, p.genCount)
		}
	}
	for pi := range s.parts {
		p := &s.parts[pi]
		var prev uint64
		var prevCode []byte
		count, occupied := 0, false
		for i := range len(p.custom) / customRowLen {
			if i%(1<<16) == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			r := p.custom[i*customRowLen:]
			w0, w1, hash := le.Uint64(r), le.Uint64(r[8:]), le.Uint64(r[16:])
			k := w0 & keyMask
			if k == 0 {
				if w0|w1|hash != 0 {
					return corrupt("entries: custom row %d is empty but not zero", p.customBase+i)
				}
				occupied = false
				continue
			}
			code := t.codeAt(k)
			h := home(hash, p.customHomes)
			if !link.ValidCodeSyntax(code) || (len(code) == base62.Length && base62.Valid(code)) || codeHash(code) != hash {
				return corrupt("entries: custom row %d: code %q invalid or not its hash", p.customBase+i, code)
			}
			if (count > 0 && (hash < prev || (hash == prev && bytes.Compare(code, prevCode) <= 0))) || h > uint64(i) || (h < uint64(i) && !occupied) {
				return corrupt("entries: custom row %d (%q) out of order or out of reach", p.customBase+i, code)
			}
			if err := record(p.customBase+i, w0, w1); err != nil {
				return err
			}
			prev, prevCode, occupied = hash, code, true
			count++
		}
		if count != p.customCount {
			return corrupt("entries: domain %d: %d custom rows, the layout says %d", p.id, count, p.customCount)
		}
	}
	if err := s.checkSide("expiry", t.exp, expiryBit, exp, func(v uint64) bool { return v != 0 }); err != nil {
		return err
	}
	if err := s.checkSide("newer-version", t.newer, newerBit, newer, func(v uint64) bool { return v > s.Header.ChangeVersion }); err != nil {
		return err
	}
	return s.checkSide("extras", t.extras, extrasBit, extras, func(v uint64) bool {
		b, ok := t.extraAt(v)
		return ok && link.CheckExtras(b) == nil
	})
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
