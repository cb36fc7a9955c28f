package clickroll

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// window is one transaction's messages, rolled up as they arrive. Clicks
// are summed per link and day, per link and hour and per link, day and
// dimension value, a link being a (domain, code): a click's key is hashed
// once, its device, status, browser, OS, hour and edge mostly land in fixed
// slots of its link's sums, its visitor is appended to a list, and only its
// referrer and country (and a rare value) take a lookup of their own;
// adding a click allocates nothing once its link and values have been seen
// (the visitors' list grows with the clicks, then is reused). A window is
// reused, maps and all, by the next one (reset).
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
	hours map[uint64]int32 // (link slot, hour) → index in extra, for a link's other hours
	extra []hourSum
	// visits are the human clicks' visitor hashes, by link slot.
	visits []visit

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
	device    [8]counts // by clicks.Device (below 8: the decoder allows fewer)
	status    [len(commonStatuses)]counts
	browser   [familySlots]counts // by clicks.Browser
	os        [familySlots]counts // by clicks.OS
	noCountry counts
	own       counts // served by the link's own target (rule 0)
	edge      uint32 // value id + 1 of the edge counted in edgeN; 0 before the first
	edgeN     counts
	hour      int32 // hours since 1970, UTC, counted in hourN (when it has clicks)
	hourN     counts
}

// familySlots bounds the browser and OS families with slots of their own
// (the decoder knows fewer); a later one is a value of its own.
const familySlots = 16

type hourSum struct {
	slot, hour int32
	counts
}

type visit struct {
	slot    int32
	visitor uint64
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
		dims: make(map[uint64]int32), hours: make(map[uint64]int32), sources: make(map[[2]string]*SourceReport), latency: make(map[latKey]int64)}
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
	clear(w.hours)
	clear(w.sources)
	clear(w.latency)
	w.links, w.sums, w.extra, w.visits = w.links[:0], w.sums[:0], w.extra[:0], w.visits[:0]
}

const (
	msPerDay  = 24 * 60 * 60 * 1000
	msPerHour = 60 * 60 * 1000
)

// hourOf is the UTC hour of atMillis, in hours since 1970.
func hourOf(atMillis int64) int32 {
	h := atMillis / msPerHour
	if atMillis%msPerHour < 0 {
		h--
	}
	return int32(h)
}

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
		if c.Browser < familySlots {
			l.browser[c.Browser].add(c.Bot)
		} else {
			w.count(slot, w.dict.id(clickstats.DimBrowser, c.Browser.String()), c.Bot)
		}
		if c.OS < familySlots {
			l.os[c.OS].add(c.Bot)
		} else {
			w.count(slot, w.dict.id(clickstats.DimOS, c.OS.String()), c.Bot)
		}
		if c.Country == ([2]byte{}) {
			l.noCountry.add(c.Bot)
		} else {
			w.count(slot, w.dict.country(c.Country), c.Bot)
		}
		if c.Rule == 0 {
			l.own.add(c.Bot)
		}
		switch h := hourOf(c.At); {
		case l.hourN.clicks == 0:
			l.hour = h
			l.hourN.add(c.Bot)
		case l.hour == h:
			l.hourN.add(c.Bot)
		default: // a link's clicks in a second hour
			w.countHour(slot, h, c.Bot)
		}
		if !c.Bot && c.Visitor != 0 {
			w.visits = append(w.visits, visit{slot, c.Visitor})
		}
	}
	return nil
}

func (w *window) countHour(slot, hour int32, bot bool) {
	k := uint64(slot)<<32 | uint64(uint32(hour))
	i, ok := w.hours[k]
	if !ok {
		i = int32(len(w.extra))
		w.extra = append(w.extra, hourSum{slot: slot, hour: hour})
		w.hours[k] = i
	}
	w.extra[i].add(bot)
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

func hourTime(h int32) time.Time { return time.Unix(int64(h)*3600, 0).UTC() }

// rollup is the window as the store applies it; hours before fromHour
// (hours since 1970) are left out.
func (w *window) rollup(fromHour int32) *Rollup {
	r := &Rollup{Stream: clicks.Stream, Prev: w.prev, Last: w.last, Lost: w.lost,
		Links: make([]LinkDay, len(w.links)), Breakdown: make([]BreakdownDay, 0, len(w.sums)+6*len(w.links)),
		Hours: make([]LinkHour, 0, len(w.links)+len(w.extra))}
	w.sketches(r)
	hour := func(l *linkSum, h int32, c counts) {
		if h >= fromHour {
			r.Hours = append(r.Hours, LinkHour{Domain: l.domain, Code: l.code, Hour: hourTime(h), Clicks: c.clicks, BotClicks: c.bots})
		}
	}
	for i := range w.links {
		l := &w.links[i]
		day := dayTime(l.day)
		r.Links[i].Domain, r.Links[i].Code, r.Links[i].Day, r.Links[i].Clicks, r.Links[i].BotClicks = l.domain, l.code, day, l.clicks, l.bots
		r.Links[i].OwnClicks, r.Links[i].OwnBots = l.own.clicks, l.own.bots
		hour(l, l.hour, l.hourN)
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
		for b, c := range l.browser {
			if c.clicks != 0 {
				row(dimValue{clickstats.DimBrowser, clicks.Browser(b).String()}, c)
			}
		}
		for o, c := range l.os {
			if c.clicks != 0 {
				row(dimValue{clickstats.DimOS, clicks.OS(o).String()}, c)
			}
		}
		if l.noCountry.clicks != 0 {
			row(dimValue{clickstats.DimCountry, ""}, l.noCountry)
		}
	}
	for _, h := range w.extra {
		hour(&w.links[h.slot], h.hour, h.counts)
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

// sketches sets each link row's visitors: a sketch of the human visitors
// of its clicks.
func (w *window) sketches(r *Rollup) {
	slices.SortFunc(w.visits, func(a, b visit) int { return cmp.Compare(a.slot, b.slot) })
	for i := 0; i < len(w.visits); {
		slot := w.visits[i].slot
		s := &hll.Sketch{}
		for ; i < len(w.visits) && w.visits[i].slot == slot; i++ {
			s.Add(w.visits[i].visitor)
		}
		r.Links[slot].Visitors = s
	}
}

// Dimensions of the breakdowns.
const (
	dimReferrer = clickstats.DimReferrer
	dimDevice   = clickstats.DimDevice
	dimStatus   = clickstats.DimStatus
	dimEdge     = clickstats.DimEdge
	dimCountry  = clickstats.DimCountry
)

// values numbers the dimension values the roller has seen, so a window
// counts a click's values by small ids. It is kept across windows, and
// forgotten when it grows past maxValues (a flood of distinct referrer
// hosts), so its memory stays bounded. Not safe for concurrent use.
type values struct {
	ids       map[string]uint32 // dim + "\x00" + value → id
	referrers map[string]uint32 // referrer host → id
	statuses  map[uint16]uint32
	countries [26 * 26]uint32 // id + 1 of each country seen
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

// country is the id of a country: two upper-case letters (the decoder
// checks).
func (v *values) country(c [2]byte) uint32 {
	k := int(c[0]-'A')*26 + int(c[1]-'A')
	if k < 0 || k >= len(v.countries) {
		return v.id(dimCountry, string(c[:]))
	}
	if id := v.countries[k]; id != 0 {
		return id - 1
	}
	id := v.id(dimCountry, string(c[:]))
	v.countries[k] = id + 1
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
