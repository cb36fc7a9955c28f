package edgeserver

import (
	"errors"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgelink/edgelink/edge/geo"
)

// Countries is the edge's country table as the click recorder uses it: a
// lookup per click, in the publisher goroutine (never on the response
// path), each counted by outcome for edge_geo_lookups_total. Routing
// rules' country conditions look the request's client up in Table itself
// (redirect.Handler.Countries), uncounted. Safe for concurrent use.
type Countries struct {
	Table          *geo.Table
	Known, Unknown atomic.Uint64
}

// Lookup is Table.Lookup, counted. It does not allocate.
func (c *Countries) Lookup(a netip.Addr) ([2]byte, bool) {
	cc, ok := c.Table.Lookup(a)
	if ok {
		c.Known.Add(1)
	} else {
		c.Unknown.Add(1)
	}
	return cc, ok
}

// loadCountries loads the country data cfg names (Geo, or one of GeoIP and
// GeoIPMMDB), logging where it came from, how large it is and how long it
// took; nil when none is named. Data named but unreadable is an error: the
// operator asked for countries, and an edge without them would publish
// clicks with none, silently.
func loadCountries(cfg Config, log *slog.Logger) (*Countries, error) {
	t := cfg.Geo
	var err error
	switch {
	case t != nil:
	case len(cfg.GeoIP) > 0 && cfg.GeoIPMMDB != "":
		return nil, errors.New("country data: both Tor geoip files and an .mmdb named; give one (--geoip or --geoip-mmdb)")
	case len(cfg.GeoIP) > 0:
		t, err = geo.LoadTor(cfg.GeoIP...)
	case cfg.GeoIPMMDB != "":
		t, err = geo.LoadMMDB(cfg.GeoIPMMDB)
	default:
		log.Info("country data off: clicks carry no country (--geoip or --geoip-mmdb turn it on)")
		return nil, nil
	}
	if err != nil {
		return nil, err // names the file, and the line for Tor's format
	}
	info := t.Info()
	generated := "unknown"
	if !info.Generated.IsZero() {
		generated = info.Generated.Format(time.DateOnly)
	}
	log.Info("country data loaded", "source", info.Source, "generated", generated,
		"ipv4_ranges", info.V4Ranges, "ipv6_ranges", info.V6Ranges, "countries", info.Countries,
		"entries", info.Entries, "load", info.Load.Round(time.Millisecond))
	return &Countries{Table: t}, nil
}
