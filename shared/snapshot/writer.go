package snapshot

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Writer collects links and writes them as a snapshot: format 4 when a
// link has extras, else format 3. Add in any order; Write lays each
// domain's tables out. It holds about 24 bytes per generated link (32 per
// custom one) plus the targets' bytes without their origins (and a link's
// extras with 16 bytes more, for the links that have them), and writes
// without building the file in memory. Not safe for concurrent use.
type Writer struct {
	domains    map[link.DomainID]*domainLinks
	last       *domainLinks // the domain Add was last given, looked up once per run
	codes      arena        // custom codes, each a length byte and the code
	rest       arena        // target remainders
	origins    map[string]uint32
	originList []string
	// versions is by add index, allocated once a link has one; expiries
	// are the links with one, in add order.
	versions []uint64
	expiries []expiry
	// extras are the links' extras (format 4), in add order, their bytes
	// in extraBytes.
	extras     []extraRef
	extraBytes arena
	n          uint32
}

type extraRef struct {
	idx  uint32
	n    uint32
	addr uint64 // in extraBytes
}

// domainLinks are one domain's links as added.
type domainLinks struct {
	id     link.DomainID
	gen    []genLink
	custom []customLink
}

type genLink struct {
	m    uint64 // mix(code value): the sort key, and the value by unmix
	rec  uint64 // rest address | origin << originShift
	meta uint32 // rest length | redirect << 16 | status << 19 | has expiry << 21
	idx  uint32 // add index
}

type customLink struct {
	hash uint64
	code uint64 // address of the length byte and the code
	rec  uint64
	meta uint32
	idx  uint32
}

type expiry struct {
	idx uint32
	at  int64
}

const (
	metaExpiry = 1 << 21
	metaExtras = 1 << 22
)

func (w *Writer) domain(d link.DomainID) *domainLinks {
	if w.last != nil && w.last.id == d {
		return w.last
	}
	if w.domains == nil {
		w.domains = map[link.DomainID]*domainLinks{}
	}
	dl := w.domains[d]
	if dl == nil {
		dl = &domainLinks{id: d}
		w.domains[d] = dl
	}
	w.last = dl
	return dl
}

// Grow makes room for n more generated links of the platform's domain
// (link.DefaultDomain) without growing again.
func (w *Writer) Grow(n int) {
	dl := w.domain(link.DefaultDomain)
	dl.gen = slices.Grow(dl.gen, n)
}

// Add queues one link, on the domain l.Domain names. It refuses an invalid
// domain number, code, status, redirect type or target with an error and
// then holds nothing of the link. Codes must be unique per domain; Write
// reports duplicates and links of domains its table lacks.
func (w *Writer) Add(l Link) error {
	if l.Domain > link.MaxDomainID {
		return fmt.Errorf("snapshot: code %q: domain %d above %d", l.Code, l.Domain, link.MaxDomainID)
	}
	if !link.ValidCodeSyntax(l.Code) {
		return fmt.Errorf("snapshot: invalid code %q", l.Code)
	}
	st := statusByte(l.Status)
	if st == 0 {
		return fmt.Errorf("snapshot: code %q: invalid status %q", l.Code, l.Status)
	}
	rt := redirectByte(l.RedirectType)
	if l.Status == link.Active && rt == 0 {
		return fmt.Errorf("snapshot: code %q: invalid redirect type %d", l.Code, l.RedirectType)
	}
	generated := len(l.Code) == base62.Length && base62.Valid(l.Code)
	var id uint64
	if generated {
		id, _ = base62.Digits(l.Code)
	}
	if w.n == math.MaxUint32 {
		return fmt.Errorf("snapshot: more than %d links", uint32(math.MaxUint32))
	}
	origin, rest := SplitOrigin(l.URL)
	oi, known := w.origins[origin]
	if !known && len(w.originList) >= maxOrigins-1 {
		// The dictionary is full: this target is stored whole.
		origin, rest = "", l.URL
		oi, known = w.origins[origin]
	}
	if len(rest) > math.MaxUint16 {
		return fmt.Errorf("snapshot: code %q: target longer than %d bytes", l.Code, math.MaxUint16)
	}
	if !w.rest.fits(len(rest), restChunks) {
		return fmt.Errorf("snapshot: targets exceed %d bytes", uint64(maxRestBytes))
	}
	if !generated && !w.codes.fits(1+len(l.Code), codeChunks) {
		return fmt.Errorf("snapshot: custom codes exceed %d bytes", uint64(codeChunks)<<chunkBits)
	}
	if len(l.Extras) > 0 {
		// Errors name no value: the extras hold targets and a hash.
		if err := link.CheckExtras(l.Extras); err != nil {
			return fmt.Errorf("snapshot: code %q: %w", l.Code, err)
		}
		if !w.extraBytes.fits(len(l.Extras), extraChunks) {
			return fmt.Errorf("snapshot: extras exceed %d bytes", uint64(extraChunks)<<chunkBits)
		}
	}
	if !known {
		if w.origins == nil {
			w.origins = map[string]uint32{}
		}
		oi = uint32(len(w.originList))
		w.origins[origin] = oi
		w.originList = append(w.originList, origin)
	}
	rec := w.rest.add(rest) | uint64(oi)<<originShift
	meta := uint32(len(rest)) | uint32(rt)<<16 | uint32(st)<<19
	idx := w.n
	if l.ExpiresAt != 0 {
		meta |= metaExpiry
		w.expiries = append(w.expiries, expiry{idx, l.ExpiresAt})
	}
	if len(l.Extras) > 0 {
		meta |= metaExtras
		w.extras = append(w.extras, extraRef{idx: idx, n: uint32(len(l.Extras)), addr: w.extraBytes.add(string(l.Extras))})
	}
	if l.Version != 0 && w.versions == nil {
		w.versions = make([]uint64, idx, idx+1)
	}
	if w.versions != nil {
		w.versions = append(w.versions, l.Version)
	}
	dl := w.domain(l.Domain)
	if generated {
		dl.gen = append(dl.gen, genLink{m: mix(id), rec: rec, meta: meta, idx: idx})
	} else {
		code := w.codes.add(string([]byte{byte(len(l.Code))}) + l.Code)
		dl.custom = append(dl.custom, customLink{hash: codeHash(l.Code), code: code, rec: rec, meta: meta, idx: idx})
	}
	w.n++
	return nil
}

// Len is the number of links added.
func (w *Writer) Len() int { return int(w.n) }

// Blooms gives Write each domain's bloom: the bytes of a
// bits-and-blooms/bloom/v3 filter (WriteTo) over every code of the domain,
// and how many codes it was built from. nil bytes: the domain has none.
type Blooms func(d link.DomainID) (filter []byte, codes uint64)

// Write writes the snapshot to out: domains is the domain table (every
// domain the edges are to know, removed ones too; it must hold
// link.DefaultDomain, and every domain a link was added on), blooms each
// one's bloom (nil: none). h.Entries and h.BloomCount are set from the
// links and the blooms. It refuses an invalid domain table, a link of a
// domain not in it and a code twice on one domain, and may be called
// again, with the same result for the same arguments.
func (w *Writer) Write(out io.Writer, h Header, sealed []Sealed, domains []link.Domain, blooms Blooms) error {
	table, err := sortedDomains(domains)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	parts := make([]*domainLinks, len(table))
	known := 0
	for i, d := range table {
		parts[i] = w.domains[d.ID]
		if parts[i] == nil {
			parts[i] = &domainLinks{id: d.ID}
		} else {
			known++
		}
	}
	if known != len(w.domains) {
		for id, dl := range w.domains {
			if _, found := slices.BinarySearchFunc(table, id, func(d link.Domain, id link.DomainID) int { return cmp.Compare(d.ID, id) }); !found && len(dl.gen)+len(dl.custom) > 0 {
				return fmt.Errorf("snapshot: links of domain %d, which the domain table lacks", id)
			}
		}
	}
	for _, dl := range parts {
		if err := w.sortDomain(dl); err != nil {
			return err
		}
	}
	h.Entries = uint64(w.n)
	w.rest.index()
	w.codes.index()
	w.extraBytes.index()
	format, nsec := uint32(3), sectionCount
	if len(w.extras) > 0 {
		format, nsec = 4, sectionCountV4
	}

	sealedSec, err := encodeSealed(sealed)
	if err != nil {
		return err
	}
	var dict []byte
	dict = binary.AppendUvarint(dict, uint64(len(w.originList)))
	for _, o := range w.originList {
		dict = binary.AppendUvarint(dict, uint64(len(o)))
		dict = append(dict, o...)
	}
	bloomParts := make([][]byte, len(table))
	h.BloomCount = 0
	var layout []byte
	p := w.place(parts, h.ChangeVersion)
	for i, d := range table {
		var n uint64
		if blooms != nil {
			bloomParts[i], n = blooms(d.ID)
		}
		h.BloomCount += n
		g, c := &p.parts[i], parts[i]
		for _, v := range []uint64{uint64(d.ID), g.genHomes, uint64(len(c.gen)), uint64(g.genRows),
			g.customHomes, uint64(len(c.custom)), uint64(g.customRows), uint64(len(bloomParts[i])), n} {
			layout = le.AppendUint64(layout, v)
		}
	}
	domainSec, err := json.Marshal(table)
	if err != nil {
		return fmt.Errorf("snapshot: domain table: %w", err)
	}

	inMemory := func(b []byte) func(io.Writer) error {
		return func(out io.Writer) error { _, err := out.Write(b); return err }
	}
	sections := []func(io.Writer) error{
		inMemory(sealedSec),
		func(out io.Writer) error {
			for _, b := range bloomParts {
				if _, err := out.Write(b); err != nil {
					return err
				}
			}
			return nil
		},
		inMemory(dict), inMemory(layout),
		func(out io.Writer) error { return w.writeGenerated(out, parts, p) },
		func(out io.Writer) error { return w.writeCustom(out, parts, p) },
		w.codes.writeTo, w.rest.writeTo,
		inMemory(p.expiries), inMemory(p.newer), inMemory(domainSec),
		inMemory(p.extras), w.extraBytes.writeTo,
	}
	sections = sections[:nsec]
	// Two passes over the sections: checksums and lengths first, since
	// the header that holds them comes first, then the bytes.
	pre := make([]byte, prefaceLen(nsec))
	copy(pre, magic)
	le.PutUint32(pre[8:], format)
	le.PutUint32(pre[12:], h.Flags)
	le.PutUint64(pre[16:], h.ChangeVersion)
	le.PutUint64(pre[24:], h.StreamSeq)
	le.PutUint64(pre[32:], uint64(h.CreatedMillis))
	le.PutUint64(pre[40:], h.Entries)
	le.PutUint64(pre[48:], h.BloomCount)
	le.PutUint32(pre[56:], uint32(nsec))
	off := uint64(len(pre))
	for i, emit := range sections {
		c := &crcCounter{}
		bw := bufio.NewWriterSize(c, 1<<16)
		if err := emit(bw); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		off = align(off, format)
		row := pre[headerLen+i*tableRowLen:]
		le.PutUint32(row[0:], uint32(i+1))
		le.PutUint32(row[4:], c.sum)
		le.PutUint64(row[8:], off)
		le.PutUint64(row[16:], c.n)
		off += c.n
	}
	crcAt := headerLen + nsec*tableRowLen
	le.PutUint32(pre[crcAt:], crc32.Checksum(pre[:crcAt], castagnoli))

	bw := bufio.NewWriterSize(out, 1<<20)
	if _, err := bw.Write(pre); err != nil {
		return err
	}
	at := uint64(len(pre))
	var pad [sectionAlign]byte
	for i, emit := range sections {
		row := pre[headerLen+i*tableRowLen:]
		start, n := le.Uint64(row[8:]), le.Uint64(row[16:])
		if _, err := bw.Write(pad[:start-at]); err != nil {
			return err
		}
		if err := emit(bw); err != nil {
			return err
		}
		at = start + n
	}
	return bw.Flush()
}

// sortDomain sorts a domain's links into table order and refuses a code
// twice.
func (w *Writer) sortDomain(dl *domainLinks) error {
	slices.SortFunc(dl.gen, func(a, b genLink) int { return cmp.Compare(a.m, b.m) })
	for i := 1; i < len(dl.gen); i++ {
		if dl.gen[i].m == dl.gen[i-1].m {
			var code [base62.Length]byte
			_ = base62.Put(code[:], unmix(dl.gen[i].m))
			return fmt.Errorf("snapshot: duplicate code %q on domain %d", code[:], dl.id)
		}
	}
	slices.SortFunc(dl.custom, func(a, b customLink) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return bytes.Compare(w.codes.at(a.code), w.codes.at(b.code))
	})
	for i := 1; i < len(dl.custom); i++ {
		a, b := &dl.custom[i-1], &dl.custom[i]
		if a.hash == b.hash && bytes.Equal(w.codes.at(a.code), w.codes.at(b.code)) {
			return fmt.Errorf("snapshot: duplicate code %q on domain %d", w.codes.at(b.code)[1:], dl.id)
		}
	}
	return nil
}

// crcCounter is a writer that only checksums and counts.
type crcCounter struct {
	sum uint32
	n   uint64
}

func (c *crcCounter) Write(b []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, b)
	c.n += uint64(len(b))
	return len(b), nil
}

// placement is where Write puts the sorted links: in each domain's
// tables, each at its home row or right after the link before it,
// whichever is later (linear probing with the rows in hash order), and the
// side tables that follow from it. Rows are numbered across the file: all
// domains' generated rows, then all their custom rows.
type placement struct {
	changeVersion           uint64
	parts                   []partPlacement
	expiries, newer, extras []byte
}

type partPlacement struct {
	genHomes, customHomes uint64
	genRows, customRows   int
}

func (w *Writer) place(parts []*domainLinks, changeVersion uint64) placement {
	p := placement{changeVersion: changeVersion, parts: make([]partPlacement, len(parts))}
	side := func(row int, meta, idx uint32) {
		if meta&metaExpiry != 0 {
			p.expiries = le.AppendUint64(p.expiries, uint64(row))
			p.expiries = le.AppendUint64(p.expiries, uint64(w.expiry(idx)))
		}
		if v := w.version(idx); v > changeVersion {
			p.newer = le.AppendUint64(p.newer, uint64(row))
			p.newer = le.AppendUint64(p.newer, v)
		}
		if meta&metaExtras != 0 {
			x := w.extra(idx)
			p.extras = le.AppendUint64(p.extras, uint64(row))
			p.extras = le.AppendUint64(p.extras, w.extraBytes.offset(x.addr)<<extraLenBits|uint64(x.n))
		}
	}
	base := 0
	for j, dl := range parts {
		pp := &p.parts[j]
		pp.genHomes, pp.customHomes = homesFor(len(dl.gen)), homesFor(len(dl.custom))
		next := 0
		for i := range dl.gen {
			row := max(int(home(dl.gen[i].m, pp.genHomes)), next)
			side(base+row, dl.gen[i].meta, dl.gen[i].idx)
			next = row + 1
		}
		pp.genRows = max(int(pp.genHomes), next)
		base += pp.genRows
	}
	for j, dl := range parts {
		pp := &p.parts[j]
		next := 0
		for i := range dl.custom {
			row := max(int(home(dl.custom[i].hash, pp.customHomes)), next)
			side(base+row, dl.custom[i].meta, dl.custom[i].idx)
			next = row + 1
		}
		pp.customRows = max(int(pp.customHomes), next)
		base += pp.customRows
	}
	return p
}

func (w *Writer) version(idx uint32) uint64 {
	if int(idx) < len(w.versions) {
		return w.versions[idx]
	}
	return 0
}

func (w *Writer) extra(idx uint32) extraRef {
	i, _ := slices.BinarySearchFunc(w.extras, idx, func(x extraRef, idx uint32) int { return cmp.Compare(x.idx, idx) })
	return w.extras[i]
}

func (w *Writer) expiry(idx uint32) int64 {
	i, _ := slices.BinarySearchFunc(w.expiries, idx, func(e expiry, idx uint32) int { return cmp.Compare(e.idx, idx) })
	return w.expiries[i].at
}

// words are a link's row words without its key.
func (w *Writer) words(rec uint64, meta, idx uint32, changeVersion uint64) (w0, w1 uint64) {
	n, rt, st := uint64(meta&0xffff), uint64(meta>>16&7), uint64(meta>>19&3)
	w0 = n<<lenShift | rt<<redirectShift | st<<statusShift
	if meta&metaExpiry != 0 {
		w0 |= expiryBit
	}
	if meta&metaExtras != 0 {
		w0 |= extrasBit
	}
	if w.version(idx) > changeVersion {
		w0 |= newerBit
	}
	return w0, w.rest.offset(rec&offMask) | rec&^offMask
}

func (w *Writer) writeGenerated(out io.Writer, parts []*domainLinks, p placement) error {
	var row [genRowLen]byte
	var zero [genRowLen]byte
	for j, dl := range parts {
		pp := &p.parts[j]
		next := 0
		for i := range dl.gen {
			g := &dl.gen[i]
			at := max(int(home(g.m, pp.genHomes)), next)
			for ; next < at; next++ {
				if _, err := out.Write(zero[:]); err != nil {
					return err
				}
			}
			w0, w1 := w.words(g.rec, g.meta, g.idx, p.changeVersion)
			le.PutUint64(row[:], unmix(g.m)|w0)
			le.PutUint64(row[8:], w1)
			if _, err := out.Write(row[:]); err != nil {
				return err
			}
			next++
		}
		for ; next < pp.genRows; next++ {
			if _, err := out.Write(zero[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *Writer) writeCustom(out io.Writer, parts []*domainLinks, p placement) error {
	var row [customRowLen]byte
	var zero [customRowLen]byte
	for j, dl := range parts {
		pp := &p.parts[j]
		next := 0
		for i := range dl.custom {
			c := &dl.custom[i]
			at := max(int(home(c.hash, pp.customHomes)), next)
			for ; next < at; next++ {
				if _, err := out.Write(zero[:]); err != nil {
					return err
				}
			}
			w0, w1 := w.words(c.rec, c.meta, c.idx, p.changeVersion)
			le.PutUint64(row[:], (w.codes.offset(c.code)+1)|w0)
			le.PutUint64(row[8:], w1)
			le.PutUint64(row[16:], c.hash)
			if _, err := out.Write(row[:]); err != nil {
				return err
			}
			next++
		}
		for ; next < pp.customRows; next++ {
			if _, err := out.Write(zero[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

func encodeSealed(sealed []Sealed) ([]byte, error) {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(sealed)))
	for _, s := range sealed {
		b = binary.AppendUvarint(b, uint64(len(s.Namespace)))
		b = append(b, s.Namespace...)
		b = binary.AppendUvarint(b, uint64(len(s.Intervals)))
		var last uint64
		for i, iv := range s.Intervals {
			if iv.Start >= iv.End || (i > 0 && iv.Start < last) {
				return nil, fmt.Errorf("snapshot: sealed intervals of %q must be ascending, disjoint and non-empty", s.Namespace)
			}
			b = binary.AppendUvarint(b, iv.Start)
			b = binary.AppendUvarint(b, iv.End)
			last = iv.End
		}
	}
	return b, nil
}
