package webhooks

import (
	"time"
)

// Schedule is the retry schedule: the delay before each attempt after the
// first, so len(s)+1 attempts in all. Each delay is drawn within ±Jitter of
// its value, so endpoints that failed together are not retried together.
type Schedule struct {
	Delays []time.Duration
	Jitter float64 // a fraction, 0 to 1
}

// DefaultSchedule tries an event 14 times over about 2.7 days (up to 3.2
// with jitter): 5 s, 30 s, 2 min, 10 min, 30 min, 1, 2, 4, 8 h, then every
// 12 h.
var DefaultSchedule = Schedule{
	Delays: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour},
	Jitter: 0.2,
}

// Attempts is how many times an event is tried.
func (s Schedule) Attempts() int { return len(s.Delays) + 1 }

// Next is the delay before the attempt after failed attempt n (1-based);
// ok is false when n was the last. rnd returns a number in [0, 1).
func (s Schedule) Next(n int, rnd func() float64) (d time.Duration, ok bool) {
	if n < 1 || n > len(s.Delays) {
		return 0, false
	}
	base := s.Delays[n-1]
	j := s.Jitter * (2*rnd() - 1)
	return time.Duration(float64(base) * (1 + j)), true
}

// Horizon bounds how long after its first attempt an event may still be
// tried: every delay at its longest. The stream keeps events longer.
func (s Schedule) Horizon() time.Duration {
	var h time.Duration
	for _, d := range s.Delays {
		h += time.Duration(float64(d) * (1 + s.Jitter))
	}
	return h
}

// DisablePolicy says when an endpoint that keeps failing is disabled: when
// every attempt for After has failed, at least MinFailures of them. A run
// of failures ends with a success, or with a pause of more than Gap
// between two failed attempts (an endpoint that failed one event's retries
// last week and one attempt now has not been failing all week).
type DisablePolicy struct {
	After       time.Duration // default 72h
	MinFailures int           // default 10
	Gap         time.Duration // default 25h: above the schedule's longest delay
}

// DefaultDisablePolicy is the policy a zero DisablePolicy takes.
var DefaultDisablePolicy = DisablePolicy{After: 72 * time.Hour, MinFailures: 10, Gap: 25 * time.Hour}

func (p DisablePolicy) orDefault() DisablePolicy {
	if p.After <= 0 {
		p.After = DefaultDisablePolicy.After
	}
	if p.MinFailures <= 0 {
		p.MinFailures = DefaultDisablePolicy.MinFailures
	}
	if p.Gap <= 0 {
		p.Gap = DefaultDisablePolicy.Gap
	}
	return p
}

// Streak is an endpoint's current run of failed attempts; the zero value
// is none.
type Streak struct {
	Since, Last time.Time
	Failures    int
}

// Fail is the streak after a failed attempt at now, and whether the
// endpoint is to be disabled for it.
func (p DisablePolicy) Fail(s Streak, now time.Time) (Streak, bool) {
	p = p.orDefault()
	if s.Failures == 0 || s.Since.IsZero() || now.Sub(s.Last) > p.Gap {
		s = Streak{Since: now}
	}
	s.Last = now
	s.Failures++
	return s, s.Failures >= p.MinFailures && now.Sub(s.Since) >= p.After
}
