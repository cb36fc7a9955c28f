package idalloc

import (
	"math"
	"testing"
)

// TestRunwayHysteresis walks one namespace's runway down and up across both
// marks and checks that readiness turns off at the low mark and back on
// only above the high mark, not in between.
func TestRunwayHysteresis(t *testing.T) {
	g := NewRunway(RunwayMarks{LowIDs: 10, HighIDs: 50, LowSeconds: 5, HighSeconds: 20})
	steps := []struct {
		cur, standby uint64
		rate         float64
		ready        bool
	}{
		{100, 100, 0, true},  // idle: infinite seconds
		{60, 0, 1, true},     // 60 s, 60 IDs
		{30, 0, 1, true},     // between the marks, still ready (was ready)
		{10, 0, 0, false},    // at LowIDs: unready
		{30, 0, 0, false},    // between the marks: stays unready
		{49, 0, 0, false},    // just below HighIDs: stays unready
		{50, 0, 0, true},     // at HighIDs, idle: ready again
		{40, 0, 10, false},   // 4 s left at 10/s: below LowSeconds
		{40, 100, 10, false}, // 14 s: between the second marks, stays unready
		{40, 200, 10, true},  // 24 s: ready again
		{0, 0, 0, false},     // empty
	}
	for i, s := range steps {
		st := Stats{Namespace: "default", CurrentRemaining: s.cur, StandbyRemaining: s.standby, Rate: s.rate, SecondsLeft: math.Inf(1)}
		if s.rate > 0 {
			st.SecondsLeft = float64(s.cur+s.standby) / s.rate
		}
		err := g.Check(st)
		if got := err == nil; got != s.ready {
			t.Fatalf("step %d: runway %d+%d IDs at %v/s: ready %v (%v); want %v", i, s.cur, s.standby, s.rate, got, err, s.ready)
		}
	}
}

func TestRunwayPerNamespaceAndFatal(t *testing.T) {
	g := NewRunway(RunwayMarks{LowIDs: 0, HighIDs: 5, LowSeconds: -1, HighSeconds: -1})
	if err := g.Check(Stats{Namespace: "a"}); err == nil {
		t.Fatal("namespace a with no IDs is ready")
	}
	if err := g.Check(Stats{Namespace: "b", CurrentRemaining: 3}); err != nil {
		t.Fatalf("namespace b with 3 IDs (never low) is not ready: %v", err)
	}
	if err := g.Check(Stats{Namespace: "a", CurrentRemaining: 3}); err == nil {
		t.Fatal("namespace a at 3 IDs, below its high mark after being empty, is ready")
	}
	if err := g.Check(Stats{Namespace: "b", CurrentRemaining: 100, Fenced: true, LastError: ErrFenced}); err == nil {
		t.Fatal("a fenced namespace is ready")
	}
	if err := g.Check(Stats{Namespace: "b", CurrentRemaining: 100, Exhausted: true}); err != nil {
		t.Fatalf("an exhausted namespace with IDs left is not ready: %v", err)
	}
}
