// Package clickstats holds the click statistics control serves, as read
// back from the click rollups: a link's or a tenant's clicks per day, a
// link's clicks per dimension value, and how complete the counts are. They
// are plain values, so the HTTP layer that serves them and the storage that
// reads them share them without either importing the other.
package clickstats

import "time"

// Day is a day's clicks, bots included in Clicks.
type Day struct {
	Day               time.Time
	Clicks, BotClicks int64
}

// Breakdown is the clicks of one value of one dimension ("referrer",
// "device", "status" or "edge") over a range of days.
type Breakdown struct {
	Dimension, Value  string
	Clicks, BotClicks int64
}

// Pipeline is how complete the click counts are, service-wide.
type Pipeline struct {
	RedirectsTotal int64 // history: every click ever applied
	EdgeDropped    int64 // clicks edges dropped and counted (buffer full, publish failed)
	// Unaccounted are clicks edges accepted but that never arrived and
	// that they did not count as dropped: the buffers of killed edges, or
	// clicks still in flight from live ones.
	Unaccounted int64
	LostMsgs    int64 // stream messages discarded by the stream's limits before being read
	Position    int64 // last stream sequence applied
}
