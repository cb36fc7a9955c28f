// Package clickstats holds the click statistics control serves, as read
// back from the click rollups: a link's or a tenant's clicks per hour and
// per day (with unique visitors), their clicks per dimension value, and how
// complete the counts are. They are plain values, so the HTTP layer that
// serves them and the storage that reads them share them without either
// importing the other.
//
// Time zones: hours and days are UTC. A day series in another zone is the
// sum of its days' hours, exact where the hours are kept (control's
// --click-hours-retention, 7 days by default) and the zone's offset is
// whole hours; before that only UTC days exist, and a zone's day can only
// be approximated by the UTC day it mostly overlaps (say so to the reader).
// Unique visitors exist per UTC day only (the visitor hash's salt changes
// with the UTC day), so they are not summed into a zone's days, and a
// range's are visitor-days, the sum of its days'.
package clickstats

import "time"

// Day is a UTC day's clicks, bots included in Clicks, and its unique human
// visitors: a HyperLogLog estimate (0.81% standard error), of the clicks
// whose edge could hash their visitor.
type Day struct {
	Day               time.Time
	Clicks, BotClicks int64
	Visitors          int64
}

// Hour is a UTC hour's clicks, bots included in Clicks.
type Hour struct {
	Hour              time.Time
	Clicks, BotClicks int64
}

// Dimensions of the breakdowns, as stored and reported.
const (
	DimReferrer    = "referrer"     // the referrer's host; "" none
	DimDevice      = "device"       // shared/clicks Device names
	DimBrowser     = "browser"      // shared/clicks Browser names
	DimOS          = "os"           // shared/clicks OS names
	DimCountry     = "country"      // ISO 3166-1 alpha-2; "" unknown
	DimUTMSource   = "utm_source"   // of the target that served the click; links without have no row
	DimUTMMedium   = "utm_medium"   // as utm_source
	DimUTMCampaign = "utm_campaign" // as utm_source
	DimStatus      = "status"       // the status answered; links only
	DimEdge        = "edge"         // the edge that served it; links only
)

// Dimensions lists every dimension of a link's breakdown; a tenant's has
// all but status and edge.
var Dimensions = []string{DimReferrer, DimDevice, DimBrowser, DimOS, DimCountry, DimUTMSource, DimUTMMedium, DimUTMCampaign, DimStatus, DimEdge}

// Breakdown is the clicks of one value of one dimension over a range of
// days (or on Day, for a breakdown per day).
//
// Other rows sum what has no row of its own: the values the rollup did not
// keep (at most N values per dimension, link or tenant, and day, N
// control's --click-top-values) and those past the reader's cut. With
// them, a dimension's rows sum to the clicks that have a value of it:
// every click for device, browser, OS, country, referrer, status and edge;
// UTM dimensions only count clicks on targets that name them.
type Breakdown struct {
	Day               time.Time // the day, for a breakdown per day; zero otherwise
	Dimension, Value  string    // Value is "" in an Other row
	Other             bool
	Clicks, BotClicks int64
}

// BreakdownQuery says which breakdown to read.
type BreakdownQuery struct {
	From, To   time.Time // UTC days, inclusive
	Dimensions []string  // nil: every dimension
	// Top is the most values per dimension (per day with PerDay), largest
	// first; the rest are summed in one Other row. 0 reads only Other rows.
	Top    int
	PerDay bool // a breakdown per day instead of one over the range
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
