package snapshot

// The format 1 writer as it was before format 2, kept to test that the
// reader still takes what control wrote then.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"

	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// Writer collects links and writes them as a snapshot. Add in any order; it
// sorts on Write. Not safe for concurrent use.
type writerV1 struct {
	generated []genLinkV1
	custom    []Link
}

type genLinkV1 struct {
	id uint64
	l  Link
}

// Add queues one link. Codes must be unique; Write reports duplicates.
func (w *writerV1) Add(l Link) error {
	if !link.ValidCodeSyntax(l.Code) {
		return fmt.Errorf("snapshot: invalid code %q", l.Code)
	}
	if statusByte(l.Status) == 0 {
		return fmt.Errorf("snapshot: code %q: invalid status %q", l.Code, l.Status)
	}
	if l.Status == link.Active && redirectByte(l.RedirectType) == 0 {
		return fmt.Errorf("snapshot: code %q: invalid redirect type %d", l.Code, l.RedirectType)
	}
	if len(l.Code) == base62.Length && base62.Valid(l.Code) {
		id, _ := base62.Decode(l.Code)
		w.generated = append(w.generated, genLinkV1{id, l})
		return nil
	}
	w.custom = append(w.custom, l)
	return nil
}

// Len is the number of links added.
func (w *writerV1) Len() int { return len(w.generated) + len(w.custom) }

// Write writes the snapshot to out. h.Entries is set from the links added.
func (w *writerV1) Write(out io.Writer, h Header, sealed []Sealed, bloom []byte) error {
	sort.Slice(w.generated, func(i, j int) bool { return w.generated[i].id < w.generated[j].id })
	sort.Slice(w.custom, func(i, j int) bool { return w.custom[i].Code < w.custom[j].Code })
	for i := 1; i < len(w.generated); i++ {
		if w.generated[i].id == w.generated[i-1].id {
			return fmt.Errorf("snapshot: duplicate code %q", w.generated[i].l.Code)
		}
	}
	for i := 1; i < len(w.custom); i++ {
		if w.custom[i].Code == w.custom[i-1].Code {
			return fmt.Errorf("snapshot: duplicate code %q", w.custom[i].Code)
		}
	}
	h.Entries = uint64(w.Len())

	sealedSec, err := encodeSealedV1(sealed)
	if err != nil {
		return err
	}
	dictSec, entriesSec, err := w.encodeEntries(h.ChangeVersion)
	if err != nil {
		return err
	}
	sections := [v1Sections][]byte{sealedSec, bloom, dictSec, entriesSec}

	pre := make([]byte, prefaceLen(v1Sections))
	copy(pre, magic)
	le := binary.LittleEndian
	le.PutUint32(pre[8:], 1)
	le.PutUint32(pre[12:], h.Flags)
	le.PutUint64(pre[16:], h.ChangeVersion)
	le.PutUint64(pre[24:], h.StreamSeq)
	le.PutUint64(pre[32:], uint64(h.CreatedMillis))
	le.PutUint64(pre[40:], h.Entries)
	le.PutUint64(pre[48:], h.BloomCount)
	le.PutUint32(pre[56:], v1Sections)
	off := uint64(prefaceLen(v1Sections))
	for i, sec := range sections {
		row := pre[headerLen+i*tableRowLen:]
		le.PutUint32(row[0:], uint32(i+1))
		le.PutUint32(row[4:], crc32.Checksum(sec, castagnoli))
		le.PutUint64(row[8:], off)
		le.PutUint64(row[16:], uint64(len(sec)))
		off += uint64(len(sec))
	}
	crcAt := headerLen + v1Sections*tableRowLen
	le.PutUint32(pre[crcAt:], crc32.Checksum(pre[:crcAt], castagnoli))

	bw := bufio.NewWriterSize(out, 1<<20)
	if _, err := bw.Write(pre); err != nil {
		return err
	}
	for _, sec := range sections {
		if _, err := bw.Write(sec); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func encodeSealedV1(sealed []Sealed) ([]byte, error) {
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

func (w *writerV1) encodeEntries(changeVersion uint64) (dict, entries []byte, err error) {
	le := binary.LittleEndian
	origins := map[string]uint32{}
	var originList []string
	var rest bytes.Buffer
	records := make([]byte, 0, v1RecordLen*w.Len())
	var expiries, newer []byte
	idx := uint32(0)
	addRecord := func(l *Link) error {
		origin, r := SplitOrigin(l.URL)
		oi, ok := origins[origin]
		if !ok {
			oi = uint32(len(originList))
			origins[origin] = oi
			originList = append(originList, origin)
		}
		if len(r) > math.MaxUint16 {
			return fmt.Errorf("snapshot: code %q: target longer than %d bytes", l.Code, math.MaxUint16)
		}
		if rest.Len() > math.MaxUint32-len(r) {
			return fmt.Errorf("snapshot: targets exceed 4 GiB")
		}
		var rec [v1RecordLen]byte
		le.PutUint32(rec[0:], oi)
		le.PutUint32(rec[4:], uint32(rest.Len()))
		le.PutUint16(rec[8:], uint16(len(r)))
		rec[10] = redirectByte(l.RedirectType)
		if l.ExpiresAt != 0 {
			rec[10] |= v1ExpiryFlag
		}
		rec[11] = statusByte(l.Status)
		if l.Version > changeVersion {
			rec[11] |= v1NewerFlag
			var n [v1NewerLen]byte
			le.PutUint32(n[0:], idx)
			le.PutUint64(n[4:], l.Version)
			newer = append(newer, n[:]...)
		}
		rest.WriteString(r)
		records = append(records, rec[:]...)
		if l.ExpiresAt != 0 {
			var e [v1ExpiryLen]byte
			le.PutUint32(e[0:], idx)
			le.PutUint64(e[4:], uint64(l.ExpiresAt))
			expiries = append(expiries, e[:]...)
		}
		idx++
		return nil
	}

	entries = le.AppendUint64(entries, uint64(len(w.generated)))
	for _, g := range w.generated {
		entries = le.AppendUint64(entries, g.id)
	}
	entries = le.AppendUint64(entries, uint64(len(w.custom)))
	var codeBytes []byte
	entries = le.AppendUint32(entries, 0)
	for _, c := range w.custom {
		codeBytes = append(codeBytes, c.Code...)
		entries = le.AppendUint32(entries, uint32(len(codeBytes)))
	}
	entries = append(entries, codeBytes...)
	entries = pad4V1(entries)
	for i := range w.generated {
		if err := addRecord(&w.generated[i].l); err != nil {
			return nil, nil, err
		}
	}
	for i := range w.custom {
		if err := addRecord(&w.custom[i]); err != nil {
			return nil, nil, err
		}
	}
	entries = append(entries, records...)
	entries = le.AppendUint64(entries, uint64(rest.Len()))
	entries = append(entries, rest.Bytes()...)
	entries = pad4V1(entries)
	entries = le.AppendUint64(entries, uint64(len(expiries)/v1ExpiryLen))
	entries = append(entries, expiries...)
	entries = le.AppendUint64(entries, uint64(len(newer)/v1NewerLen))
	entries = append(entries, newer...)

	dict = binary.AppendUvarint(dict, uint64(len(originList)))
	for _, o := range originList {
		dict = binary.AppendUvarint(dict, uint64(len(o)))
		dict = append(dict, o...)
	}
	return dict, entries, nil
}

// pad4 pads b with zeros to a multiple of 4 bytes, relative to the section's
// start, so fixed-width arrays after it stay 4-aligned within the section.
func pad4V1(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
