// Package statsquery answers the click statistics a reader asks for — a
// range of time in a time zone, a series by hour or by day, breakdowns per
// dimension and a tenant's overview — from the rollups control/clickroll
// writes (UTC days, and UTC hours kept for a while). The API and the
// console both ask here, so a page shows exactly the API's numbers.
//
// What the rollups can and cannot say decides the shape of every answer:
//
//   - Hours are UTC hours, kept for the roller's retention (7 days by
//     default); older hours do not exist, so an hourly series must lie
//     within it.
//   - Days are UTC days, kept for ever. A day in another zone is read from
//     the hours where they are kept, exact when the zone's day starts on a
//     whole UTC hour (not so for Asia/Kolkata's +05:30: its days are then
//     approximate by the half hour); before the hours kept, a zone's day
//     is the UTC day it mostly overlaps, approximate too. Every bucket says
//     whether it is approximate and which UTC interval it counted: never
//     silently wrong.
//   - Unique visitors exist per UTC day only (the visitor hash's salt
//     changes with the UTC day), so only a bucket that is exactly one UTC
//     day has them, and a range's are visitor-days, the sum of its days'.
//   - Breakdowns exist per UTC day: a range in a zone reads the UTC days
//     nearest to it, and says so when they differ.
package statsquery

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zone names must not depend on the host's files: control runs on distroless images

	"github.com/edgelink/edgelink/shared/link"
)

// Interval is the width of a series' buckets.
type Interval string

// Intervals.
const (
	Hour Interval = "hour"
	Day  Interval = "day"
)

// Bounds of what one request may ask.
const (
	// DefaultDays is the days of a day range when none is given, ending
	// today; DefaultHours the hours of an hour range, ending with the
	// current hour.
	DefaultDays  = 30
	DefaultHours = 24
	// MaxDays bounds a day range (a year, leap day included); MaxHours an
	// hour range (31 days), within the hours kept anyway.
	MaxDays  = 366
	MaxHours = 31 * 24
	// DefaultHourRetention is how long the roller keeps hours unless told
	// otherwise: clickroll.DefaultHourRetention (a test holds them equal).
	DefaultHourRetention = 7 * 24 * time.Hour
	// maxZoneLen bounds a zone name (the longest IANA name is 32 bytes).
	maxZoneLen = 64
	// maxValueLen bounds any other parameter's text, so an error quoting
	// it stays short.
	maxValueLen = 40
)

// DateOnly is the layout of a date parameter and of a day's label.
const DateOnly = "2006-01-02"

var day = 24 * time.Hour

// Params are a request's range parameters as sent; empty ones take their
// defaults.
type Params struct {
	Interval string // "hour" or "day" (default)
	From, To string // dates (YYYY-MM-DD, in TZ) or RFC 3339 instants
	TZ       string // an IANA zone name; default UTC
}

// Range is a parsed request: the instants [From, To) aligned to whole
// buckets, hours on UTC hours and days on the zone's midnights.
type Range struct {
	Interval Interval
	TZ       string // the zone's name as given ("UTC" by default)
	Loc      *time.Location
	From, To time.Time
	// FirstDay and LastDay are the zone's dates of a day range, both
	// included; for an hour range, the dates its first and last hours
	// start on in the zone.
	FirstDay, LastDay string
	// HoursFrom is the first UTC hour kept when the range was read: the
	// hours before it are not in the rollups.
	HoursFrom time.Time
}

// Limits are what the reader knows of the rollups.
type Limits struct {
	// HourRetention is how long the roller keeps hours (default
	// DefaultHourRetention): the roller's --click-hours-retention.
	HourRetention time.Duration
}

// HoursFrom is the first UTC hour whose clicks are all in the hourly
// rollups at now: the roller writes the hours from now minus the
// retention, truncated to the hour, and deletes only earlier ones.
func (l Limits) HoursFrom(now time.Time) time.Time {
	r := l.HourRetention
	if r <= 0 {
		r = DefaultHourRetention
	}
	return now.UTC().Add(-r).Truncate(time.Hour)
}

// ErrHoursNotKept is an hour range that starts before the first hour the
// rollups keep; its error wraps link.ErrInvalidInput too.
var ErrHoursNotKept = errors.New("hours are kept for a limited time")

// errorf is an input error: the API answers it 400 with its text, the
// console shows it on the form.
func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{link.ErrInvalidInput}, args...)...)
}

// ParseRange reads p at now. A series takes both intervals; a breakdown
// or an overview passes series false and takes days only. Errors wrap
// link.ErrInvalidInput and say what to send instead; they quote at most
// a few dozen bytes of what was sent.
func ParseRange(p Params, now time.Time, lim Limits, series bool) (Range, error) {
	r := Range{Interval: Day, TZ: "UTC", Loc: time.UTC, HoursFrom: lim.HoursFrom(now)}
	switch p.Interval {
	case "", "day":
	case "hour":
		if !series {
			return r, errorf("interval is only for series: breakdowns are per day")
		}
		r.Interval = Hour
	default:
		return r, errorf("interval must be hour or day, not %.*q", maxValueLen, p.Interval)
	}
	if p.TZ != "" {
		loc, err := LoadZone(p.TZ)
		if err != nil {
			return r, err
		}
		r.TZ, r.Loc = p.TZ, loc
	}
	from, fromDate, err := r.parseBound("from", p.From)
	if err != nil {
		return r, err
	}
	to, toDate, err := r.parseBound("to", p.To)
	if err != nil {
		return r, err
	}
	if r.Interval == Hour {
		return r.hours(now, from, to, fromDate, toDate)
	}
	return r.days(now, from, to, fromDate, toDate)
}

// parseBound reads one end of a range: a date (YYYY-MM-DD: its day in the
// zone; date true) or an RFC 3339 instant; zero when not sent. Years are
// 1970 to 9999: clicks have none before.
func (r Range) parseBound(name, v string) (t time.Time, date bool, err error) {
	if v == "" {
		return t, false, nil
	}
	if len(v) > maxValueLen {
		return t, false, errorf("%s is %d bytes long: send a date (YYYY-MM-DD) or an RFC 3339 time", name, len(v))
	}
	if len(v) == len(DateOnly) {
		d, err := time.Parse(DateOnly, v)
		if err != nil {
			return t, false, errorf("%s must be a date, YYYY-MM-DD, or an RFC 3339 time, not %q", name, v)
		}
		if d.Year() < 1970 {
			return t, false, errorf("%s must be 1970 or later", name)
		}
		return d, true, nil
	}
	// RFC 3339 lets T and Z be lower case; Go's parser wants them upper.
	t, err = time.Parse(time.RFC3339Nano, strings.ToUpper(v))
	if err != nil || !strings.ContainsAny(v[min(10, len(v)):], "Tt") {
		return t, false, errorf("%s must be a date, YYYY-MM-DD, or an RFC 3339 time such as 2030-01-02T15:00:00Z, not %q", name, v)
	}
	if t.Year() < 1970 || t.UTC().Year() > 9999 {
		return t, false, errorf("%s must lie between 1970 and 9999", name)
	}
	return t.UTC(), false, nil
}

// hours aligns an hour range to UTC hours: every hour that overlaps it.
func (r Range) hours(now, from, to time.Time, fromDate, toDate bool) (Range, error) {
	if fromDate {
		from = StartOfDay(from, r.Loc)
	}
	if toDate {
		to = StartOfDay(to.AddDate(0, 0, 1), r.Loc)
	}
	switch {
	case from.IsZero() && to.IsZero():
		to = now.UTC().Truncate(time.Hour).Add(time.Hour)
		from = to.Add(-DefaultHours * time.Hour)
		if from.Before(r.HoursFrom) {
			from = r.HoursFrom
		}
	case from.IsZero():
		to = ceilHour(to)
		from = to.Add(-DefaultHours * time.Hour)
	case to.IsZero():
		to = now.UTC().Truncate(time.Hour).Add(time.Hour)
		from = from.Truncate(time.Hour)
	default:
		from, to = from.Truncate(time.Hour), ceilHour(to)
	}
	if !from.Before(to) {
		return r, errorf("from must be before to")
	}
	if from.Before(r.HoursFrom) {
		return r, fmt.Errorf("%w: %w: the earliest hour kept is %s; ask for days (interval=day) before it",
			link.ErrInvalidInput, ErrHoursNotKept, r.HoursFrom.In(r.Loc).Format(time.RFC3339))
	}
	if n := to.Sub(from) / time.Hour; n > MaxHours {
		return r, errorf("at most %d hours at a time (%d days), not %d: ask for days (interval=day) over longer ranges", MaxHours, MaxHours/24, n)
	}
	r.From, r.To = from, to
	r.FirstDay, r.LastDay = from.In(r.Loc).Format(DateOnly), to.Add(-time.Hour).In(r.Loc).Format(DateOnly)
	return r, nil
}

// days aligns a day range to the zone's days: every day that overlaps it.
func (r Range) days(now, from, to time.Time, fromDate, toDate bool) (Range, error) {
	// Work on the zone's dates, as UTC midnights of the same date.
	dateOf := func(t time.Time, isDate bool) time.Time {
		if isDate {
			return t
		}
		y, m, d := t.In(r.Loc).Date()
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	var first, last time.Time
	if !to.IsZero() {
		if !toDate {
			if !fromDate && !from.IsZero() && !to.After(from) {
				return r, errorf("from must be before to")
			}
			to = to.Add(-time.Nanosecond) // exclusive: the day of its last instant
		}
		last = dateOf(to, toDate)
	} else {
		y, m, d := now.In(r.Loc).Date()
		last = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	}
	if !from.IsZero() {
		first = dateOf(from, fromDate)
	} else {
		first = last.AddDate(0, 0, 1-DefaultDays)
	}
	switch n := int(last.Sub(first)/day) + 1; {
	case n < 1:
		return r, errorf("from must not be after to")
	case n > MaxDays:
		return r, errorf("at most %d days at a time, not %d", MaxDays, n)
	}
	r.FirstDay, r.LastDay = first.Format(DateOnly), last.Format(DateOnly)
	r.From, r.To = StartOfDay(first, r.Loc), StartOfDay(last.AddDate(0, 0, 1), r.Loc)
	return r, nil
}

// Days are the zone's dates of a day range, first to last, as UTC
// midnights of the same dates.
func (r Range) Days() []time.Time {
	first, _ := time.Parse(DateOnly, r.FirstDay)
	last, _ := time.Parse(DateOnly, r.LastDay)
	var out []time.Time
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		out = append(out, d)
	}
	return out
}

// StartOfDay is the first instant of date's day (its year, month and day)
// in loc. Where a zone skips midnight (a DST change at 00:00, as Cuba's
// or Chile's were), that is the instant of the change, when its clocks
// show the day's first time.
func StartOfDay(date time.Time, loc *time.Location) time.Time {
	y, m, d := date.Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	// time.Date may resolve a skipped midnight to the previous day's late
	// hour; the day then starts where that hour's zone ends.
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		_, end := t.ZoneBounds()
		t = end
	}
	return t.UTC()
}

func ceilHour(t time.Time) time.Time {
	if f := t.Truncate(time.Hour); !f.Equal(t) {
		return f.Add(time.Hour)
	}
	return t
}

// zones caches loaded zones by name: LoadLocation reads and parses a file
// each time. Only names that loaded are kept, so the cache is bounded by
// the zones that exist (about 600), whatever is sent.
var zones sync.Map // name → *time.Location

// LoadZone loads an IANA zone by name ("Europe/Berlin", "UTC"). A name
// that is too long, holds anything but letters, digits and "/_+-", names
// no zone, or names the server's own ("Local") is refused with an error
// that wraps link.ErrInvalidInput; the name is quoted back cut short, and
// no path of the server is said.
func LoadZone(name string) (*time.Location, error) {
	if v, ok := zones.Load(name); ok {
		return v.(*time.Location), nil
	}
	if len(name) > maxZoneLen {
		return nil, errorf("tz is %d bytes long: send an IANA time zone name such as Europe/Berlin", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '_' || c == '+' || c == '-') {
			return nil, errorf("tz must be an IANA time zone name such as Europe/Berlin, not %.*q", maxValueLen, name)
		}
	}
	if name == "" || name == "Local" || name[0] == '/' || strings.Contains(name, "//") {
		return nil, errorf("tz must be an IANA time zone name such as Europe/Berlin, not %.*q", maxValueLen, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errorf("tz names no time zone known here: %.*q; send an IANA name such as Europe/Berlin", maxValueLen, name)
	}
	zones.Store(name, loc)
	return loc, nil
}
