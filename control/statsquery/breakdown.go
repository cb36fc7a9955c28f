package statsquery

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/link"
)

// Limits of a breakdown's values per dimension.
const (
	DefaultLimit = 10
	MaxLimit     = 100
)

// LinkDimensions are the dimensions of a link's breakdown, in the order
// answers list them; TenantDimensions a tenant's (the tenant rollups keep
// no status or edge).
var (
	LinkDimensions = []string{clickstats.DimCountry, clickstats.DimReferrer, clickstats.DimBrowser, clickstats.DimOS,
		clickstats.DimDevice, clickstats.DimUTMSource, clickstats.DimUTMMedium, clickstats.DimUTMCampaign,
		clickstats.DimStatus, clickstats.DimEdge}
	TenantDimensions = LinkDimensions[:8]
)

// ParseDimensions reads dimension names (comma separated; "" is every
// dimension of the scope), keeping the order of LinkDimensions and each
// once. A name the scope has not is an error naming those it has.
func ParseDimensions(v string, forLink bool) ([]string, error) {
	known := TenantDimensions
	if forLink {
		known = LinkDimensions
	}
	if v == "" {
		return slices.Clone(known), nil
	}
	if len(v) > 200 {
		return nil, errorf("dimension is %d bytes long: name at most the %d dimensions, comma separated", len(v), len(known))
	}
	want := map[string]bool{}
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if !slices.Contains(known, d) {
			return nil, errorf("unknown dimension %.*q; the dimensions are %s", maxValueLen, d, strings.Join(known, ", "))
		}
		want[d] = true
	}
	var out []string
	for _, d := range known {
		if want[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

// ParseLimit reads a breakdown's values per dimension: 1 to MaxLimit,
// def when v is empty.
func ParseLimit(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, errorf("limit must be a whole number from 1 to %d, not %.*q", MaxLimit, maxValueLen, v)
	}
	return n, nil
}

// Value is the clicks of one value of a dimension.
type Value struct {
	Value string // "" is none: no referrer, no country known
	Counts
}

// Dimension is the clicks over a breakdown's days by one dimension:
// Values, then Other, then None sum to the breakdown's Totals.
type Dimension struct {
	Name   string
	Values []Value // largest first (of equals, by value), at most the limit
	// Other sums the values not listed: past the limit, or not kept by
	// the rollups (at most their --click-top-values per day).
	Other Counts
	// None is the clicks without a value of the dimension: for UTM
	// parameters, clicks on a target that names none (or served by a
	// rule's target); for the others, clicks rolled up before the
	// dimension was recorded (schema 017: browser, OS, country).
	None Counts
}

// Breakdown is a scope's clicks over whole UTC days by dimension.
type Breakdown struct {
	// FirstDay and LastDay are the UTC days read, both included.
	FirstDay, LastDay time.Time
	// Approximate says those days are not the range's own: the range is in
	// another zone, or not whole days (UTCDays).
	Approximate bool
	Totals      Counts
	VisitorDays int64 // the days' unique visitors, summed
	Dimensions  []Dimension
}

// UTCDays are the UTC days a breakdown of r reads, both included: those
// nearest to it (each of r's ends moves to the nearest UTC midnight, of
// two equally near the one of its own date), at least one. approximate
// says they are not r's own.
func UTCDays(r Range) (first, last time.Time, approximate bool) {
	from := splitPoint(r.From, dateIn(r.From, r.Loc), maxInstant)
	to := splitPoint(r.To, dateIn(r.To, r.Loc), maxInstant)
	if !from.Before(to) {
		from, to = r.From.Truncate(day), ceilDay(r.To)
	}
	return from, to.Add(-day), !from.Equal(r.From) || !to.Equal(r.To)
}

// maxInstant is a time after every range: splitPoint before it moves
// only to UTC midnights.
var maxInstant = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)

// dateIn is t's date in loc, as a UTC midnight of that date.
func dateIn(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// ReadBreakdown reads the clicks of sc over the UTC days of r (UTCDays)
// by each of dims, at most limit values each, largest first.
func ReadBreakdown(ctx context.Context, rd Reader, sc Scope, r Range, dims []string, limit int) (Breakdown, error) {
	first, last, approx := UTCDays(r)
	b := Breakdown{FirstDay: first, LastDay: last, Approximate: approx}
	days, err := sc.days(ctx, rd, first, last)
	if err != nil {
		return Breakdown{}, err
	}
	for _, d := range days {
		b.Totals.Add(countsOf(d.Clicks, d.BotClicks))
		b.VisitorDays += d.Visitors
	}
	if len(dims) == 0 {
		return b, nil
	}
	q := clickstats.BreakdownQuery{From: first, To: last, Dimensions: dims, Top: limit}
	var rows []clickstats.Breakdown
	if sc.Link != nil {
		rows, err = rd.LinkBreakdown(ctx, sc.Link.Domain, sc.Link.Code, q)
	} else {
		rows, err = rd.TenantBreakdown(ctx, sc.Tenant, q)
	}
	if err != nil {
		return Breakdown{}, err
	}
	for _, name := range dims {
		dim := Dimension{Name: name, Values: []Value{}}
		var listed Counts
		for _, row := range rows {
			if row.Dimension != name {
				continue
			}
			c := countsOf(row.Clicks, row.BotClicks)
			listed.Add(c)
			if row.Other {
				dim.Other.Add(c)
			} else {
				dim.Values = append(dim.Values, Value{Value: row.Value, Counts: c})
			}
		}
		// What no row holds: the rollups' rows of a dimension sum to the
		// clicks that have a value of it (clickstats.Breakdown).
		dim.None = Counts{Human: b.Totals.Human - listed.Human, Bot: b.Totals.Bot - listed.Bot}
		b.Dimensions = append(b.Dimensions, dim)
	}
	return b, nil
}

// Dimension returns the breakdown's dimension of that name, if it was read.
func (b Breakdown) Dimension(name string) (Dimension, bool) {
	for _, d := range b.Dimensions {
		if d.Name == name {
			return d, true
		}
	}
	return Dimension{}, false
}

// LinkClicks is one link's clicks over a range.
type LinkClicks struct {
	Domain link.DomainID
	Host   string // the domain's host
	Code   string
	Status link.Status
	Counts
}

// Overview is a tenant's statistics over a range at a glance.
type Overview struct {
	Series    Series
	Breakdown Breakdown // OverviewDimensions, over the range's UTC days
	TopLinks  []LinkClicks
	LiveLinks int64 // the tenant's active links now
}

// OverviewDimensions are the dimensions of an overview's breakdown.
var OverviewDimensions = []string{clickstats.DimCountry, clickstats.DimReferrer, clickstats.DimBrowser, clickstats.DimOS, clickstats.DimDevice}

// ReadOverview reads the tenant's series over r (by r's interval), its
// breakdown by dims (OverviewDimensions when nil) and its top links over
// the range's UTC days, limit of each.
func ReadOverview(ctx context.Context, rd Reader, tenant int64, r Range, dims []string, limit int) (Overview, error) {
	sc := Scope{Tenant: tenant}
	if dims == nil {
		dims = OverviewDimensions
	}
	var o Overview
	var err error
	if o.Series, err = ReadSeries(ctx, rd, sc, r); err != nil {
		return Overview{}, err
	}
	if o.Breakdown, err = ReadBreakdown(ctx, rd, sc, r, dims, limit); err != nil {
		return Overview{}, err
	}
	if o.TopLinks, err = rd.TenantTopLinks(ctx, tenant, o.Breakdown.FirstDay, o.Breakdown.LastDay, limit); err != nil {
		return Overview{}, err
	}
	if o.LiveLinks, err = rd.LiveLinks(ctx, tenant); err != nil {
		return Overview{}, err
	}
	return o, nil
}

// ExportRow is one link's clicks on one UTC day, as an export streams
// them.
type ExportRow struct {
	Host, Code        string
	Day               time.Time
	Clicks, BotClicks int64
	Visitors          int64
}

// CSVSafe keeps a spreadsheet from reading v as a formula: a value that
// starts with one of the characters that begin one gets a leading quote
// (OWASP's advice against CSV injection). Values come from the internet:
// a referrer is any host a browser sent, a UTM value any text in a target.
func CSVSafe(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}
