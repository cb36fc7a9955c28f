package statsquery

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/shared/link"
)

func TestDefaultHourRetentionIsTheRollers(t *testing.T) {
	if DefaultHourRetention != clickroll.DefaultHourRetention {
		t.Errorf("statsquery offers hours for %v, the roller keeps them %v", DefaultHourRetention, clickroll.DefaultHourRetention)
	}
}

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func date(s string) time.Time {
	d, err := time.Parse(DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

// TestStartOfDay: a day starts at its midnight, or where a zone skips
// midnight (Havana springs from 00:00 to 01:00), at the change.
func TestStartOfDay(t *testing.T) {
	for _, c := range []struct{ zone, date, want string }{
		{"UTC", "2030-01-09", "2030-01-09T00:00:00Z"},
		{"Europe/Berlin", "2030-03-31", "2030-03-30T23:00:00Z"},
		{"Europe/Berlin", "2030-04-01", "2030-03-31T22:00:00Z"},
		{"Asia/Kolkata", "2030-01-09", "2030-01-08T18:30:00Z"},
		{"America/Havana", "2030-03-10", "2030-03-10T05:00:00Z"}, // 01:00 CDT: 00:00 never happens
		{"America/Havana", "2030-03-11", "2030-03-11T04:00:00Z"},
		{"Pacific/Kiritimati", "2030-01-09", "2030-01-08T10:00:00Z"},
	} {
		got := StartOfDay(date(c.date), zone(t, c.zone))
		if got.Format(time.RFC3339) != c.want {
			t.Errorf("StartOfDay(%s, %s) = %s; want %s", c.date, c.zone, got.Format(time.RFC3339), c.want)
		}
		if y, m, d := got.In(zone(t, c.zone)).Date(); time.Date(y, m, d, 0, 0, 0, 0, time.UTC) != date(c.date) {
			t.Errorf("StartOfDay(%s, %s) is on %v there", c.date, c.zone, got.In(zone(t, c.zone)))
		}
	}
}

// TestLoadZone: IANA names load (and are cached); anything else is an
// input error quoting at most a little of it and nothing of the server.
func TestLoadZone(t *testing.T) {
	for _, name := range []string{"UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Kolkata"} {
		if _, err := LoadZone(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"", "Local", "Mars/Olympus", "../../etc/passwd", "/etc/localtime", "Europe//Berlin", "Europe/Berlin\x00",
		"Europe/Berlin ", "europe/berlin\n", strings.Repeat("A/", 1000), "C:\\Windows", "Europe/./Berlin", "%2e%2e"} {
		_, err := LoadZone(name)
		if !errors.Is(err, link.ErrInvalidInput) || len(err.Error()) > 200 || strings.Contains(err.Error(), "zoneinfo") {
			t.Errorf("LoadZone(%.40q) = %v; want a short input error", name, err)
		}
		if _, cached := zones.Load(name); cached {
			t.Errorf("%.40q was cached", name)
		}
	}
}

// TestParseRange: dates are the zone's days, instants cover every bucket
// they touch, defaults end today (or this hour), and each bound is held.
func TestParseRange(t *testing.T) {
	now := time.Date(2030, 1, 10, 15, 20, 0, 0, time.UTC)
	lim := Limits{} // hours from 2030-01-03T15:00Z
	for _, c := range []struct {
		p                  Params
		series             bool
		from, to, first, l string
		err                string
	}{
		{Params{}, true, "2029-12-12T00:00:00Z", "2030-01-11T00:00:00Z", "2029-12-12", "2030-01-10", ""},
		{Params{TZ: "America/Los_Angeles"}, true, "2029-12-12T08:00:00Z", "2030-01-11T08:00:00Z", "2029-12-12", "2030-01-10", ""},
		{Params{TZ: "Pacific/Kiritimati"}, true, "2029-12-12T10:00:00Z", "2030-01-11T10:00:00Z", "2029-12-13", "2030-01-11", ""}, // it is the 11th there
		{Params{From: "2030-01-09"}, true, "2030-01-09T00:00:00Z", "2030-01-11T00:00:00Z", "2030-01-09", "2030-01-10", ""},
		{Params{To: "2030-01-09"}, true, "2029-12-11T00:00:00Z", "2030-01-10T00:00:00Z", "2029-12-11", "2030-01-09", ""},
		{Params{From: "2030-01-09T23:00:00+01:00", To: "2030-01-10T00:00:00Z"}, true, "2030-01-09T00:00:00Z", "2030-01-10T00:00:00Z", "2030-01-09", "2030-01-09", ""},
		{Params{From: "2030-01-09t10:00:00z", To: "2030-01-10"}, true, "2030-01-09T00:00:00Z", "2030-01-11T00:00:00Z", "2030-01-09", "2030-01-10", ""},
		{Params{Interval: "hour"}, true, "2030-01-09T16:00:00Z", "2030-01-10T16:00:00Z", "2030-01-09", "2030-01-10", ""},
		{Params{Interval: "hour", From: "2030-01-10T10:30:00Z", To: "2030-01-10T11:00:00.5Z"}, true, "2030-01-10T10:00:00Z", "2030-01-10T12:00:00Z", "2030-01-10", "2030-01-10", ""},
		{Params{Interval: "hour", From: "2030-01-09", TZ: "Asia/Kolkata"}, true, "2030-01-08T18:00:00Z", "2030-01-10T16:00:00Z", "2030-01-08", "2030-01-10", ""},
		{Params{Interval: "hour", To: "2030-01-05"}, true, "2030-01-05T00:00:00Z", "2030-01-06T00:00:00Z", "2030-01-05", "2030-01-05", ""},
		{Params{Interval: "hour", From: "2030-01-03T14:59:00Z"}, true, "", "", "", "", "the earliest hour kept is 2030-01-03T15:00:00Z"},
		{Params{Interval: "hour"}, false, "", "", "", "", "interval is only for series"},
		{Params{Interval: "week"}, true, "", "", "", "", "interval must be hour or day"},
		{Params{From: "2030-01-10T00:00:00Z", To: "2030-01-10T00:00:00Z"}, true, "", "", "", "", "from must be before to"},
		{Params{From: "2030-01-11"}, true, "", "", "", "", "from must not be after to"},
		{Params{From: "2029-01-08", To: "2030-01-09"}, true, "", "", "", "", "at most 366 days at a time, not 367"},
		{Params{From: "2029-01-10", To: "2030-01-10"}, true, "2029-01-10T00:00:00Z", "2030-01-11T00:00:00Z", "2029-01-10", "2030-01-10", ""},
		{Params{From: "2030-01-10T25:00:00Z"}, true, "", "", "", "", "from must be a date"},
		{Params{From: "2030-01-10T23:59:60Z"}, true, "", "", "", "", "from must be a date"},
		{Params{From: "2030-01-10 10:00:00Z"}, true, "", "", "", "", "from must be a date"},
		{Params{To: "0000-01-01"}, true, "", "", "", "", "1970 or later"},
		{Params{TZ: "Nowhere/Land"}, true, "", "", "", "", "tz names no time zone"},
	} {
		r, err := ParseRange(c.p, now, lim, c.series)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, link.ErrInvalidInput) {
				t.Errorf("%+v: %v; want an input error saying %q", c.p, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.p, err)
			continue
		}
		if got := [4]string{r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), r.FirstDay, r.LastDay}; got != [4]string{c.from, c.to, c.first, c.l} {
			t.Errorf("%+v: %v; want %v", c.p, got, [4]string{c.from, c.to, c.first, c.l})
		}
	}
}

// TestUTCDays: a breakdown's days are the UTC days nearest the range: of
// a zone's day, the UTC day it mostly overlaps (of two halves, the one of
// its own date), at least one.
func TestUTCDays(t *testing.T) {
	now := time.Date(2030, 1, 10, 15, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		p           Params
		first, last string
		approx      bool
	}{
		{Params{From: "2030-01-05", To: "2030-01-09"}, "2030-01-05", "2030-01-09", false},
		{Params{From: "2030-01-05", To: "2030-01-09", TZ: "America/Los_Angeles"}, "2030-01-05", "2030-01-09", true},
		{Params{From: "2030-01-05", To: "2030-01-09", TZ: "Asia/Kolkata"}, "2030-01-05", "2030-01-09", true},
		{Params{From: "2030-01-05", To: "2030-01-09", TZ: "Pacific/Kiritimati"}, "2030-01-04", "2030-01-08", true}, // +14: mostly the day before
		{Params{From: "2030-01-05", To: "2030-01-09", TZ: "Etc/GMT-12"}, "2030-01-05", "2030-01-09", true},         // +12: halves, its own date
		{Params{From: "2030-01-05", To: "2030-01-09", TZ: "Etc/GMT+12"}, "2030-01-05", "2030-01-09", true},         // -12
		{Params{Interval: "hour", From: "2030-01-10T10:00:00Z", To: "2030-01-10T11:00:00Z"}, "2030-01-10", "2030-01-10", true},
	} {
		r, err := ParseRange(c.p, now, Limits{}, true)
		if err != nil {
			t.Fatal(err)
		}
		first, last, approx := UTCDays(r)
		if first.Format(DateOnly) != c.first || last.Format(DateOnly) != c.last || approx != c.approx {
			t.Errorf("%+v: %s to %s approximate %v; want %s to %s, %v", c.p, first.Format(DateOnly), last.Format(DateOnly), approx, c.first, c.last, c.approx)
		}
	}
}
