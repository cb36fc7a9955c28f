package statsquery

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/shared/link"
)

// rollups are one link's clicks as the rollups hold them: every UTC day,
// and the UTC hours from hoursFrom on only, as the roller keeps them. It
// is the algorithm's test bench, over every zone below in one run; the
// API's tests read the same from PostgreSQL.
type rollups struct {
	clicks    []time.Time
	hoursFrom time.Time
	hourReads int
}

func (r *rollups) count(from, to time.Time) int64 {
	var n int64
	for _, c := range r.clicks {
		if !c.Before(from) && c.Before(to) {
			n++
		}
	}
	return n
}

func (r *rollups) LinkDays(_ context.Context, _ link.DomainID, _ string, from, to time.Time) ([]clickstats.Day, error) {
	var out []clickstats.Day
	for d := from; !d.After(to); d = d.Add(day) {
		if n := r.count(d, d.Add(day)); n > 0 {
			out = append(out, clickstats.Day{Day: d, Clicks: n, Visitors: 1})
		}
	}
	return out, nil
}

func (r *rollups) LinkHours(_ context.Context, _ link.DomainID, _ string, from, to time.Time) ([]clickstats.Hour, error) {
	r.hourReads++
	var out []clickstats.Hour
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		if h.Before(r.hoursFrom) {
			continue // pruned, or never written
		}
		if n := r.count(h, h.Add(time.Hour)); n > 0 {
			out = append(out, clickstats.Hour{Hour: h, Clicks: n})
		}
	}
	return out, nil
}

func (r *rollups) LinkBreakdown(context.Context, link.DomainID, string, clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
	return nil, nil
}
func (r *rollups) TenantDays(context.Context, int64, time.Time, time.Time) ([]clickstats.Day, error) {
	return nil, nil
}
func (r *rollups) TenantHours(context.Context, int64, time.Time, time.Time) ([]clickstats.Hour, error) {
	return nil, nil
}
func (r *rollups) TenantBreakdown(context.Context, int64, clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
	return nil, nil
}
func (r *rollups) TenantTopLinks(context.Context, int64, time.Time, time.Time, int) ([]LinkClicks, error) {
	return nil, nil
}
func (r *rollups) LiveLinks(context.Context, int64) (int64, error) { return 0, nil }

// zonesToTry have every kind of offset and change: none, whole hours
// either side, half and quarter hours, a half-hour DST (Lord Howe), a
// skipped midnight (Havana), +14 and -11, a day dropped from the
// calendar (Apia, 2011), and the southern hemisphere's changes.
var zonesToTry = []string{"UTC", "Europe/Berlin", "America/New_York", "America/Los_Angeles", "Asia/Kolkata", "Asia/Kathmandu",
	"Pacific/Chatham", "Australia/Lord_Howe", "America/Havana", "America/Santiago", "Pacific/Kiritimati", "Pacific/Pago_Pago",
	"Pacific/Apia", "Australia/Adelaide", "America/St_Johns", "Asia/Tehran", "Africa/Casablanca", "Etc/GMT-12", "Etc/GMT+12"}

// TestDaySeriesInEveryZone: for random clicks and ranges in many zones,
// around the edge of the hours kept, every day of a series counts exactly
// the clicks of the interval it says it counted, the intervals abut (so
// the series' total is each click of the whole interval once), a day is
// approximate exactly when that interval is not its own, and only a day
// that is one UTC day has visitors. Hours are never read before they are
// kept.
func TestDaySeriesInEveryZone(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dates := []time.Time{
		time.Date(2030, 3, 31, 9, 0, 0, 0, time.UTC), // Europe's spring change
		time.Date(2030, 10, 28, 7, 0, 0, 0, time.UTC),
		time.Date(2030, 3, 12, 3, 30, 0, 0, time.UTC), // Havana's, the US's
		time.Date(2030, 4, 8, 23, 0, 0, 0, time.UTC),  // Lord Howe's, Chile's
		time.Date(2011, 12, 31, 12, 0, 0, 0, time.UTC),
	}
	for _, name := range zonesToTry {
		loc := zone(t, name)
		for _, now := range dates {
			for range 4 {
				r := &rollups{hoursFrom: Limits{}.HoursFrom(now)}
				for range 400 {
					r.clicks = append(r.clicks, now.Add(-time.Duration(rng.Int64N(int64(20*day)))))
				}
				from := now.Add(-time.Duration(rng.Int64N(int64(18 * day)))).In(loc).Format(DateOnly)
				rg, err := ParseRange(Params{From: from, TZ: name}, now, Limits{}, true)
				if err != nil {
					t.Fatalf("%s from %s at %v: %v", name, from, now, err)
				}
				s, err := ReadSeries(context.Background(), r, Scope{Link: &LinkRef{Code: "x"}}, rg)
				if err != nil {
					t.Fatal(err)
				}
				checkSeries(t, name, r, rg, s)
			}
		}
	}
}

func checkSeries(t *testing.T, name string, r *rollups, rg Range, s Series) {
	t.Helper()
	if len(s.Buckets) != len(rg.Days()) {
		t.Fatalf("%s %s..%s: %d buckets for %d days", name, rg.FirstDay, rg.LastDay, len(s.Buckets), len(rg.Days()))
	}
	hoursFrom := ceilDay(r.hoursFrom)
	for i, b := range s.Buckets {
		own := [2]time.Time{b.Start, rg.To}
		if i+1 < len(s.Buckets) {
			own[1] = s.Buckets[i+1].Start
		}
		where := name + " " + b.Day
		if b.Day != rg.Days()[i].Format(DateOnly) || !b.Start.Equal(StartOfDay(rg.Days()[i], rg.Loc)) {
			t.Errorf("%s: bucket %d is %s starting %v", where, i, b.Day, b.Start)
		}
		if got, want := b.Human+b.Bot, r.count(b.CountedFrom, b.CountedTo); got != want {
			t.Errorf("%s: %d clicks; its counted interval %v to %v has %d", where, got, b.CountedFrom, b.CountedTo, want)
		}
		if b.Approximate != (!b.CountedFrom.Equal(own[0]) || !b.CountedTo.Equal(own[1])) {
			t.Errorf("%s: approximate %v, counted %v to %v, own %v to %v", where, b.Approximate, b.CountedFrom, b.CountedTo, own[0], own[1])
		}
		if i > 0 && !b.CountedFrom.Equal(s.Buckets[i-1].CountedTo) {
			t.Errorf("%s: counted from %v, the day before to %v", where, b.CountedFrom, s.Buckets[i-1].CountedTo)
		}
		if b.HasVisitors != (isMidnight(b.CountedFrom) && b.CountedTo.Sub(b.CountedFrom) == day) {
			t.Errorf("%s: visitors %v over %v to %v", where, b.HasVisitors, b.CountedFrom, b.CountedTo)
		}
		// Exact whenever the rollups can be: its midnights are UTC
		// midnights, or whole hours within the hours kept.
		canSplit := func(e time.Time) bool {
			return isMidnight(e) || (!e.Before(hoursFrom) && e.Equal(e.Truncate(time.Hour)))
		}
		if b.Approximate && canSplit(own[0]) && canSplit(own[1]) {
			t.Errorf("%s: approximate, though its edges %v and %v can be split at", where, own[0], own[1])
		}
	}
	if first, last := s.Buckets[0], s.Buckets[len(s.Buckets)-1]; s.Totals.Human != r.count(first.CountedFrom, last.CountedTo) {
		t.Errorf("%s: total %d; the counted interval has %d", name, s.Totals.Human, r.count(first.CountedFrom, last.CountedTo))
	}
}

// TestHourSeriesInZones: an hour series is the UTC hours, each in the
// zone's time, 23 or 25 on a day of change.
func TestHourSeriesInZones(t *testing.T) {
	now := time.Date(2030, 4, 2, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		zone, date string
		hours      int
		first      string
	}{
		{"Europe/Berlin", "2030-03-31", 23, "2030-03-31T00:00:00+01:00"},
		{"America/Santiago", "2030-03-31", 24, "2030-03-31T00:00:00-03:00"},
		{"Asia/Kathmandu", "2030-03-30", 25, "2030-03-29T23:45:00+05:45"}, // its day starts a quarter past a UTC hour: 25 of them overlap it
		{"Australia/Lord_Howe", "2030-03-30", 24, "2030-03-30T00:00:00+11:00"},
	} {
		r := &rollups{hoursFrom: Limits{}.HoursFrom(now)}
		rg, err := ParseRange(Params{Interval: "hour", From: c.date, To: c.date, TZ: c.zone}, now, Limits{}, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ReadSeries(context.Background(), r, Scope{Link: &LinkRef{Code: "x"}}, rg)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Buckets) != c.hours || s.Buckets[0].Start.In(rg.Loc).Format(time.RFC3339) != c.first || s.HasVisitorDays {
			t.Errorf("%s %s: %d hours from %s; want %d from %s", c.zone, c.date, len(s.Buckets), s.Buckets[0].Start.In(rg.Loc).Format(time.RFC3339), c.hours, c.first)
		}
	}
}

// TestUTCSeriesReadsNoHours: in UTC every day is a UTC day; the hours
// are not read at all.
func TestUTCSeriesReadsNoHours(t *testing.T) {
	now := time.Date(2030, 4, 2, 12, 0, 0, 0, time.UTC)
	r := &rollups{hoursFrom: Limits{}.HoursFrom(now), clicks: []time.Time{now.Add(-time.Hour)}}
	rg, err := ParseRange(Params{}, now, Limits{}, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadSeries(context.Background(), r, Scope{Link: &LinkRef{Code: "x"}}, rg)
	if err != nil || r.hourReads != 0 || s.Totals.Human != 1 || !s.HasVisitorDays || s.Approximate {
		t.Errorf("UTC series: %v, %d hour reads, %+v", err, r.hourReads, s)
	}
}
