// Package topn bounds the values counted apart in one dimension of one
// link's (or tenant's) day: at most N values keep counts of their own, and
// every other click is summed as "other", so a flood of invented referrer
// hosts cannot grow a table without bound.
//
// Which values are kept is decided by Group.Apply from the stored state
// and a batch alone (ties broken by the values' bytes, never by map order),
// so a batch applied again to the same state gives the same rows: what
// exactly-once rollups need. Its guarantees:
//
//   - Nothing is lost: the kept counts plus other equal every click applied,
//     clicks and bots alike.
//   - At most N values are kept, and the candidates are at most M.
//   - A kept value's count is exact from the moment it was last kept: a
//     lower bound of its true count, short of it by what it had in other
//     before (its candidate error, at most other/M when it was promoted).
//   - First come is not first kept for ever: values in other are tracked
//     by a Space-Saving summary of M candidates (Metwally et al., 2005),
//     and a candidate whose clicks counted since it became one exceed the
//     least kept value's takes that value's place (the evicted count goes
//     to other, and the evicted value becomes a candidate). So a flood of
//     one-click hosts that filled the N places first gives them up to the
//     first real referrer that gets more clicks than the least of them.
//     Space-Saving keeps in the summary any value whose clicks in other
//     exceed other/M.
package topn

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Counts are clicks and, of them, bots.
type Counts struct{ Clicks, Bots int64 }

// Add adds o to c.
func (c *Counts) Add(o Counts) { c.Clicks, c.Bots = c.Clicks+o.Clicks, c.Bots+o.Bots }

// Sub takes o from c.
func (c *Counts) Sub(o Counts) { c.Clicks, c.Bots = c.Clicks-o.Clicks, c.Bots-o.Bots }

// Value is one value's counts.
type Value struct {
	Value string
	Counts
}

// Group is one dimension of one link's or tenant's day, as stored.
type Group struct {
	Kept       map[string]Counts // at most N values, each with at least one click
	Other      Counts
	Candidates Candidates // values counted in Other
}

// Apply adds batch (each value once) to g, keeping at most n values and m
// candidates (both at least 1). Values already kept add to their counts;
// new ones take free places, the most clicked of the batch first; the
// rest go to Other and the candidates, the least clicked first; then
// candidates are promoted while one has counted more clicks than the least
// kept value.
func (g *Group) Apply(batch []Value, n, m int) {
	if g.Kept == nil {
		g.Kept = map[string]Counts{}
	}
	order := slices.Clone(batch)
	slices.SortFunc(order, func(a, b Value) int {
		return cmp.Or(cmp.Compare(b.Clicks, a.Clicks), strings.Compare(a.Value, b.Value))
	})
	rest := order[:0]
	for _, v := range order {
		if c, ok := g.Kept[v.Value]; ok {
			c.Add(v.Counts)
			g.Kept[v.Value] = c
		} else if len(g.Kept) < n && v.Clicks > 0 {
			c := v.Counts
			if i, ok := g.Candidates.find(v.Value); ok { // a place freed since
				c.Add(g.Candidates.take(i, &g.Other))
			}
			g.Kept[v.Value] = c
		} else {
			rest = append(rest, v)
		}
	}
	// The rest are counted in other, and become candidates least clicked
	// first: a batch's many one-click values replace one another at the
	// bottom of the summary, and do not push out the batch's heavier
	// values before they can be promoted.
	for i := len(rest) - 1; i >= 0; i-- {
		g.Other.Add(rest[i].Counts)
		g.Candidates.add(rest[i].Value, rest[i].Counts, m)
	}
	for len(g.Kept) > n { // n was lowered
		k, c := g.least()
		delete(g.Kept, k)
		g.Other.Add(c)
		g.Candidates.add(k, c, m)
	}
	for len(g.Kept) < n && len(g.Candidates.entries) > 0 { // n was raised
		i := g.Candidates.best()
		v := g.Candidates.entries[i].value
		g.Kept[v] = g.Candidates.take(i, &g.Other)
	}
	for len(g.Kept) == n && len(g.Candidates.entries) > 0 {
		i := g.Candidates.best()
		e := g.Candidates.entries[i]
		k, c := g.least()
		if e.clicks() <= c.Clicks {
			break
		}
		// Each swap raises the kept clicks' sum, and the evicted value's
		// candidate count is its kept count, no more than the new least:
		// the loop ends.
		g.Kept[e.value] = g.Candidates.take(i, &g.Other)
		delete(g.Kept, k)
		g.Other.Add(c)
		g.Candidates.add(k, c, m)
	}
}

// least is the kept value with the fewest clicks (of equals, the greatest
// value: the one evicted first).
func (g *Group) least() (string, Counts) {
	var key string
	var min Counts
	first := true
	for k, c := range g.Kept {
		if first || c.Clicks < min.Clicks || c.Clicks == min.Clicks && k > key {
			key, min, first = k, c, false
		}
	}
	return key, min
}

// Candidates is a Space-Saving summary of the values counted in other:
// each candidate's count is at least the clicks it had in other, and
// exceeds them by at most its error; count minus error is exactly the
// clicks it got since it became a candidate, and bots the bots among them.
// The zero value is empty.
type Candidates struct {
	entries []candidate // sorted by value
	// floor is the largest count a candidate had when it was replaced:
	// no value outside the summary had more clicks in other. A value
	// that takes a free place starts from it, so the summary's counts
	// stay upper bounds after promotions free places.
	floor int64
}

type candidate struct {
	value      string
	count, err int64
	bots       int64 // bots among the count-err clicks
}

func (e *candidate) clicks() int64 { return e.count - e.err }

// Len is the number of candidates.
func (c *Candidates) Len() int { return len(c.entries) }

func (c *Candidates) find(v string) (int, bool) {
	return slices.BinarySearchFunc(c.entries, v, func(e candidate, v string) int { return strings.Compare(e.value, v) })
}

// add counts n clicks of v, keeping at most m candidates: a new value
// replaces the candidate with the smallest count (of equals, the greatest
// value), inheriting that count as its error.
func (c *Candidates) add(v string, n Counts, m int) {
	if n.Clicks <= 0 {
		return
	}
	i, ok := c.find(v)
	if ok {
		c.entries[i].count += n.Clicks
		c.entries[i].bots += n.Bots
		return
	}
	e := candidate{value: v, count: c.floor + n.Clicks, err: c.floor, bots: n.Bots}
	if len(c.entries) >= m {
		j := 0
		for k := range c.entries {
			if a, b := &c.entries[k], &c.entries[j]; a.count < b.count || a.count == b.count && a.value > b.value {
				j = k
			}
		}
		min := c.entries[j].count
		c.floor = max(c.floor, min)
		e.count, e.err = min+n.Clicks, min
		c.remove(j)
		i, _ = c.find(v)
	}
	c.entries = slices.Insert(c.entries, i, e)
}

// best is the index of the candidate with the most clicks counted since
// it became one (of equals, the least value).
func (c *Candidates) best() int {
	j := 0
	for k := range c.entries {
		if a, b := &c.entries[k], &c.entries[j]; a.clicks() > b.clicks() {
			j = k
		}
	}
	return j
}

// take removes candidate i and moves the clicks it counted since it
// became one out of other: they are its own.
func (c *Candidates) take(i int, other *Counts) Counts {
	e := c.entries[i]
	c.remove(i)
	moved := Counts{Clicks: e.clicks(), Bots: e.bots}
	other.Sub(moved)
	return moved
}

func (c *Candidates) remove(i int) { c.entries = slices.Delete(c.entries, i, i+1) }

// Each calls f with every candidate, by value: its count, error and the
// bots among count minus error.
func (c *Candidates) Each(f func(value string, count, err, bots int64)) {
	for _, e := range c.entries {
		f(e.value, e.count, e.err, e.bots)
	}
}

const encodingVersion = 1

// MaxValueLen is the longest value a candidate keeps (an encoding limit;
// stored values are shorter).
const MaxValueLen = 255

// AppendBinary appends c's encoding to b: a version byte (1), the floor,
// the count of candidates, then each by value: its length (a byte) and
// bytes, count, error and bots (uvarints). A value longer than MaxValueLen
// is an error.
func (c *Candidates) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(c.floor))
	b = binary.AppendUvarint(b, uint64(len(c.entries)))
	for _, e := range c.entries {
		if len(e.value) > MaxValueLen {
			return nil, fmt.Errorf("topn: candidate value of %d bytes", len(e.value))
		}
		b = append(b, byte(len(e.value)))
		b = append(b, e.value...)
		b = binary.AppendUvarint(b, uint64(e.count))
		b = binary.AppendUvarint(b, uint64(e.err))
		b = binary.AppendUvarint(b, uint64(e.bots))
	}
	return b, nil
}

// MarshalBinary returns c's encoding.
func (c *Candidates) MarshalBinary() ([]byte, error) { return c.AppendBinary(nil) }

// ErrInvalid is wrapped by every decoding error.
var ErrInvalid = errors.New("topn: invalid candidates")

// maxDecoded bounds the candidates a decoded summary may hold.
const maxDecoded = 1 << 16

// UnmarshalBinary replaces c with the summary b encodes, validating all of
// it: version, values strictly increasing, 0 <= error <= floor, error < count,
// bots <= count - error, no trailing bytes. On error c is unchanged.
func (c *Candidates) UnmarshalBinary(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrInvalid, what) }
	if len(b) < 1 || b[0] != encodingVersion {
		return bad("version")
	}
	b = b[1:]
	uv := func() (int64, bool) {
		v, k := binary.Uvarint(b)
		if k <= 0 || v > 1<<62 {
			return 0, false
		}
		b = b[k:]
		return int64(v), true
	}
	floor, ok := uv()
	if !ok {
		return bad("floor")
	}
	n, ok := uv()
	if !ok || n > maxDecoded || n > int64(len(b)/4) { // 4 bytes at least each
		return bad("count")
	}
	out := make([]candidate, 0, n)
	for i := range n {
		if len(b) < 1 || int(b[0]) > len(b)-1 {
			return bad("value")
		}
		l := 1 + int(b[0])
		e := candidate{value: string(b[1:l])}
		b = b[l:]
		var ok1, ok2, ok3 bool
		e.count, ok1 = uv()
		e.err, ok2 = uv()
		e.bots, ok3 = uv()
		if !ok1 || !ok2 || !ok3 || e.err >= e.count || e.err > floor || e.bots > e.count-e.err {
			return bad("counts")
		}
		if i > 0 && out[i-1].value >= e.value {
			return bad("order")
		}
		out = append(out, e)
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	c.entries, c.floor = out, floor
	return nil
}
