package geo

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
)

// builder gathers ranges from one or more files and makes a Table of them.
type builder struct {
	codes []([2]byte)
	index map[[2]byte]uint16
	v4    []span4
	v6    []span6
	files []string
	info  Info
}

// at is where a range was read: a file of builder.files and a line in it
// (0 for a source without lines, an mmdb's tree).
type at struct {
	file uint16
	line int32
}

type span4 struct {
	lo, hi uint32
	cc     uint16 // 0: the data names no country
	at     at
}

type span6 struct {
	lo, hi u128
	cc     uint16
	at     at
}

func newBuilder() *builder {
	return &builder{codes: make([][2]byte, 1, 300), index: make(map[[2]byte]uint16, 300)}
}

// file registers a source name for error messages.
func (b *builder) file(name string) uint16 {
	b.files = append(b.files, name)
	return uint16(len(b.files) - 1)
}

func (b *builder) where(a at) string {
	if a.line == 0 {
		return b.files[a.file]
	}
	return fmt.Sprintf("%s line %d", b.files[a.file], a.line)
}

// code interns a country code already checked by parseCode; the zero code
// is "none".
func (b *builder) code(c [2]byte) uint16 {
	if c == ([2]byte{}) {
		return 0
	}
	if i, ok := b.index[c]; ok {
		return i
	}
	// At most 26*26 codes exist, far below the index's range.
	b.codes = append(b.codes, c)
	i := uint16(len(b.codes) - 1)
	b.index[c] = i
	return i
}

// parseCode reads a country code as the data writes it: two ASCII letters
// in either case, returned in upper case; "??" (Tor's files) and "--" or
// an empty code are "none", returned as the zero code. UK, which ISO
// 3166-1 reserves for the United Kingdom but does not assign, is read as
// GB, so one country is not counted under two codes.
func parseCode(s []byte) (c [2]byte, ok bool) {
	switch string(s) {
	case "", "??", "--":
		return c, true
	}
	if len(s) != 2 {
		return c, false
	}
	for i, ch := range s {
		switch {
		case 'A' <= ch && ch <= 'Z':
			c[i] = ch
		case 'a' <= ch && ch <= 'z':
			c[i] = ch - 'a' + 'A'
		default:
			return [2]byte{}, false
		}
	}
	if c == [2]byte{'U', 'K'} {
		c = [2]byte{'G', 'B'}
	}
	return c, true
}

// add records one range of lo..hi (inclusive, one family) with country c.
func (b *builder) add(lo, hi netip.Addr, c [2]byte, a at) {
	cc := b.code(c)
	if cc == 0 {
		b.info.Unknown++
	}
	if lo.Is4() {
		b.v4 = append(b.v4, span4{lo: v4num(lo), hi: v4num(hi), cc: cc, at: a})
		if cc != 0 {
			b.info.V4Ranges++
		}
		return
	}
	b.v6 = append(b.v6, span6{lo: u128From(lo), hi: u128From(hi), cc: cc, at: a})
	if cc != 0 {
		b.info.V6Ranges++
	}
}

func v4num(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// build sorts the ranges and turns them into boundaries. Ranges may come in
// any order; two that share an address are an error naming both, since
// which to believe would be a guess.
func (b *builder) build() (*Table, error) {
	t := &Table{codes: b.codes, info: b.info}
	t.info.Countries = len(b.codes) - 1

	slices.SortFunc(b.v4, func(x, y span4) int { return cmp.Or(cmp.Compare(x.lo, y.lo), cmp.Compare(x.hi, y.hi)) })
	t.v4, t.v4cc = []uint32{0}, []uint16{0}
	next, more := uint32(0), true // the first address no range covers yet; more false past the last
	for i, s := range b.v4 {
		if !more || s.lo < next {
			p := b.v4[i-1]
			return nil, fmt.Errorf("%s: range %v-%v overlaps %v-%v of %s", b.where(s.at),
				num4(s.lo), num4(s.hi), num4(p.lo), num4(p.hi), b.where(p.at))
		}
		if s.lo > next {
			t.v4, t.v4cc = bound32(t.v4, t.v4cc, next, 0)
		}
		t.v4, t.v4cc = bound32(t.v4, t.v4cc, s.lo, s.cc)
		next, more = s.hi+1, s.hi != math.MaxUint32
	}
	if more {
		t.v4, t.v4cc = bound32(t.v4, t.v4cc, next, 0)
	}

	slices.SortFunc(b.v6, func(x, y span6) int {
		switch {
		case x.lo.less(y.lo):
			return -1
		case y.lo.less(x.lo):
			return 1
		case x.hi.less(y.hi):
			return -1
		case y.hi.less(x.hi):
			return 1
		}
		return 0
	})
	v6 := []u128{{}}
	t.v6cc = []uint16{0}
	next6, more := u128{}, true
	for i, s := range b.v6 {
		if !more || s.lo.less(next6) {
			p := b.v6[i-1]
			return nil, fmt.Errorf("%s: range %v-%v overlaps %v-%v of %s", b.where(s.at),
				s.lo.addr(), s.hi.addr(), p.lo.addr(), p.hi.addr(), b.where(p.at))
		}
		if next6.less(s.lo) {
			v6, t.v6cc = bound128(v6, t.v6cc, next6, 0)
		}
		v6, t.v6cc = bound128(v6, t.v6cc, s.lo, s.cc)
		next6, more = s.hi.next()
	}
	if more {
		v6, t.v6cc = bound128(v6, t.v6cc, next6, 0)
	}
	// The builder's slices grew by doubling: keep only what is used.
	t.v4, t.v4cc = slices.Clip(slices.Clone(t.v4)), slices.Clone(t.v4cc)
	t.v6cc = slices.Clone(t.v6cc)
	t.v6hi, t.v6lo = make([]uint64, len(v6)), make([]uint64, len(v6))
	for i, x := range v6 {
		t.v6hi[i], t.v6lo[i] = x.hi, x.lo
	}
	t.info.Entries = len(t.v4) + len(v6)
	t.v4at, t.v6at = make([]uint32, 1<<16+1), make([]uint32, 1<<16+1)
	for k := 1; k < 1<<16; k++ { // nothing lies below address 0: v4at[0] is 0
		t.v4at[k] = uint32(search32(t.v4, uint32(k)<<16-1))
		t.v6at[k] = uint32(search64(t.v6hi, uint64(k)<<48-1))
	}
	t.v4at[1<<16], t.v6at[1<<16] = uint32(len(t.v4)), uint32(len(v6))
	return t, nil
}

func num4(x uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

// bound32 appends a boundary at x with code cc: it replaces a boundary at
// the same start, and is dropped when the range before already has cc.
func bound32(s []uint32, c []uint16, x uint32, cc uint16) ([]uint32, []uint16) {
	n := len(s)
	if s[n-1] == x {
		c[n-1] = cc
		if n >= 2 && c[n-2] == cc {
			return s[:n-1], c[:n-1]
		}
		return s, c
	}
	if c[n-1] == cc {
		return s, c
	}
	return append(s, x), append(c, cc)
}

func bound128(s []u128, c []uint16, x u128, cc uint16) ([]u128, []uint16) {
	n := len(s)
	if s[n-1] == x {
		c[n-1] = cc
		if n >= 2 && c[n-2] == cc {
			return s[:n-1], c[:n-1]
		}
		return s, c
	}
	if c[n-1] == cc {
		return s, c
	}
	return append(s, x), append(c, cc)
}
