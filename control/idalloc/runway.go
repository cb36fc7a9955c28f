package idalloc

import (
	"fmt"
	"math"
	"sync"
)

// Runway decides readiness from allocation runway with hysteresis: an
// instance becomes unready when its runway (current plus standby IDs, and
// the seconds they last at the observed rate) falls to the low mark, and
// ready again only once it is back above the high mark, so a runway
// hovering around one threshold does not flap the probe.
//
// The zero value is not usable: build it with NewRunway. It is safe for
// concurrent use.
type Runway struct {
	marks RunwayMarks

	mu  sync.Mutex
	low map[string]bool // namespaces currently below their marks
}

// RunwayMarks are the readiness thresholds. A namespace is short of runway
// when it has at most LowIDs IDs left or less than LowSeconds of them at the
// observed rate; it has enough again when it has at least HighIDs IDs and
// HighSeconds seconds. A negative seconds mark turns the seconds condition
// off. An idle instance (rate 0) has infinite seconds.
type RunwayMarks struct {
	LowIDs, HighIDs         uint64
	LowSeconds, HighSeconds float64
}

// NewRunway returns a gate with marks; HighIDs and HighSeconds are raised
// to at least the low marks.
func NewRunway(marks RunwayMarks) *Runway {
	if marks.HighIDs < marks.LowIDs {
		marks.HighIDs = marks.LowIDs
	}
	if marks.HighSeconds < marks.LowSeconds {
		marks.HighSeconds = marks.LowSeconds
	}
	return &Runway{marks: marks, low: make(map[string]bool)}
}

// Check reports whether s's namespace has enough runway, and remembers the
// answer for the next Check of that namespace. A fenced or exhausted
// namespace never has. The error says why not.
func (g *Runway) Check(s Stats) error {
	ids := s.CurrentRemaining + s.StandbyRemaining
	secs := s.SecondsLeft
	if math.IsNaN(secs) {
		secs = 0
	}
	m := g.marks
	short := ids <= m.LowIDs || (m.LowSeconds >= 0 && secs < m.LowSeconds)
	enough := ids >= m.HighIDs && ids > m.LowIDs && (m.HighSeconds < 0 || secs >= m.HighSeconds)

	g.mu.Lock()
	low := g.low[s.Namespace]
	switch {
	case short:
		low = true
	case low && enough:
		low = false
	}
	g.low[s.Namespace] = low
	g.mu.Unlock()

	switch {
	case s.Fenced:
		return fmt.Errorf("namespace %s: allocation fenced: %v", s.Namespace, s.LastError)
	case s.Exhausted && ids == 0:
		return fmt.Errorf("namespace %s: ID range exhausted", s.Namespace)
	case low:
		return fmt.Errorf("namespace %s: allocation runway low: %d IDs, %.0f s at %.1f IDs/s (ready again at %d IDs and %.0f s; last load failure: %s)",
			s.Namespace, ids, secs, s.Rate, m.HighIDs, max(m.HighSeconds, 0), orNone(s.LastFailure))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
