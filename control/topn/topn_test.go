package topn

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// check fails t unless g keeps at most n values and m candidates, each
// kept value has a click, and kept plus other is total.
func check(t *testing.T, g *Group, n, m int, total Counts) {
	t.Helper()
	sum := g.Other
	for v, c := range g.Kept {
		if c.Clicks <= 0 || c.Bots < 0 || c.Bots > c.Clicks {
			t.Fatalf("kept %q with %+v", v, c)
		}
		sum.Add(c)
	}
	if sum != total {
		t.Fatalf("kept plus other is %+v; applied %+v", sum, total)
	}
	if len(g.Kept) > n || g.Candidates.Len() > m {
		t.Fatalf("%d kept, %d candidates; want at most %d and %d", len(g.Kept), g.Candidates.Len(), n, m)
	}
	if g.Other.Clicks < 0 || g.Other.Bots < 0 || g.Other.Bots > g.Other.Clicks {
		t.Fatalf("other %+v", g.Other)
	}
	var inCands int64
	g.Candidates.Each(func(_ string, count, err, bots int64) { inCands += count - err })
	if inCands > g.Other.Clicks {
		t.Fatalf("candidates count %d clicks since they became candidates; other holds %d", inCands, g.Other.Clicks)
	}
}

// roundTrip stores g as the store does (the candidates encoded) and reads
// it back.
func roundTrip(t *testing.T, g *Group) *Group {
	t.Helper()
	b, err := g.Candidates.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	out := &Group{Kept: maps.Clone(g.Kept), Other: g.Other}
	if err := out.Candidates.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return out
}

// batch draws k clicks over values by a skewed law (a few heavy values,
// a long tail), summed per value.
func batch(r *rand.Rand, k, values int) []Value {
	sums := map[string]*Value{}
	var out []Value
	for range k {
		i := int(float64(values) * r.Float64() * r.Float64() * r.Float64())
		v := fmt.Sprintf("v%05d", i)
		if sums[v] == nil {
			sums[v] = &Value{Value: v}
		}
		sums[v].Clicks++
		if r.IntN(5) == 0 {
			sums[v].Bots++
		}
	}
	for _, v := range sums {
		out = append(out, *v)
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestApplyKeepsEverySumAndBound: over many random batches (and limits
// that change between them), kept plus other is every click applied, the
// bounds hold, and applying a batch to a stored copy of the state gives
// the same state (the batch in another order included).
func TestApplyKeepsEverySumAndBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, lim := range [][2]int{{1, 1}, {3, 2}, {10, 10}, {100, 100}, {5, 50}} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			n, m := lim[0], lim[1]
			g := &Group{}
			var total Counts
			for i := range 200 {
				if i == 120 { // the operator lowers N, then raises it
					n = max(1, n/2)
				} else if i == 160 {
					n = lim[0] * 2
				}
				b := batch(r, 1+r.IntN(300), 400)
				stored := roundTrip(t, g)
				g.Apply(b, n, m)
				r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
				stored.Apply(b, n, m)
				if !maps.Equal(g.Kept, stored.Kept) || g.Other != stored.Other {
					t.Fatalf("batch %d applied twice to one state gave two states", i)
				}
				x, _ := g.Candidates.MarshalBinary()
				y, _ := stored.Candidates.MarshalBinary()
				if !bytes.Equal(x, y) {
					t.Fatalf("batch %d: candidates differ between the two applies", i)
				}
				for _, v := range b {
					total.Add(v.Counts)
				}
				check(t, g, n, m, total)
			}
		})
	}
}

// TestUnderTheLimitEveryValueIsKept: while a group has no more values
// than N, every value is kept with its exact counts and other is empty.
func TestUnderTheLimitEveryValueIsKept(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g := &Group{}
	want := map[string]Counts{}
	for range 50 {
		b := batch(r, 40, 100) // at most 100 values
		g.Apply(b, 100, 100)
		for _, v := range b {
			c := want[v.Value]
			c.Add(v.Counts)
			want[v.Value] = c
		}
	}
	if !maps.Equal(g.Kept, want) || g.Other != (Counts{}) || g.Candidates.Len() != 0 {
		t.Fatalf("kept %d values, other %+v, %d candidates; want the %d values exactly", len(g.Kept), g.Other, g.Candidates.Len(), len(want))
	}
}

// TestFloodFirstDoesNotKeepTheRealValuesOut: a flood of one-click values
// fills the places first; the real values that come after, a few clicks a
// batch each, are all kept in the end, each with at least its clicks
// since the flood ended minus what it had in other before its promotion.
func TestFloodFirstDoesNotKeepTheRealValuesOut(t *testing.T) {
	const n, m = 100, 100
	g := &Group{}
	var total Counts
	flood := 0
	for range 20 { // 20 batches of 5,000 invented hosts
		b := make([]Value, 5_000)
		for i := range b {
			b[i] = Value{Value: fmt.Sprintf("flood-%07d.example", flood), Counts: Counts{Clicks: 1, Bots: 1}}
			flood++
		}
		g.Apply(b, n, m)
		for _, v := range b {
			total.Add(v.Counts)
		}
	}
	check(t, g, n, m, total)
	// 20 real referrers, every batch 1 to 3 clicks each, some batches
	// with more flood.
	r := rand.New(rand.NewPCG(5, 6))
	real := map[string]int64{}
	for i := range 300 {
		var b []Value
		for k := range 20 {
			if r.IntN(3) == 0 {
				continue
			}
			v := Value{Value: fmt.Sprintf("real-%02d.example", k), Counts: Counts{Clicks: int64(1 + r.IntN(3))}}
			real[v.Value] += v.Clicks
			b = append(b, v)
		}
		if i%10 == 0 {
			for range 1000 {
				b = append(b, Value{Value: fmt.Sprintf("flood-%07d.example", flood), Counts: Counts{Clicks: 1, Bots: 1}})
				flood++
			}
		}
		g.Apply(b, n, m)
		for _, v := range b {
			total.Add(v.Counts)
		}
		check(t, g, n, m, total)
	}
	for v, clicks := range real {
		c, ok := g.Kept[v]
		if !ok {
			t.Errorf("%s (%d clicks) is not kept after the flood", v, clicks)
			continue
		}
		if c.Clicks > clicks || c.Clicks < clicks-clicks/10 {
			t.Errorf("%s kept with %d clicks; it had %d (want at most that, within 10%%)", v, c.Clicks, clicks)
		}
	}
	t.Logf("after %d flood hosts and 20 real ones: %d kept, other %d clicks, %d candidates", flood, len(g.Kept), g.Other.Clicks, g.Candidates.Len())
}

// TestHeavyValueAmongTheTailIsPromoted: a value that gets one click in
// most batches, among a tail of fresh one-click values, overtakes the
// kept tail.
func TestHeavyValueAmongTheTailIsPromoted(t *testing.T) {
	g := &Group{}
	tail := 0
	for i := range 500 {
		b := []Value{}
		for range 5 {
			b = append(b, Value{Value: fmt.Sprint("tail-", tail), Counts: Counts{Clicks: 1}})
			tail++
		}
		if i%4 != 0 {
			b = append(b, Value{Value: "steady.example", Counts: Counts{Clicks: 1}})
		}
		g.Apply(b, 10, 10)
	}
	if c, ok := g.Kept["steady.example"]; !ok || c.Clicks < 300 {
		t.Fatalf("steady.example (375 clicks) kept %v with %+v; want kept with most of its clicks", ok, c)
	}
}

// TestCandidatesEncoding: a summary decodes to itself; malformed encodings
// are refused with ErrInvalid and change nothing.
func TestCandidatesEncoding(t *testing.T) {
	g := &Group{}
	r := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		g.Apply(batch(r, 200, 1000), 5, 8)
	}
	b, err := g.Candidates.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var c Candidates
	if err := c.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if again, _ := c.MarshalBinary(); !bytes.Equal(again, b) || c.Len() != 8 {
		t.Fatalf("round trip changed the summary (%d candidates)", c.Len())
	}
	long := Candidates{entries: []candidate{{value: string(make([]byte, 256)), count: 1}}}
	if _, err := long.MarshalBinary(); err == nil {
		t.Fatal("a value of 256 bytes encoded")
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"version":      {2, 0, 0},
		"count":        {1, 0, 9, 1, 'a', 1, 0, 0},
		"huge count":   {1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"value length": {1, 0, 1, 9, 'a', 1, 0, 0},
		"err >= count": {1, 5, 1, 1, 'a', 2, 2, 0},
		"err > floor":  {1, 1, 1, 1, 'a', 5, 2, 0},
		"bots":         {1, 0, 1, 1, 'a', 2, 0, 3},
		"order":        {1, 0, 2, 1, 'b', 1, 0, 0, 1, 'a', 1, 0, 0},
		"duplicate":    {1, 0, 2, 1, 'a', 1, 0, 0, 1, 'a', 1, 0, 0},
		"trailing":     {1, 0, 1, 1, 'a', 1, 0, 0, 0},
		"truncated":    {1, 0, 1, 1, 'a', 1},
	} {
		before := c
		if err := c.UnmarshalBinary(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
		if again, _ := c.MarshalBinary(); !bytes.Equal(again, b) || c.floor != before.floor {
			t.Errorf("%s: the refused input changed the summary", name)
		}
	}
}

// FuzzCandidates: any input decodes to a summary whose encoding decodes
// to the same summary and that can be applied to, or is refused; none
// panics.
func FuzzCandidates(f *testing.F) {
	g := &Group{}
	g.Apply(batch(rand.New(rand.NewPCG(1, 1)), 100, 50), 3, 4)
	b, _ := g.Candidates.MarshalBinary()
	f.Add(b)
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var c Candidates
		if err := c.UnmarshalBinary(in); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		out, err := c.MarshalBinary()
		var d Candidates
		if err != nil || d.UnmarshalBinary(out) != nil {
			t.Fatalf("decoded summary encodes to %x (%v), which does not decode", out, err)
		}
		if again, _ := d.MarshalBinary(); !bytes.Equal(again, out) {
			t.Fatalf("%x decodes to another summary", out)
		}
		var other Counts
		c.Each(func(_ string, count, err, bots int64) { other.Add(Counts{Clicks: count - err, Bots: bots}) })
		g := &Group{Kept: map[string]Counts{"k": {Clicks: 1}}, Other: other, Candidates: c}
		g.Apply([]Value{{Value: "x", Counts: Counts{Clicks: 2}}}, 1, max(1, c.Len()))
		other.Add(Counts{Clicks: 3})
		check(t, g, 1, max(1, c.Len()), other)
	})
}

// BenchmarkFloodBatch is the cost of a batch of 10,000 new one-click
// values on a full group (a flood's transaction).
func BenchmarkFloodBatch(b *testing.B) {
	g := &Group{}
	v := 0
	mk := func() []Value {
		out := make([]Value, 10_000)
		for i := range out {
			out[i] = Value{Value: fmt.Sprint("flood-", v), Counts: Counts{Clicks: 1}}
			v++
		}
		return out
	}
	g.Apply(mk(), 100, 100)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		in := mk()
		b.StartTimer()
		g.Apply(in, 100, 100)
	}
}

// TestHeavyValueInAFloodedBatchIsPromoted: a value with a few dozen
// clicks in a batch of thousands of new one-click values, on a group whose
// places and candidates a flood filled, is kept after that batch: the
// batch's one-click values do not push it out of the candidates first.
func TestHeavyValueInAFloodedBatchIsPromoted(t *testing.T) {
	g := &Group{}
	host := 0
	flood := func(k int) []Value {
		b := make([]Value, k)
		for i := range b {
			b[i] = Value{Value: fmt.Sprintf("h%07d", host), Counts: Counts{Clicks: 1}}
			host++
		}
		return b
	}
	for range 10 {
		g.Apply(flood(10_000), 100, 100)
	}
	b := append(flood(11_000), Value{Value: "news.example", Counts: Counts{Clicks: 66}})
	g.Apply(b, 100, 100)
	if c := g.Kept["news.example"]; c.Clicks != 66 {
		t.Fatalf("news.example kept with %+v after a batch of 11,000 one-click values; want its 66 clicks", c)
	}
}
