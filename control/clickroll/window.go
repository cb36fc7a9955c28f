package clickroll

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// window is one transaction's messages, rolled up as they arrive. Clicks
// are summed per link and day and per link, day and dimension value, a
// link being a (domain, code): a click's key is hashed once, its device, status and edge mostly land in
// fixed slots of its link's sums, and only its referrer (and a rare value)
// takes a lookup of its own; adding a click allocates nothing once its link
// and values have been seen. A window is reused, maps and all, by the next
// one (reset).
type window struct {
	prev, last uint64 // the stored position before; the last sequence taken
	lost       uint64
	msgs       int           // messages taken, redeliveries included
	ack        jetstream.Msg // the last message taken: acknowledging it acknowledges all
	clicks     int64

	dict  *values
	view  clicks.View
	short map[shortKey]int32 // a code of up to 8 bytes, packed, and its domain → index in links of its first day's slot
	codes map[string]int32   // a longer code after its domain's 4 bytes → the same
	key   []byte             // scratch for a longer code's key
	days  map[uint64]int32   // (link slot of the code's first day, day) → slot, for a code's other days
	links []linkSum
	dims  map[uint64]int32 // (link slot, value id) → index in sums
	sums  []dimSum

	sources map[[2]string]*SourceReport
	latency map[latKey]int64
}

type counts struct{ clicks, bots int64 }

func (c *counts) add(bot bool) {
	c.clicks++
	if bot {
		c.bots++
	}
}

type linkSum struct {
	domain link.DomainID
	code   string
	day    int32 // days since 1970-01-01, UTC
	counts
	device [8]counts // by clicks.Device (below 8: the decoder allows fewer)
	status [len(commonStatuses)]counts
	edge   uint32 // value id + 1 of the edge counted in edgeN; 0 before the first
	edgeN  counts
}

// commonStatuses get slots of their own in a link's sums: the redirect
// types. Any other status is a value of its own.
var (
	commonStatuses    = [...]uint16{301, 302, 307, 308}
	commonStatusNames = [len(commonStatuses)]string{"301", "302", "307", "308"}
)

func statusSlot(s uint16) int {
	for i, c := range commonStatuses {
		if c == s {
			return i
		}
	}
	return -1
}

type dimSum struct {
	slot int32
	val  uint32
	counts
}

type latKey struct {
	day    time.Time
	bucket int
}

// shortKey is a link whose code packs into 8 bytes (packCode).
type shortKey struct {
	domain link.DomainID
	code   uint64
}

func newWindow(pos uint64, dict *values) *window {
	w := &window{dict: dict, short: make(map[shortKey]int32), codes: make(map[string]int32), days: make(map[uint64]int32),
		dims: make(map[uint64]int32), sources: make(map[[2]string]*SourceReport), latency: make(map[latKey]int64)}
	w.reset(pos)
	return w
}

// reset empties w for the transaction after pos, keeping its storage.
func (w *window) reset(pos uint64) {
	w.dict.reset()
	w.prev, w.last, w.lost, w.msgs, w.ack, w.clicks = pos, pos, 0, 0, nil, 0
	clear(w.short)
	clear(w.codes)
	clear(w.days)
	clear(w.dims)
	clear(w.sources)
	clear(w.latency)
	w.links, w.sums = w.links[:0], w.sums[:0]
}

const msPerDay = 24 * 60 * 60 * 1000

// dayOf is the UTC day of atMillis, in days since 1970-01-01.
func dayOf(atMillis int64) int32 {
	d := atMillis / msPerDay
	if atMillis%msPerDay < 0 {
		d-- // before 1970: floor, as clicks.DayOf truncates
	}
	return int32(d)
}

// add rolls one message up; edge names the edge when the message does not.
func (w *window) add(data []byte, edge string) error {
	if err := clicks.DecodeView(data, &w.view); err != nil {
		return err
	}
	b := &w.view
	if b.Edge == "" {
		b.Edge = edge
	}
	key := [2]string{b.Edge, b.Boot}
	src := w.sources[key]
	if src == nil {
		src = &SourceReport{Edge: b.Edge, Boot: b.Boot}
		w.sources[key] = src
	}
	src.Offered, src.Dropped = max(src.Offered, b.Offered), max(src.Dropped, b.Dropped)
	src.Applied += int64(len(b.Clicks))
	if b.Latency != nil {
		day := clicks.DayOf(b.At)
		for i, c := range b.Latency {
			if c != 0 {
				w.latency[latKey{day, i}] += int64(c)
			}
		}
		return nil
	}
	w.clicks += int64(len(b.Clicks))
	edgeID := w.dict.id(dimEdge, b.Edge) + 1
	for i := range b.Clicks {
		c := &b.Clicks[i]
		slot := w.slot(c.Domain, c.Code, dayOf(c.At))
		l := &w.links[slot]
		l.add(c.Bot)
		l.device[c.Device&7].add(c.Bot)
		if s := statusSlot(c.Status); s >= 0 {
			l.status[s].add(c.Bot)
		} else {
			w.count(slot, w.dict.status(c.Status), c.Bot)
		}
		switch l.edge {
		case edgeID:
			l.edgeN.add(c.Bot)
		case 0:
			l.edge = edgeID
			l.edgeN.add(c.Bot)
		default: // a link's clicks from a second edge
			w.count(slot, edgeID-1, c.Bot)
		}
		w.count(slot, w.dict.referrer(c.Referrer), c.Bot)
	}
	return nil
}

// packCode is a code of up to 8 bytes as a number: codes hold no zero
// byte (link.ValidCodeSyntax), so the zero padding keeps them apart.
func packCode(code []byte) (uint64, bool) {
	if len(code) > 8 {
		return 0, false
	}
	var k uint64
	for _, c := range code {
		k = k<<8 | uint64(c)
	}
	return k, true
}

// slot is the index in links of code of domain d on day, added if new.
// Generated codes (6 bytes) are looked up as numbers: no string to hash or
// compare.
func (w *window) slot(d link.DomainID, code []byte, day int32) int32 {
	var first int32
	var ok bool
	k, short := packCode(code)
	if short {
		first, ok = w.short[shortKey{d, k}]
	} else {
		w.key = binary.BigEndian.AppendUint32(w.key[:0], uint32(d))
		w.key = append(w.key, code...)
		first, ok = w.codes[string(w.key)]
	}
	if !ok {
		first = int32(len(w.links))
		w.links = append(w.links, linkSum{domain: d, code: string(code), day: day})
		if short {
			w.short[shortKey{d, k}] = first
		} else {
			w.codes[string(w.key)] = first
		}
		return first
	}
	if w.links[first].day == day {
		return first
	}
	dk := uint64(first)<<32 | uint64(uint32(day))
	s, ok := w.days[dk]
	if !ok {
		s = int32(len(w.links))
		w.links = append(w.links, linkSum{domain: d, code: w.links[first].code, day: day})
		w.days[dk] = s
	}
	return s
}

func (w *window) count(slot int32, val uint32, bot bool) {
	k := uint64(slot)<<32 | uint64(val)
	i, ok := w.dims[k]
	if !ok {
		i = int32(len(w.sums))
		w.sums = append(w.sums, dimSum{slot: slot, val: val})
		w.dims[k] = i
	}
	w.sums[i].add(bot)
}

func dayTime(d int32) time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// rollup is the window as the store applies it.
func (w *window) rollup() *Rollup {
	r := &Rollup{Stream: clicks.Stream, Prev: w.prev, Last: w.last, Lost: w.lost,
		Links: make([]LinkDay, len(w.links)), Breakdown: make([]BreakdownDay, 0, len(w.sums)+3*len(w.links))}
	for i := range w.links {
		l := &w.links[i]
		day := dayTime(l.day)
		r.Links[i] = LinkDay{Domain: l.domain, Code: l.code, Day: day, Clicks: l.clicks, BotClicks: l.bots}
		row := func(v dimValue, c counts) {
			r.Breakdown = append(r.Breakdown, BreakdownDay{Domain: l.domain, Code: l.code, Day: day, Dimension: v.dim, Value: v.value, Clicks: c.clicks, BotClicks: c.bots})
		}
		for d, c := range l.device {
			if c.clicks != 0 {
				row(dimValue{dimDevice, clicks.Device(d).String()}, c)
			}
		}
		for s, c := range l.status {
			if c.clicks != 0 {
				row(dimValue{dimStatus, commonStatusNames[s]}, c)
			}
		}
		if l.edge != 0 {
			row(w.dict.at(l.edge-1), l.edgeN)
		}
	}
	for _, s := range w.sums {
		l, v := &r.Links[s.slot], w.dict.at(s.val)
		r.Breakdown = append(r.Breakdown, BreakdownDay{Domain: l.Domain, Code: l.Code, Day: l.Day, Dimension: v.dim, Value: v.value, Clicks: s.clicks, BotClicks: s.bots})
	}
	for _, s := range w.sources {
		r.Sources = append(r.Sources, *s)
	}
	for k, n := range w.latency {
		r.Latency = append(r.Latency, LatencyBucket{Day: k.day, Bucket: k.bucket, Count: n})
	}
	return r
}

// Dimensions of the breakdowns.
const (
	dimReferrer = "referrer"
	dimDevice   = "device"
	dimStatus   = "status"
	dimEdge     = "edge"
)

// values numbers the dimension values the roller has seen, so a window
// counts a click's values by small ids. It is kept across windows, and
// forgotten when it grows past maxValues (a flood of distinct referrer
// hosts), so its memory stays bounded. Not safe for concurrent use.
type values struct {
	ids       map[string]uint32 // dim + "\x00" + value → id
	referrers map[string]uint32 // referrer host → id
	statuses  map[uint16]uint32
	all       []dimValue
}

type dimValue struct{ dim, value string }

const maxValues = 1 << 16

func newValues() *values {
	return &values{ids: map[string]uint32{}, referrers: map[string]uint32{}, statuses: map[uint16]uint32{}}
}

func (v *values) at(id uint32) dimValue { return v.all[id] }

// reset forgets every value when there are too many; only between windows
// (a window holds ids).
func (v *values) reset() {
	if len(v.all) > maxValues {
		*v = *newValues()
	}
}

func (v *values) id(dim, value string) uint32 {
	k := dim + "\x00" + value
	if id, ok := v.ids[k]; ok {
		return id
	}
	id := uint32(len(v.all))
	v.all = append(v.all, dimValue{dim: dim, value: strings.Clone(value)})
	v.ids[k] = id
	return id
}

func (v *values) referrer(host []byte) uint32 {
	if id, ok := v.referrers[string(host)]; ok {
		return id
	}
	id := v.id(dimReferrer, string(host))
	v.referrers[v.all[id].value] = id
	return id
}

func (v *values) status(s uint16) uint32 {
	if id, ok := v.statuses[s]; ok {
		return id
	}
	id := v.id(dimStatus, strconv.Itoa(int(s)))
	v.statuses[s] = id
	return id
}
