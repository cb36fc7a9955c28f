package postgres

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/hll"
	"github.com/edgelink/edgelink/control/topn"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// clickColumns are the dimension values counted in columns of
// link_clicks_daily (schemas 010 and 017) rather than in rows of
// link_click_values_daily: the device classes, the redirect statuses, no
// referrer, the browser and OS families, and an unknown country. Value i
// is counted in column clickColumns[i].column, its bots in column_bots.
var clickColumns = func() []struct{ dim, value, column string } {
	cols := []struct{ dim, value, column string }{
		{"device", "unknown", "device_unknown"}, {"device", "desktop", "device_desktop"}, {"device", "mobile", "device_mobile"},
		{"device", "tablet", "device_tablet"}, {"device", "tv", "device_tv"},
		{"status", "301", "status_301"}, {"status", "302", "status_302"}, {"status", "307", "status_307"}, {"status", "308", "status_308"},
		{"referrer", "", "referrer_none"},
		{"country", "", "country_none"},
	}
	for b, col := range map[clicks.Browser]string{clicks.BrowserUnknown: "unknown", clicks.BrowserOther: "other", clicks.BrowserChrome: "chrome",
		clicks.BrowserSafari: "safari", clicks.BrowserFirefox: "firefox", clicks.BrowserEdge: "edge", clicks.BrowserOpera: "opera",
		clicks.BrowserSamsung: "samsung", clicks.BrowserInApp: "in_app", clicks.BrowserIE: "ie", clicks.BrowserYandex: "yandex", clicks.BrowserUC: "uc"} {
		cols = append(cols, struct{ dim, value, column string }{"browser", b.String(), "browser_" + col})
	}
	for o, col := range map[clicks.OS]string{clicks.OSUnknown: "unknown", clicks.OSOther: "other", clicks.OSWindows: "windows", clicks.OSMacOS: "macos",
		clicks.OSIOS: "ios", clicks.OSIPadOS: "ipados", clicks.OSAndroid: "android", clicks.OSLinux: "linux", clicks.OSChromeOS: "chromeos",
		clicks.OSHarmonyOS: "harmonyos"} {
		cols = append(cols, struct{ dim, value, column string }{"os", o.String(), "os_" + col})
	}
	// One order, whatever the maps': the statements are built from it.
	slices.SortStableFunc(cols[11:], func(a, b struct{ dim, value, column string }) int { return strings.Compare(a.column, b.column) })
	return cols
}()

// clickColumnIndex is the index in clickColumns of a dimension value.
var clickColumnIndex = func() map[[2]string]int {
	m := make(map[[2]string]int, len(clickColumns))
	for i, c := range clickColumns {
		m[[2]string{c.dim, c.value}] = i
	}
	return m
}()

// tenantDims are the dimensions a tenant's breakdown keeps (not status or
// edge: a link's settings and the platform's machines).
var tenantDims = map[string]bool{clickstats.DimReferrer: true, clickstats.DimDevice: true, clickstats.DimBrowser: true, clickstats.DimOS: true,
	clickstats.DimCountry: true, clickstats.DimUTMSource: true, clickstats.DimUTMMedium: true, clickstats.DimUTMCampaign: true}

func epochDay(t time.Time) int32 { return int32(t.Unix() / 86400) }

func dayDate(d int32) time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// linkFound is what the authority says of a link the rollup did not know.
type linkFound struct {
	tenant int64
	utm    clickroll.UTM
}

// clickBatch is a rollup as the statements write it: its rows, each table's
// as the columns of one statement, sorted by key (consecutive upserts land
// on the same index and heap pages).
type clickBatch struct {
	// Link day rows, of links the authority has, by (domain, code, day).
	domains      []int32
	codes        []string
	days         []int32 // days since 1970-01-01
	clicks, bots []int64
	cols         [][]int64 // per clickColumns entry i: clicks at 2i, bots at 2i+1
	visitors     []int64   // the merged estimate where sketches[i] is set
	sketches     [][]byte  // the merged sketch when it changed; nil: unchanged
	linkSketch   []*hll.Sketch
	tenantOf     []int64 // each link row's tenant
	tenantDays   map[tenantDay]*tenantDayRow
	perDay       map[int32]*[3]int64 // clicks, bots, unknown
	total        int64
	linkHours    []clickroll.LinkHour // of links the authority has, sorted
	tenantHours  map[tenantHour]*topn.Counts
	linkValues   valueSet // per (link row, dimension): the values
	tenantValues valueSet
	tenantSums   map[tenantValue]topn.Counts // the tenant's values, summed over its links
	ordOf        map[linkKey]int32           // link row ordinal (1-based) of (domain, code, day)
}

type linkKey struct {
	domain link.DomainID
	code   string
	day    int32
}

type tenantDay struct {
	tenant int64
	day    int32
}

type tenantHour struct {
	tenant int64
	hour   int64 // Unix seconds
}

type tenantDayRow struct {
	topn.Counts
	sketch  *hll.Sketch // the rollup's visitors of the tenant's day
	visits  int64       // the merged estimate
	encoded []byte      // the merged sketch if it changed
}

// valueGroup is one dimension of one link's day (link, an ordinal, set)
// or one tenant's day.
type valueGroup struct {
	link   int32
	tenant int64
	day    int32
	dim    string
}

// newClickBatch sorts and sums r: link rows whose tenant is neither in r
// nor found count as unknown clicks only.
func newClickBatch(r *clickroll.Rollup, found map[int]linkFound) *clickBatch {
	b := &clickBatch{cols: make([][]int64, 2*len(clickColumns)), tenantDays: map[tenantDay]*tenantDayRow{}, perDay: map[int32]*[3]int64{},
		tenantHours: map[tenantHour]*topn.Counts{}, tenantSums: map[tenantValue]topn.Counts{}, ordOf: map[linkKey]int32{}}
	n := len(r.Links)
	b.domains, b.codes, b.days = make([]int32, 0, n), make([]string, 0, n), make([]int32, 0, n)
	b.clicks, b.bots, b.visitors, b.sketches = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([][]byte, 0, n)
	b.linkSketch, b.tenantOf = make([]*hll.Sketch, 0, n), make([]int64, 0, n)
	for c := range b.cols {
		b.cols[c] = make([]int64, 0, n)
	}
	b.linkValues.rows = make([]valueRow, 0, len(r.Breakdown)+3*n)
	order := make([]int, len(r.Links))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, c := &r.Links[i], &r.Links[j]
		return cmp.Or(cmp.Compare(a.Domain, c.Domain), strings.Compare(a.Code, c.Code), a.Day.Compare(c.Day))
	})
	for _, i := range order {
		l := &r.Links[i]
		day := epochDay(l.Day)
		pd := b.perDay[day]
		if pd == nil {
			pd = new([3]int64)
			b.perDay[day] = pd
		}
		pd[0], pd[1] = pd[0]+l.Clicks, pd[1]+l.BotClicks
		b.total += l.Clicks
		tenant, utm := l.Tenant, l.UTM
		if f, ok := found[i]; ok {
			tenant, utm = f.tenant, f.utm
		}
		if tenant == 0 {
			pd[2] += l.Clicks
			continue
		}
		if _, dup := b.ordOf[linkKey{l.Domain, l.Code, day}]; dup {
			panic(fmt.Sprintf("clickroll rollup: link %d/%s day %d twice", l.Domain, l.Code, day))
		}
		b.domains, b.codes, b.days = append(b.domains, int32(l.Domain)), append(b.codes, l.Code), append(b.days, day)
		b.clicks, b.bots = append(b.clicks, l.Clicks), append(b.bots, l.BotClicks)
		for c := range b.cols {
			b.cols[c] = append(b.cols[c], 0)
		}
		b.visitors, b.sketches = append(b.visitors, 0), append(b.sketches, nil)
		b.linkSketch, b.tenantOf = append(b.linkSketch, l.Visitors), append(b.tenantOf, tenant)
		b.ordOf[linkKey{l.Domain, l.Code, day}] = int32(len(b.codes))
		td := b.tenantDays[tenantDay{tenant, day}]
		if td == nil {
			td = &tenantDayRow{}
			b.tenantDays[tenantDay{tenant, day}] = td
		}
		td.Add(topn.Counts{Clicks: l.Clicks, Bots: l.BotClicks})
		if l.Visitors != nil {
			if td.sketch == nil {
				td.sketch = &hll.Sketch{}
			}
			td.sketch.Merge(l.Visitors)
		}
		// The UTM of the link's own target (rule 0). Issue 23: a rule's
		// clicks go to its target's UTM here, once rules are stored.
		if own := (topn.Counts{Clicks: l.OwnClicks, Bots: l.OwnBots}); own.Clicks > 0 {
			for _, dv := range [3][2]string{{clickstats.DimUTMSource, utm.Source}, {clickstats.DimUTMMedium, utm.Medium}, {clickstats.DimUTMCampaign, utm.Campaign}} {
				if dv[1] != "" {
					b.value(int32(len(b.codes)), tenant, day, dv[0], dv[1], own)
				}
			}
		}
	}
	for _, v := range r.Breakdown {
		day := epochDay(v.Day)
		n, ok := b.ordOf[linkKey{v.Domain, v.Code, day}]
		if !ok {
			// A breakdown of a link the authority does not have (its
			// clicks are unknown ones), or without its link's row.
			continue
		}
		c := topn.Counts{Clicks: v.Clicks, Bots: v.BotClicks}
		if i, ok := clickColumnIndex[[2]string{v.Dimension, v.Value}]; ok {
			b.cols[2*i][n-1] += c.Clicks
			b.cols[2*i+1][n-1] += c.Bots
			if tenantDims[v.Dimension] {
				b.tenantValue(b.tenantOf[n-1], day, v.Dimension, v.Value, c)
			}
			continue
		}
		b.value(n, b.tenantOf[n-1], day, v.Dimension, v.Value, c)
	}
	for _, h := range r.Hours {
		n, ok := b.ordOf[linkKey{h.Domain, h.Code, epochDay(h.Hour)}]
		if !ok {
			continue
		}
		b.linkHours = append(b.linkHours, h)
		th := b.tenantHours[tenantHour{b.tenantOf[n-1], h.Hour.Unix()}]
		if th == nil {
			th = &topn.Counts{}
			b.tenantHours[tenantHour{b.tenantOf[n-1], h.Hour.Unix()}] = th
		}
		th.Add(topn.Counts{Clicks: h.Clicks, Bots: h.BotClicks})
	}
	slices.SortFunc(b.linkHours, func(a, c clickroll.LinkHour) int {
		return cmp.Or(cmp.Compare(a.Domain, c.Domain), strings.Compare(a.Code, c.Code), a.Hour.Compare(c.Hour))
	})
	b.finishValues()
	return b
}

// value counts a value of a link's day (each comes once: the window sums
// them), and of its tenant's if the tenant keeps the dimension.
func (b *clickBatch) value(ord int32, tenant int64, day int32, dim, val string, c topn.Counts) {
	b.linkValues.rows = append(b.linkValues.rows, valueRow{g: valueGroup{link: ord, day: day, dim: dim}, val: val, Counts: c})
	if tenantDims[dim] {
		b.tenantValue(tenant, day, dim, val, c)
	}
}

func (b *clickBatch) tenantValue(tenant int64, day int32, dim, val string, c topn.Counts) {
	k := tenantValue{valueGroup{tenant: tenant, day: day, dim: dim}, val}
	v := b.tenantSums[k]
	v.Add(c)
	b.tenantSums[k] = v
}

type tenantValue struct {
	g   valueGroup
	val string
}

// finishValues sorts the value rows of links and tenants by group and
// value.
func (b *clickBatch) finishValues() {
	b.tenantValues.rows = make([]valueRow, 0, len(b.tenantSums))
	for k, c := range b.tenantSums {
		b.tenantValues.rows = append(b.tenantValues.rows, valueRow{g: k.g, val: k.val, Counts: c})
	}
	b.linkValues.finish()
	b.tenantValues.finish()
}

// valueSet is value rows sorted by group and value, and where each
// group's are.
type valueSet struct {
	rows []valueRow
	at   map[valueGroup][2]int // [start, end) in rows
}

type valueRow struct {
	g   valueGroup
	val string
	topn.Counts
}

func compareGroups(a, c valueGroup) int {
	return cmp.Or(cmp.Compare(a.link, c.link), cmp.Compare(a.tenant, c.tenant), cmp.Compare(a.day, c.day), strings.Compare(a.dim, c.dim))
}

func (vs *valueSet) finish() {
	slices.SortFunc(vs.rows, func(a, c valueRow) int { return cmp.Or(compareGroups(a.g, c.g), strings.Compare(a.val, c.val)) })
	vs.at = map[valueGroup][2]int{}
	for i := 0; i < len(vs.rows); {
		j := i + 1
		for j < len(vs.rows) && vs.rows[j].g == vs.rows[i].g {
			j++
		}
		vs.at[vs.rows[i].g] = [2]int{i, j}
		i = j
	}
}

// values are group g's rows.
func (vs *valueSet) values(g valueGroup) []valueRow {
	r := vs.at[g]
	return vs.rows[r[0]:r[1]]
}

// valueArrays are the value rows of one table for the upsert, in key
// order.
type valueArrays struct {
	links              []int32 // link row ordinals (link values)
	tenants            []int64 // (tenant values)
	days               []int32
	dims, vals         []string
	valClicks, valBots []int64
}

// valueRows splits groups: those with at most n values in the rollup go to
// the upsert (returned as arrays); the others are bounded in Go from the
// start (returned as groups to bound), their rows never written only to be
// evicted.
func valueRows(vs *valueSet, n int) (*valueArrays, []valueGroup) {
	a := &valueArrays{}
	var over []valueGroup
	for i := 0; i < len(vs.rows); {
		g := vs.rows[i].g
		r := vs.at[g]
		if r[1]-r[0] > n {
			over = append(over, g)
			i = r[1]
			continue
		}
		for ; i < r[1]; i++ {
			v := &vs.rows[i]
			a.links, a.tenants, a.days = append(a.links, g.link), append(a.tenants, g.tenant), append(a.days, g.day)
			a.dims, a.vals = append(a.dims, g.dim), append(a.vals, v.val)
			a.valClicks, a.valBots = append(a.valClicks, v.Clicks), append(a.valBots, v.Bots)
		}
	}
	return a, over
}
