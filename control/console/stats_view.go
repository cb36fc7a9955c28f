package console

import (
	"net/url"
	"strconv"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"

	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/statsquery"
	"github.com/edgelink/edgelink/shared/link"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// bucketRow is a series' bucket as the chart and its table show it.
type bucketRow struct {
	Label       string // the zone's date, or for an hour its start there
	Start       string // RFC 3339 in the zone: what the API says
	Human, Bot  int64
	Visitors    string // "" where the bucket has none
	Approximate bool
	Counted     string // the UTC interval counted, when approximate
}

func bucketRows(s statsquery.Series) []bucketRow {
	out := make([]bucketRow, 0, len(s.Buckets))
	for _, b := range s.Buckets {
		r := bucketRow{Label: b.Day, Start: b.Start.In(s.Loc).Format(time.RFC3339), Human: b.Human, Bot: b.Bot, Approximate: b.Approximate}
		if s.Interval == statsquery.Hour {
			r.Label = b.Start.In(s.Loc).Format("2006-01-02 15:04 -07:00")
		}
		if b.HasVisitors {
			r.Visitors = itoa(b.Visitors)
		}
		if b.Approximate {
			r.Counted = b.CountedFrom.UTC().Format("2006-01-02 15:04") + " to " + b.CountedTo.UTC().Format("2006-01-02 15:04") + " UTC"
		}
		out = append(out, r)
	}
	return out
}

// valueRow is one row of a breakdown's table with its bar's length.
type valueRow struct {
	Kind       string // value, other or none (as the API's CSV says)
	Value      string // as the API has it
	Label      string // what the page shows
	Human, Bot int64
	Percent    int // of the dimension's busiest row, for its bar
}

// dimensionView is one dimension of a breakdown as a table.
type dimensionView struct {
	Name, Dimension string
	Rows            []valueRow
}

// dimensionNames are the tables' headings, in the order statsquery lists
// the dimensions.
var dimensionNames = map[string]string{
	clickstats.DimCountry: "Countries", clickstats.DimReferrer: "Referrers", clickstats.DimBrowser: "Browsers",
	clickstats.DimOS: "Operating systems", clickstats.DimDevice: "Devices", clickstats.DimUTMSource: "UTM sources",
	clickstats.DimUTMMedium: "UTM media", clickstats.DimUTMCampaign: "UTM campaigns", clickstats.DimStatus: "Redirect statuses",
	clickstats.DimEdge: "Edges",
}

// regionNames are CLDR's English names of regions (golang.org/x/text).
var regionNames = display.English.Regions()

// valueLabel is how a page names a dimension's value.
func valueLabel(dim, v string) string {
	switch {
	case v == "" && dim == clickstats.DimCountry:
		return "Unknown (no country data)"
	case v == "" && dim == clickstats.DimReferrer:
		return "None (direct, or not sent)"
	case v == "":
		return "(empty)"
	case dim == clickstats.DimCountry:
		if r, err := language.ParseRegion(v); err == nil && len(v) == 2 {
			if name := regionNames.Name(r); name != "" && name != "Unknown Region" {
				return name + " (" + v + ")"
			}
		}
	}
	return v
}

// noneLabel names a dimension's clicks without a value.
func noneLabel(dim string) string {
	switch dim {
	case clickstats.DimUTMSource, clickstats.DimUTMMedium, clickstats.DimUTMCampaign:
		return "Not tagged (no such parameter on the target)"
	}
	return "Not recorded (clicks rolled up before it was)"
}

// dimensionViews are a breakdown's tables: each dimension's values, then
// its other and none rows where they hold clicks. Every row of a table
// sums to the breakdown's totals, as the API's.
func dimensionViews(b statsquery.Breakdown) []dimensionView {
	out := make([]dimensionView, 0, len(b.Dimensions))
	for _, d := range b.Dimensions {
		v := dimensionView{Name: dimensionNames[d.Name], Dimension: d.Name}
		for _, val := range d.Values {
			v.Rows = append(v.Rows, valueRow{Kind: "value", Value: val.Value, Label: valueLabel(d.Name, val.Value), Human: val.Human, Bot: val.Bot})
		}
		if d.Other.Clicks() != 0 {
			v.Rows = append(v.Rows, valueRow{Kind: "other", Label: "Other values", Human: d.Other.Human, Bot: d.Other.Bot})
		}
		if d.None.Clicks() != 0 {
			v.Rows = append(v.Rows, valueRow{Kind: "none", Label: noneLabel(d.Name), Human: d.None.Human, Bot: d.None.Bot})
		}
		var peak int64
		for _, r := range v.Rows {
			peak = max(peak, r.Human+r.Bot)
		}
		for i := range v.Rows {
			v.Rows[i].Percent = barPercent(v.Rows[i].Human+v.Rows[i].Bot, peak)
		}
		out = append(out, v)
	}
	return out
}

// topLinkRow is one of the tenant's busiest links.
type topLinkRow struct {
	Code, Host string
	Status     link.Status
	Stats      string // its stats page
	Human, Bot int64
	Percent    int
}

func (s *Server) topLinkRows(ls []statsquery.LinkClicks) []topLinkRow {
	var out []topLinkRow
	var peak int64
	for _, l := range ls {
		peak = max(peak, l.Clicks())
	}
	for _, l := range ls {
		r := topLinkRow{Code: l.Code, Host: l.Host, Status: l.Status, Human: l.Human, Bot: l.Bot, Percent: barPercent(l.Clicks(), peak)}
		// The link's stats page, addressed as every link page is: by its
		// code, and its domain's host off the platform's.
		r.Stats = Prefix + "links/" + url.PathEscape(l.Code) + "/stats"
		if l.Domain != link.DefaultDomain {
			r.Stats += "?" + url.Values{"domain": {l.Host}}.Encode()
		}
		out = append(out, r)
	}
	return out
}
