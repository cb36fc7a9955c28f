package hll

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// fill adds n distinct values drawn from r and returns the sketch.
func fill(r *rand.Rand, n int) *Sketch {
	var s Sketch
	for range n {
		s.Add(r.Uint64())
	}
	return &s
}

// TestEstimateAcrossCardinalities: from one value to a million, each
// estimate of one seeded set is within a bound of the truth: exact or
// nearly so while few registers are set, within 3 standard errors (2.4%)
// beyond, the margin a single sketch can promise.
func TestEstimateAcrossCardinalities(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 10, 50, 100, 500, 1000, 2000, 5000, 10_000, 30_000, 100_000, 300_000, 1_000_000} {
		s := fill(rand.New(rand.NewPCG(uint64(n), 7)), n)
		est := float64(s.Estimate())
		bound := 0.0243 * float64(n)
		if n <= 1000 {
			bound = max(1, 0.005*float64(n)) // almost no two values share a register
		}
		if math.Abs(est-float64(n)) > bound {
			t.Errorf("%d values: estimate %.0f, off by %.2f%%; want within %.0f", n, est, 100*(est-float64(n))/max(1, float64(n)), bound)
		}
		// n values set at most n registers; twice maxSparse set some 6,400.
		if n <= maxSparse && s.Dense() || n >= 2*maxSparse && !s.Dense() {
			t.Errorf("%d values: dense %v", n, s.Dense())
		}
	}
}

// TestStandardError: over many seeded sets of each size the estimates'
// root mean square error is about the 0.81% theory gives precision 14, and
// they are not biased: the bounds leave room for the sample's own noise
// (40 sets), not for a wrong estimator.
func TestStandardError(t *testing.T) {
	const sets = 40
	for _, n := range []int{3000, 20_000, 60_000, 200_000} {
		var sq, sum float64
		for i := range sets {
			e := (float64(fill(rand.New(rand.NewPCG(uint64(n), uint64(i))), n).Estimate()) - float64(n)) / float64(n)
			sq += e * e
			sum += e
		}
		rmse, bias := math.Sqrt(sq/sets), sum/sets
		t.Logf("%d values: RMSE %.3f%%, bias %+.3f%% over %d sets", n, 100*rmse, 100*bias, sets)
		if rmse > 0.0115 || math.Abs(bias) > 0.004 {
			t.Errorf("%d values: RMSE %.3f%% (want about 0.81%%, at most 1.15%%), bias %+.3f%% (want within 0.4%%)", n, 100*rmse, 100*bias)
		}
	}
}

// TestRepeatsChangeNothing: adding a value again leaves the sketch as it
// was, and Add says whether a register moved.
func TestRepeatsChangeNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	vals := make([]uint64, 10_000)
	for i := range vals {
		vals[i] = r.Uint64()
	}
	var s Sketch
	for _, v := range vals {
		s.Add(v)
	}
	before := s.Clone()
	for _, v := range vals {
		if s.Add(v) {
			t.Fatal("adding a value again changed the sketch")
		}
	}
	if !s.Equal(before) || s.Estimate() != before.Estimate() {
		t.Fatal("repeats moved the estimate")
	}
	// Sequential values (test IDs) are spread as well as random ones.
	var seq Sketch
	for i := range uint64(50_000) {
		seq.Add(i)
	}
	if e := float64(seq.Estimate()); math.Abs(e-50_000) > 0.0243*50_000 {
		t.Fatalf("50,000 sequential values: estimate %.0f", e)
	}
}

// TestMergeIsTheUnion: a sketch merged from parts holds exactly the
// registers of one sketch of everything, whatever the parts' forms and
// order; merging again changes nothing.
func TestMergeIsTheUnion(t *testing.T) {
	for _, sizes := range [][]int{{0, 0}, {5, 0}, {0, 5}, {100, 200}, {3000, 3000}, {100, 50_000}, {50_000, 100}, {40_000, 40_000, 7, 900}} {
		t.Run(fmt.Sprint(sizes), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(len(sizes)), uint64(sizes[0])))
			var all Sketch
			var parts []*Sketch
			for _, n := range sizes {
				var p Sketch
				for range n {
					v := r.Uint64()
					p.Add(v)
					all.Add(v)
					if r.IntN(10) == 0 { // some values in two parts
						all.Add(v)
					}
				}
				parts = append(parts, &p)
			}
			for _, order := range [][]int{{0, 1}, {1, 0}} {
				var m Sketch
				for _, i := range order {
					m.Merge(parts[i])
				}
				for _, p := range parts[2:] {
					m.Merge(p)
				}
				if !m.Equal(&all) || m.Estimate() != all.Estimate() {
					t.Fatalf("order %v: merged sketch differs from the sketch of the union (%d vs %d)", order, m.Estimate(), all.Estimate())
				}
				for _, p := range parts {
					if m.Merge(p) {
						t.Fatal("merging a part again changed the sketch")
					}
				}
				if m.Merge(m.Clone()) {
					t.Fatal("merging a sketch with itself changed it")
				}
			}
		})
	}
}

// TestEncodingRoundTrip: every form encodes and decodes to the same
// registers; the sparse form of a small set is small, a dense one is
// 12,288 bytes and 3.
func TestEncodingRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 40, 1000, maxSparse - 100, 20_000, 1_000_000} {
		s := fill(rand.New(rand.NewPCG(9, uint64(n))), n)
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d Sketch
		if err := d.UnmarshalBinary(b); err != nil {
			t.Fatalf("%d values: %v", n, err)
		}
		if !d.Equal(s) || d.Dense() != s.Dense() || d.Estimate() != s.Estimate() {
			t.Fatalf("%d values: decoded sketch differs", n)
		}
		again, _ := d.MarshalBinary()
		if !bytes.Equal(again, b) {
			t.Fatalf("%d values: encoding not stable", n)
		}
		switch {
		case s.Dense() && len(b) != 3+denseBytes:
			t.Errorf("%d values: dense encoding of %d bytes", n, len(b))
		case !s.Dense() && len(b) > 3+5+3*n:
			t.Errorf("%d values: sparse encoding of %d bytes", n, len(b))
		}
		t.Logf("%d values: %d bytes encoded (dense %v)", n, len(b), s.Dense())
	}
}

// TestDecodeRefusesBadInput: each malformed encoding is refused with
// ErrInvalid, and leaves the sketch as it was.
func TestDecodeRefusesBadInput(t *testing.T) {
	sparse := func(entries ...uint64) []byte {
		b := []byte{1, 14, 0}
		b = append(b, byte(len(entries)))
		prev := uint64(0)
		for _, e := range entries {
			b = append(b, byte(e-prev), byte((e-prev)>>7)) // 2-byte uvarints
			b[len(b)-2] |= 0x80
			prev = e
		}
		return b
	}
	dense := append([]byte{1, 14, 1}, make([]byte, denseBytes)...)
	badReg := bytes.Clone(dense)
	badReg[3] = 63 // register 0 = 63 > 51
	for name, b := range map[string][]byte{
		"empty":             nil,
		"short":             {1, 14},
		"version":           {2, 14, 0, 0},
		"precision":         {1, 12, 0, 0},
		"form":              {1, 14, 2, 0},
		"dense short":       dense[:len(dense)-1],
		"dense long":        append(bytes.Clone(dense), 0),
		"dense register":    badReg,
		"sparse count":      {1, 14, 0, 5, 65},
		"sparse huge count": {1, 14, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"sparse zero value": sparse(64 << 0),
		"sparse value":      sparse(1<<6 | 60),
		"sparse order":      sparse(5<<6|1, 5<<6|2),
		"sparse index":      {1, 14, 0, 1, 0x81, 0x80, 0x80, 0x02}, // index 16384
		"sparse trailing":   append(sparse(3<<6|1), 0),
		"sparse truncated":  {1, 14, 0, 1, 0x81},
	} {
		s := fill(rand.New(rand.NewPCG(1, 2)), 10)
		before := s.Clone()
		err := s.UnmarshalBinary(b)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
		if !s.Equal(before) {
			t.Errorf("%s: the refused input changed the sketch", name)
		}
	}
}

// FuzzDecode: any input either decodes to a sketch that encodes and
// decodes again to the same registers, or is refused; none panics.
func FuzzDecode(f *testing.F) {
	for _, n := range []int{0, 3, 300, 10_000} {
		b, _ := fill(rand.New(rand.NewPCG(3, uint64(n))), n).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Sketch
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		e, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var d Sketch
		if err := d.UnmarshalBinary(e); err != nil || !d.Equal(&s) || d.Estimate() != s.Estimate() {
			t.Fatalf("re-encoded sketch does not decode to itself: %v", err)
		}
		s.Add(1)
		s.Merge(&d)
	})
}

func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var sparse, dense Sketch
	dense.Merge(fill(r, 100_000))
	b.Run("sparse", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if i%1000 == 0 {
				sparse = Sketch{}
			}
			sparse.Add(r.Uint64())
		}
	})
	b.Run("dense", func(b *testing.B) {
		for b.Loop() {
			dense.Add(r.Uint64())
		}
	})
}

func BenchmarkEstimate(b *testing.B) {
	s := fill(rand.New(rand.NewPCG(1, 2)), 100_000)
	for b.Loop() {
		s.Estimate()
	}
}
