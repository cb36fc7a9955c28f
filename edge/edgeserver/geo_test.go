package edgeserver_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/clickpub"
	"github.com/edgelink/edgelink/edge/edgeserver"
	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/internal/snapshottest"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/snapshot"
)

// TestClicksCarryCountries: an edge given country data publishes each
// click with the country of the client its trusted proxy forwarded (the
// address itself goes nowhere), none for a private address, and counts
// each lookup; the data's date is exported.
func TestClicksCarryCountries(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	natstest.ChangeStream(t, js)
	if _, err := js.CreateStream(t.Context(), clicks.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, snapshot.ObjectName(10)), snapshotFile(t, 10, false), 0o644); err != nil {
		t.Fatal(err)
	}
	table, err := geo.LoadTor("../geo/testdata")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- edgeserver.Run(ctx, edgeserver.Config{HTTPAddr: "127.0.0.1:0", NATSURL: ns.ClientURL(), Name: "geo",
			SnapshotDir: dir, Geo: table, TrustedProxies: []string{"127.0.0.1"}, ClickFlushEvery: 20 * time.Millisecond,
			OnListen: func(a net.Addr) { addr <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case err := <-done:
		done <- err
		t.Fatalf("edge stopped before it listened: %v", err)
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	follow := func(xff string) int {
		req, err := http.NewRequest(http.MethodGet, base+"/m-00001", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = snapshottest.PlatformHost // the file's platform domain
		req.Header.Set("X-Forwarded-For", xff)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// The first redirect once the snapshot is in service, from a
	// documentation address, which no country has.
	poll.Until(t, "the snapshot's link redirects", 60*time.Second, func() bool { return follow("192.0.2.1") == http.StatusFound })
	want := map[string]string{"8.8.8.8": "US", "2001:67c:2e8::2": "NL", "10.1.2.3": "", "1.1.1.1": "AU", "2001:4860:4860::8888": "US"}
	for a := range want {
		if s := follow("203.0.113.9, " + a); s != http.StatusFound { // the client, then a proxy of its own
			t.Fatalf("GET with X-Forwarded-For %s: %d", a, s)
		}
	}

	// Every published click, by country: one per request above.
	cons, err := js.OrderedConsumer(ctx, clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	poll.Until(t, "6 clicks published", 60*time.Second, func() bool {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			return false
		}
		for msg := range batch.Messages() {
			b, err := clicks.Decode(msg.Data())
			if err != nil {
				t.Fatalf("decode a CLICKS message: %v", err)
			}
			for _, c := range b.Clicks {
				got = append(got, string(c.Country[:]))
			}
		}
		return len(got) >= 6
	})
	wantCountries := []string{"\x00\x00", "\x00\x00", "AU", "NL", "US", "US"} // 192.0.2.1 and 10.1.2.3 have none
	sort.Strings(got)
	if !slices.Equal(got, wantCountries) {
		t.Errorf("clicks' countries %q, want %q", got, wantCountries)
	}
	poll.Until(t, "lookups counted", 30*time.Second, func() bool {
		return metric(t, base, "edge_geo_lookups_total", "outcome", "known") == 4 &&
			metric(t, base, "edge_geo_lookups_total", "outcome", "unknown") == 2
	})
	if v := metric(t, base, "edge_geo_data_timestamp_seconds"); v != float64(table.Info().Generated.Unix()) {
		t.Errorf("edge_geo_data_timestamp_seconds = %v, want %v", v, table.Info().Generated.Unix())
	}
}

// TestCountriesLookupAllocatesNothing: the publisher asks the edge's
// counted table through clickpub.Geo once per click.
func TestCountriesLookupAllocatesNothing(t *testing.T) {
	table, err := geo.LoadTor("../geo/testdata")
	if err != nil {
		t.Fatal(err)
	}
	var g clickpub.Geo = &edgeserver.Countries{Table: table}
	addrs := []netip.Addr{netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("2001:67c:2e8::2"), netip.MustParseAddr("10.0.0.1")}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { g.Lookup(addrs[i%len(addrs)]); i++ }); n != 0 {
		t.Errorf("Countries.Lookup allocates %v times a call", n)
	}
	c := g.(*edgeserver.Countries)
	if c.Known.Load()+c.Unknown.Load() != uint64(i) || c.Unknown.Load() == 0 || c.Known.Load() == 0 {
		t.Errorf("known %d, unknown %d after %d lookups", c.Known.Load(), c.Unknown.Load(), i)
	}
}

// TestGeoSourcesExclusive: naming both kinds of data stops the edge before
// it connects; so does data that does not load.
func TestGeoSourcesExclusive(t *testing.T) {
	for _, c := range []struct {
		cfg  edgeserver.Config
		want string
	}{
		{edgeserver.Config{GeoIP: []string{"../geo/testdata"}, GeoIPMMDB: "x.mmdb"}, "give one"},
		{edgeserver.Config{GeoIP: []string{filepath.Join(t.TempDir(), "nothing")}}, "load tor geoip"},
		{edgeserver.Config{GeoIPMMDB: "../geo/testdata/geoip"}, "load mmdb ../geo/testdata/geoip"},
	} {
		c.cfg.HTTPAddr, c.cfg.NATSURL, c.cfg.Name = "127.0.0.1:0", "nats://127.0.0.1:1", "geo"
		err := edgeserver.Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(GeoIP %v, GeoIPMMDB %q) = %v; want an error containing %q", c.cfg.GeoIP, c.cfg.GeoIPMMDB, err, c.want)
		}
	}
}
