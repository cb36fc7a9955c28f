package statsquery

import (
	"context"
	"time"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/link"
)

// Reader is what the statistics are read from: the rollups, as
// control/postgres's Store reads them. Days are inclusive UTC dates;
// hours are [from, to) of UTC hours.
type Reader interface {
	LinkDays(ctx context.Context, d link.DomainID, code string, from, to time.Time) ([]clickstats.Day, error)
	LinkHours(ctx context.Context, d link.DomainID, code string, from, to time.Time) ([]clickstats.Hour, error)
	LinkBreakdown(ctx context.Context, d link.DomainID, code string, q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error)
	TenantDays(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Day, error)
	TenantHours(ctx context.Context, tenantID int64, from, to time.Time) ([]clickstats.Hour, error)
	TenantBreakdown(ctx context.Context, tenantID int64, q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error)
	// TenantTopLinks is the tenant's links with the most clicks over the
	// UTC days first to last, most first, at most limit.
	TenantTopLinks(ctx context.Context, tenantID int64, first, last time.Time, limit int) ([]LinkClicks, error)
	// LiveLinks is the tenant's active links now.
	LiveLinks(ctx context.Context, tenantID int64) (int64, error)
}

// Scope is whose clicks are read: a tenant's, or one of its links (the
// caller has checked that the link is the tenant's).
type Scope struct {
	Tenant int64
	Link   *LinkRef // nil: every link of the tenant
}

// LinkRef names a link: its domain and code.
type LinkRef struct {
	Domain link.DomainID
	Code   string
}

func (s Scope) days(ctx context.Context, rd Reader, first, last time.Time) ([]clickstats.Day, error) {
	if s.Link != nil {
		return rd.LinkDays(ctx, s.Link.Domain, s.Link.Code, first, last)
	}
	return rd.TenantDays(ctx, s.Tenant, first, last)
}

func (s Scope) hours(ctx context.Context, rd Reader, from, to time.Time) ([]clickstats.Hour, error) {
	if s.Link != nil {
		return rd.LinkHours(ctx, s.Link.Domain, s.Link.Code, from, to)
	}
	return rd.TenantHours(ctx, s.Tenant, from, to)
}

// Counts are clicks with bots apart: a human click is one whose
// User-Agent the edge did not take for a bot.
type Counts struct{ Human, Bot int64 }

func countsOf(clicks, bots int64) Counts { return Counts{Human: clicks - bots, Bot: bots} }

// Add adds c's clicks to s's.
func (s *Counts) Add(c Counts) { s.Human, s.Bot = s.Human+c.Human, s.Bot+c.Bot }

// Clicks is every click, humans and bots.
func (s Counts) Clicks() int64 { return s.Human + s.Bot }

// Bucket is one hour or one day of a series.
type Bucket struct {
	// Start is the bucket's first instant (UTC; show it in the range's
	// zone); Day is the zone's date it starts on.
	Start time.Time
	Day   string
	Counts
	// Visitors are the unique human visitors of a bucket that is exactly
	// one UTC day (HasVisitors); no other bucket has any.
	Visitors    int64
	HasVisitors bool
	// Approximate says the bucket's clicks are those of another interval
	// than its own, [CountedFrom, CountedTo): the hours or UTC days
	// nearest to it. Otherwise that interval is the bucket's own.
	Approximate            bool
	CountedFrom, CountedTo time.Time
}

// Series is a range's clicks per bucket, every bucket listed, zeros
// included.
type Series struct {
	Range
	Buckets []Bucket
	Totals  Counts
	// VisitorDays sums the buckets' visitors when every bucket has them
	// (HasVisitorDays): a visitor on two days counts twice.
	VisitorDays    int64
	HasVisitorDays bool
	// Approximate says some bucket is.
	Approximate bool
}

// ReadSeries reads the clicks of sc over r, per bucket of r's interval.
func ReadSeries(ctx context.Context, rd Reader, sc Scope, r Range) (Series, error) {
	s := Series{Range: r}
	var err error
	if r.Interval == Hour {
		err = s.readHours(ctx, rd, sc)
	} else {
		err = s.readDays(ctx, rd, sc)
	}
	if err != nil {
		return Series{}, err
	}
	s.HasVisitorDays = len(s.Buckets) > 0
	for _, b := range s.Buckets {
		s.Totals.Add(b.Counts)
		s.Approximate = s.Approximate || b.Approximate
		s.HasVisitorDays = s.HasVisitorDays && b.HasVisitors
		s.VisitorDays += b.Visitors
	}
	return s, nil
}

func (s *Series) readHours(ctx context.Context, rd Reader, sc Scope) error {
	rows, err := sc.hours(ctx, rd, s.From, s.To)
	if err != nil {
		return err
	}
	by := make(map[int64]clickstats.Hour, len(rows))
	for _, h := range rows {
		by[h.Hour.Unix()] = h
	}
	for h := s.From; h.Before(s.To); h = h.Add(time.Hour) {
		v := by[h.Unix()]
		s.Buckets = append(s.Buckets, Bucket{Start: h, Day: h.In(s.Loc).Format(DateOnly), Counts: countsOf(v.Clicks, v.BotClicks),
			CountedFrom: h, CountedTo: h.Add(time.Hour)})
	}
	return nil
}

// readDays counts each of the zone's days over an interval of UTC days
// and hours that the rollups hold: its own where its midnights are UTC
// midnights, or whole UTC hours within the hours kept; otherwise each
// midnight moves to the nearest instant the rollups can split at (a UTC
// hour where hours are kept, else a UTC midnight). The moved intervals
// still abut, so no click counts in two days nor falls between them.
func (s *Series) readDays(ctx context.Context, rd Reader, sc Scope) error {
	days := s.Days()
	n := len(days)
	edges := make([]time.Time, n+1)   // the days' own first instants, and the range's end
	counted := make([]time.Time, n+1) // where the rollups let them be
	hoursFrom := ceilDay(s.HoursFrom) // hours are read only from a UTC midnight on: days before it
	needHours := false
	for i := range edges {
		date := days[0].AddDate(0, 0, i)
		edges[i] = StartOfDay(date, s.Loc)
		counted[i] = splitPoint(edges[i], date, hoursFrom)
		needHours = needHours || !isMidnight(counted[i])
	}
	var dayRows []clickstats.Day
	if first, end := counted[0].Truncate(day), ceilDay(counted[n]); first.Before(end) {
		var err error
		if dayRows, err = sc.days(ctx, rd, first, end.Add(-day)); err != nil {
			return err
		}
	}
	byDay := make(map[int64]clickstats.Day, len(dayRows))
	for _, d := range dayRows {
		byDay[d.Day.UTC().Unix()] = d
	}
	byHour := map[int64]clickstats.Hour{}
	if from := maxTime(counted[0], hoursFrom); needHours && from.Before(counted[n]) {
		rows, err := sc.hours(ctx, rd, from, counted[n])
		if err != nil {
			return err
		}
		for _, h := range rows {
			byHour[h.Hour.Unix()] = h
		}
	}
	sumDays := func(a, b time.Time, c *Counts) {
		for d := a; d.Before(b); d = d.Add(day) {
			v := byDay[d.Unix()]
			c.Add(countsOf(v.Clicks, v.BotClicks))
		}
	}
	sumHours := func(a, b time.Time, c *Counts) {
		for h := a; h.Before(b); h = h.Add(time.Hour) {
			v := byHour[h.Unix()]
			c.Add(countsOf(v.Clicks, v.BotClicks))
		}
	}
	for i, date := range days {
		a, b := counted[i], counted[i+1]
		bk := Bucket{Start: edges[i], Day: date.Format(DateOnly), CountedFrom: a, CountedTo: b,
			Approximate: !a.Equal(edges[i]) || !b.Equal(edges[i+1])}
		switch m1, m2 := ceilDay(a), b.Truncate(day); {
		case !a.Before(b):
		case isMidnight(a) && isMidnight(b):
			sumDays(a, b, &bk.Counts)
			if b.Sub(a) == day {
				bk.Visitors, bk.HasVisitors = byDay[a.Unix()].Visitors, true
			}
		case !m1.After(m2):
			// Whole UTC days in the middle, hours at either end: the ends
			// lie within the hours kept (splitPoint moves no midnight
			// before them off a UTC midnight).
			sumHours(a, m1, &bk.Counts)
			sumDays(m1, m2, &bk.Counts)
			sumHours(m2, b, &bk.Counts)
		default:
			sumHours(a, b, &bk.Counts)
		}
		s.Buckets = append(s.Buckets, bk)
	}
	return nil
}

// splitPoint is where the rollups can split at the zone's midnight t
// (the start of date there): t itself when it is a UTC midnight, or a
// whole UTC hour from hoursFrom on; else from hoursFrom on the UTC hour
// it falls in, and before it the nearest UTC midnight, so that a zone's
// day counts as the UTC day it mostly overlaps (of two equally near, the
// one of the same date).
func splitPoint(t, date, hoursFrom time.Time) time.Time {
	if isMidnight(t) {
		return t
	}
	if !t.Before(hoursFrom) {
		return t.Truncate(time.Hour)
	}
	lo := t.Truncate(day)
	hi := lo.Add(day)
	switch below, above := t.Sub(lo), hi.Sub(t); {
	case below < above:
		return lo
	case above < below:
		return hi
	case lo.Equal(date):
		return lo
	default:
		return hi
	}
}

func isMidnight(t time.Time) bool { return t.Equal(t.Truncate(day)) }

func ceilDay(t time.Time) time.Time {
	if f := t.Truncate(day); !f.Equal(t) {
		return f.Add(day)
	}
	return t
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
