// Package limits is the gate's check of issue 23's click limit on a whole
// stack (PostgreSQL, NATS, control with its click roller, and three edges
// that tell each other what they served, each real): a link with a limit
// of N clicked round-robin across the edges by several clients at once
// until every edge answers 410 is redirected at least N and at most the
// design's bound of times (docs/click-limits.md), its counted clicks reach
// N and the API says limit_reached, and a raised limit makes every edge
// redirect it again. The overshoot past N is logged: the measured
// tolerance. Three more edges without reports do the same on another
// link within the bound alone, which they reach.
package limits
