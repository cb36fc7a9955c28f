package snapshot

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Writer collects links and writes them as a format 2 snapshot. Add in any
// order; Write lays the tables out. It holds about 24 bytes per generated
// link (32 per custom one) plus the targets' bytes without their origins,
// and writes without building the file in memory. Not safe for concurrent
// use.
type Writer struct {
	gen        []genLink
	custom     []customLink
	codes      arena // custom codes, each a length byte and the code
	rest       arena // target remainders
	origins    map[string]uint32
	originList []string
	// versions is by add index, allocated once a link has one; expiries
	// are the links with one, in add order.
	versions []uint64
	expiries []expiry
	n        uint32
}

type genLink struct {
	m    uint64 // mix(ID): the sort key, and the ID by unmix
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

const metaExpiry = 1 << 21

// Grow makes room for n more generated links without growing again.
func (w *Writer) Grow(n int) { w.gen = slices.Grow(w.gen, n) }

// Add queues one link. It refuses an invalid code, status, redirect type
// or target with an error and then holds nothing of the link. Codes must
// be unique; Write reports duplicates.
func (w *Writer) Add(l Link) error {
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
		id, _ = base62.Decode(l.Code)
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
	if l.Version != 0 && w.versions == nil {
		w.versions = make([]uint64, idx, idx+1)
	}
	if w.versions != nil {
		w.versions = append(w.versions, l.Version)
	}
	if generated {
		w.gen = append(w.gen, genLink{m: mix(id), rec: rec, meta: meta, idx: idx})
	} else {
		code := w.codes.add(string([]byte{byte(len(l.Code))}) + l.Code)
		w.custom = append(w.custom, customLink{hash: codeHash(l.Code), code: code, rec: rec, meta: meta, idx: idx})
	}
	w.n++
	return nil
}

// Len is the number of links added.
func (w *Writer) Len() int { return int(w.n) }

// Write writes the snapshot to out. h.Entries is set from the links added.
// It may be called again, with the same result for the same arguments.
func (w *Writer) Write(out io.Writer, h Header, sealed []Sealed, bloom []byte) error {
	slices.SortFunc(w.gen, func(a, b genLink) int { return cmp.Compare(a.m, b.m) })
	for i := 1; i < len(w.gen); i++ {
		if w.gen[i].m == w.gen[i-1].m {
			code, _ := base62.Encode(unmix(w.gen[i].m))
			return fmt.Errorf("snapshot: duplicate code %q", code)
		}
	}
	slices.SortFunc(w.custom, func(a, b customLink) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return bytes.Compare(w.codes.at(a.code), w.codes.at(b.code))
	})
	for i := 1; i < len(w.custom); i++ {
		a, b := &w.custom[i-1], &w.custom[i]
		if a.hash == b.hash && bytes.Equal(w.codes.at(a.code), w.codes.at(b.code)) {
			return fmt.Errorf("snapshot: duplicate code %q", w.codes.at(b.code)[1:])
		}
	}
	h.Entries = uint64(w.n)
	w.rest.index()
	w.codes.index()

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
	p := w.place(h.ChangeVersion)
	var layout []byte
	layout = le.AppendUint64(layout, p.genHomes)
	layout = le.AppendUint64(layout, uint64(len(w.gen)))
	layout = le.AppendUint64(layout, p.customHomes)
	layout = le.AppendUint64(layout, uint64(len(w.custom)))

	inMemory := func(b []byte) func(io.Writer) error {
		return func(out io.Writer) error { _, err := out.Write(b); return err }
	}
	sections := [sectionCount]func(io.Writer) error{
		inMemory(sealedSec), inMemory(bloom), inMemory(dict), inMemory(layout),
		func(out io.Writer) error { return w.writeGenerated(out, p) },
		func(out io.Writer) error { return w.writeCustom(out, p) },
		w.codes.writeTo, w.rest.writeTo,
		inMemory(p.expiries), inMemory(p.newer),
	}
	// Two passes over the sections: checksums and lengths first, since
	// the header that holds them comes first, then the bytes.
	pre := make([]byte, prefaceLen(sectionCount))
	copy(pre, magic)
	le.PutUint32(pre[8:], FormatVersion)
	le.PutUint32(pre[12:], h.Flags)
	le.PutUint64(pre[16:], h.ChangeVersion)
	le.PutUint64(pre[24:], h.StreamSeq)
	le.PutUint64(pre[32:], uint64(h.CreatedMillis))
	le.PutUint64(pre[40:], h.Entries)
	le.PutUint64(pre[48:], h.BloomCount)
	le.PutUint32(pre[56:], sectionCount)
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
		off = align(off, FormatVersion)
		row := pre[headerLen+i*tableRowLen:]
		le.PutUint32(row[0:], uint32(i+1))
		le.PutUint32(row[4:], c.sum)
		le.PutUint64(row[8:], off)
		le.PutUint64(row[16:], c.n)
		off += c.n
	}
	crcAt := headerLen + sectionCount*tableRowLen
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

// placement is where Write puts the sorted links: each at its home row or
// right after the link before it, whichever is later (linear probing with
// the rows in hash order), and the side tables that follow from it.
type placement struct {
	changeVersion         uint64
	genHomes, customHomes uint64
	genRows, customRows   int
	expiries, newer       []byte
}

func (w *Writer) place(changeVersion uint64) placement {
	p := placement{changeVersion: changeVersion, genHomes: homesFor(len(w.gen)), customHomes: homesFor(len(w.custom))}
	side := func(row int, meta, idx uint32) {
		if meta&metaExpiry != 0 {
			p.expiries = le.AppendUint64(p.expiries, uint64(row))
			p.expiries = le.AppendUint64(p.expiries, uint64(w.expiry(idx)))
		}
		if v := w.version(idx); v > changeVersion {
			p.newer = le.AppendUint64(p.newer, uint64(row))
			p.newer = le.AppendUint64(p.newer, v)
		}
	}
	next := 0
	for i := range w.gen {
		row := max(int(home(w.gen[i].m, p.genHomes)), next)
		side(row, w.gen[i].meta, w.gen[i].idx)
		next = row + 1
	}
	p.genRows = max(int(p.genHomes), next)
	next = 0
	for i := range w.custom {
		row := max(int(home(w.custom[i].hash, p.customHomes)), next)
		side(p.genRows+row, w.custom[i].meta, w.custom[i].idx)
		next = row + 1
	}
	p.customRows = max(int(p.customHomes), next)
	return p
}

func (w *Writer) version(idx uint32) uint64 {
	if int(idx) < len(w.versions) {
		return w.versions[idx]
	}
	return 0
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
	if w.version(idx) > changeVersion {
		w0 |= newerBit
	}
	return w0, w.rest.offset(rec&offMask) | rec&^offMask
}

func (w *Writer) writeGenerated(out io.Writer, p placement) error {
	var row [genRowLen]byte
	var zero [genRowLen]byte
	next := 0
	for i := range w.gen {
		g := &w.gen[i]
		at := max(int(home(g.m, p.genHomes)), next)
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
	for ; next < p.genRows; next++ {
		if _, err := out.Write(zero[:]); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) writeCustom(out io.Writer, p placement) error {
	var row [customRowLen]byte
	var zero [customRowLen]byte
	next := 0
	for i := range w.custom {
		c := &w.custom[i]
		at := max(int(home(c.hash, p.customHomes)), next)
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
	for ; next < p.customRows; next++ {
		if _, err := out.Write(zero[:]); err != nil {
			return err
		}
	}
	return nil
}

// arena holds bytes in chunks of at most 64 MiB, so that neither growing
// it nor holding it needs one allocation the size of all the targets. An
// address is a chunk number and an offset in it; offset gives the byte's
// place once the chunks are written one after the other.
type arena struct {
	chunks [][]byte
	base   []uint64 // each chunk's offset in the written bytes (index)
}

const (
	chunkBits  = 26
	chunkSize  = 1 << chunkBits
	restChunks = maxRestBytes >> chunkBits  // the rest offset's 40 bits
	codeChunks = (keyMask + 1) >> chunkBits // the custom key's 36 bits
)

// fits reports whether n more bytes fit in an arena of at most max chunks.
func (a *arena) fits(n, maxChunks int) bool {
	k := len(a.chunks)
	return k < maxChunks || (k == maxChunks && len(a.chunks[k-1])+n <= chunkSize)
}

func (a *arena) add(b string) uint64 {
	if k := len(a.chunks); k == 0 || len(a.chunks[k-1])+len(b) > chunkSize {
		a.chunks = append(a.chunks, make([]byte, 0, max(4096, 2*len(b))))
	}
	k := len(a.chunks) - 1
	off := len(a.chunks[k])
	a.chunks[k] = append(a.chunks[k], b...)
	a.base = nil
	return uint64(k)<<chunkBits | uint64(off)
}

// at returns a code's bytes: its length byte and the code.
func (a *arena) at(addr uint64) []byte {
	c, off := a.chunks[addr>>chunkBits], addr&(chunkSize-1)
	return c[off : off+1+uint64(c[off])]
}

func (a *arena) index() {
	a.base = make([]uint64, len(a.chunks))
	var n uint64
	for i, c := range a.chunks {
		a.base[i] = n
		n += uint64(len(c))
	}
}

func (a *arena) offset(addr uint64) uint64 {
	if len(a.chunks) == 0 {
		return 0
	}
	return a.base[addr>>chunkBits] + addr&(chunkSize-1)
}

func (a *arena) writeTo(out io.Writer) error {
	for _, c := range a.chunks {
		if _, err := out.Write(c); err != nil {
			return err
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
