// Package hll is a HyperLogLog sketch of a set of 64-bit hashes: the
// number of distinct values it was given, estimated in bounded memory, for
// counting unique visitors per link and day without keeping who they were.
//
// Precision 14: 16,384 registers, a standard error of 1.04/√16384 = 0.81%
// at any cardinality once past a few thousand (below that the estimate is
// almost exact). A sketch starts sparse (the registers that are not zero,
// a few bytes each) and turns dense (16,384 registers, 12,288 bytes
// encoded) when the sparse form would no longer be smaller; both give the
// same estimate. Merging two sketches keeps each register's larger value:
// the sketch of the union, whatever the order, and merging a sketch again
// changes nothing (idempotent), so a merge needs no exactly-once care of
// its own.
//
// The estimate is Ertl's improved raw estimator ("New cardinality
// estimation algorithms for HyperLogLog sketches", 2017): no bias
// correction tables and no switch to linear counting, accurate from 1 to
// billions.
//
// Encoding (MarshalBinary, version 1), stable: a version byte (1), the
// precision (14), the form (0 sparse, 1 dense); sparse: the count of
// registers set, then each (index << 6 | value) as a uvarint delta from the
// previous one, indexes strictly increasing; dense: the 16,384 6-bit
// registers packed 4 to 3 bytes, little end first.
package hll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

const (
	// Precision is log2 of the number of registers.
	Precision = 14
	// Registers is the number of registers, m.
	Registers = 1 << Precision
	// q is the bits of a hash left after the index; a register holds the
	// position of the first one bit among them, 1..q+1 (0: empty).
	q        = 64 - Precision
	maxValue = q + 1

	version    = 1
	formSparse = 0
	formDense  = 1
	denseBytes = Registers * 6 / 8
	// maxSparse is the most registers kept sparse, 4 bytes each in memory
	// (as many bytes as the dense form) and 2-3 encoded.
	maxSparse = Registers / 4
)

// Sketch is a HyperLogLog sketch. The zero value is an empty sketch, ready
// to use. Not safe for concurrent use.
type Sketch struct {
	// sparse holds the registers that are not zero as index<<6 | value,
	// sorted by index, while dense is nil.
	sparse []uint32
	dense  []uint8 // Registers values, once the sketch is dense
}

// mix spreads the bits of x: a visitor hash should be uniform already,
// but a sketch must not depend on that (sequential test IDs are not).
// The finalizer of MurmurHash3, a bijection.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Add adds the value x (a hash: distinct values should differ in every
// bit's odds) and reports whether the sketch changed.
func (s *Sketch) Add(x uint64) bool {
	h := mix(x)
	idx := uint32(h >> q)
	v := uint8(bits.LeadingZeros64(h<<Precision|1<<(Precision-1)) + 1)
	return s.set(idx, v)
}

// set raises register idx to v if it is lower, reporting whether it was.
func (s *Sketch) set(idx uint32, v uint8) bool {
	if s.dense != nil {
		if s.dense[idx] >= v {
			return false
		}
		s.dense[idx] = v
		return true
	}
	i, found := slices.BinarySearchFunc(s.sparse, idx, func(e, idx uint32) int { return int(e>>6) - int(idx) })
	if found {
		if uint8(s.sparse[i]&63) >= v {
			return false
		}
		s.sparse[i] = idx<<6 | uint32(v)
		return true
	}
	s.sparse = slices.Insert(s.sparse, i, idx<<6|uint32(v))
	if len(s.sparse) > maxSparse {
		s.toDense()
	}
	return true
}

func (s *Sketch) toDense() {
	d := make([]uint8, Registers)
	for _, e := range s.sparse {
		d[e>>6] = uint8(e & 63)
	}
	s.dense, s.sparse = d, nil
}

// Merge raises every register of s to o's where o's is higher (s becomes
// the sketch of both sets) and reports whether s changed. o is unchanged.
func (s *Sketch) Merge(o *Sketch) bool {
	changed := false
	if o.dense != nil {
		if s.dense == nil {
			s.toDense()
		}
		for i, v := range o.dense {
			if v > s.dense[i] {
				s.dense[i], changed = v, true
			}
		}
		return changed
	}
	if s.dense != nil {
		for _, e := range o.sparse {
			if s.set(e>>6, uint8(e&63)) {
				changed = true
			}
		}
		return changed
	}
	// Both sparse: one pass over the two sorted lists.
	out := make([]uint32, 0, len(s.sparse)+len(o.sparse))
	a, b := s.sparse, o.sparse
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0]>>6 < b[0]>>6:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0]>>6 < a[0]>>6:
			out, b, changed = append(out, b[0]), b[1:], true
		default: // the same register
			e := a[0]
			if b[0]&63 > e&63 {
				e, changed = b[0], true
			}
			out, a, b = append(out, e), a[1:], b[1:]
		}
	}
	s.sparse = out
	if len(s.sparse) > maxSparse {
		s.toDense()
	}
	return changed
}

// Empty reports whether nothing was added.
func (s *Sketch) Empty() bool {
	if s.dense == nil {
		return len(s.sparse) == 0
	}
	for _, v := range s.dense {
		if v != 0 {
			return false
		}
	}
	return true
}

// Dense reports whether s holds its registers in the dense form.
func (s *Sketch) Dense() bool { return s.dense != nil }

// Clone returns an independent copy of s.
func (s *Sketch) Clone() *Sketch {
	return &Sketch{sparse: slices.Clone(s.sparse), dense: slices.Clone(s.dense)}
}

// Equal reports whether s and o hold the same registers (whatever their
// forms).
func (s *Sketch) Equal(o *Sketch) bool {
	if s.dense == nil && o.dense == nil {
		return slices.Equal(s.sparse, o.sparse)
	}
	a, b := s.Clone(), o.Clone()
	if a.dense == nil {
		a.toDense()
	}
	if b.dense == nil {
		b.toDense()
	}
	return slices.Equal(a.dense, b.dense)
}

// Estimate is the estimated number of distinct values added.
func (s *Sketch) Estimate() uint64 {
	var c [maxValue + 1]int // registers per value
	if s.dense != nil {
		for _, v := range s.dense {
			c[v]++
		}
	} else {
		c[0] = Registers - len(s.sparse)
		for _, e := range s.sparse {
			c[e&63]++
		}
	}
	if c[0] == Registers {
		return 0
	}
	const m = float64(Registers)
	z := m * tau(1-float64(c[maxValue])/m)
	for k := q; k >= 1; k-- {
		z = 0.5 * (z + float64(c[k]))
	}
	z += m * sigma(float64(c[0])/m)
	return uint64(math.Round(m * m / (2 * math.Ln2) / z))
}

// sigma is Ertl's σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k-1), for x < 1.
func sigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

// tau is Ertl's τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))² 2^-k) / 3.
func tau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			return z / 3
		}
	}
}

// AppendBinary appends s's encoding (the package comment's) to b.
func (s *Sketch) AppendBinary(b []byte) ([]byte, error) {
	if s.dense != nil {
		b = append(b, version, Precision, formDense)
		for i := 0; i < Registers; i += 4 {
			w := uint32(s.dense[i]) | uint32(s.dense[i+1])<<6 | uint32(s.dense[i+2])<<12 | uint32(s.dense[i+3])<<18
			b = append(b, byte(w), byte(w>>8), byte(w>>16))
		}
		return b, nil
	}
	b = append(b, version, Precision, formSparse)
	b = binary.AppendUvarint(b, uint64(len(s.sparse)))
	prev := uint32(0)
	for _, e := range s.sparse {
		b = binary.AppendUvarint(b, uint64(e-prev))
		prev = e
	}
	return b, nil
}

// MarshalBinary returns s's encoding.
func (s *Sketch) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// ErrInvalid is wrapped by every decoding error.
var ErrInvalid = errors.New("hll: invalid sketch")

func invalid(what string) error { return fmt.Errorf("%w: %s", ErrInvalid, what) }

// UnmarshalBinary replaces s with the sketch b encodes, validating all of
// it: version, precision, form, every register in range, indexes strictly
// increasing, no trailing bytes. On error s is unchanged.
func (s *Sketch) UnmarshalBinary(b []byte) error {
	if len(b) < 3 {
		return invalid("too short")
	}
	if b[0] != version {
		return invalid(fmt.Sprintf("version %d", b[0]))
	}
	if b[1] != Precision {
		return invalid(fmt.Sprintf("precision %d", b[1]))
	}
	body := b[3:]
	switch b[2] {
	case formDense:
		if len(body) != denseBytes {
			return invalid(fmt.Sprintf("dense form of %d bytes", len(body)))
		}
		d := make([]uint8, Registers)
		for i, j := 0, 0; i < Registers; i, j = i+4, j+3 {
			w := uint32(body[j]) | uint32(body[j+1])<<8 | uint32(body[j+2])<<16
			for k := range 4 {
				v := uint8(w >> (6 * k) & 63)
				if v > maxValue {
					return invalid("register value")
				}
				d[i+k] = v
			}
		}
		s.dense, s.sparse = d, nil
		return nil
	case formSparse:
		n, k := binary.Uvarint(body)
		// Each register takes at least a byte: a forged count cannot make
		// the decoder allocate more than the input holds.
		if k <= 0 || n > Registers || n > uint64(len(body)-k) {
			return invalid("sparse count")
		}
		body = body[k:]
		out := make([]uint32, 0, n)
		var prev uint64
		for i := range n {
			d, k := binary.Uvarint(body)
			if k <= 0 {
				return invalid("sparse register")
			}
			body = body[k:]
			if d >= Registers<<6 {
				return invalid("sparse register")
			}
			e := prev + d
			if (i > 0 && e>>6 <= prev>>6) || e>>6 >= Registers || e&63 == 0 || e&63 > maxValue {
				return invalid("sparse register")
			}
			out = append(out, uint32(e))
			prev = e
		}
		if len(body) != 0 {
			return invalid("trailing bytes")
		}
		s.sparse, s.dense = out, nil
		if len(s.sparse) > maxSparse {
			s.toDense()
		}
		return nil
	default:
		return invalid(fmt.Sprintf("form %d", b[2]))
	}
}
