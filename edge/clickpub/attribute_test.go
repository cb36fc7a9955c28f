package clickpub

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/edge/geo"
	"github.com/edgelink/edgelink/edge/visitorsalt"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// prefixGeo is a Geo of a few prefixes, standing in for edge/geo's table
// (another package's; this one needs only the method). It also answers
// what a bad table could: a lower-case code, and one that is no country.
type prefixGeo []struct {
	p  netip.Prefix
	cc [2]byte
}

func (g prefixGeo) Lookup(a netip.Addr) ([2]byte, bool) {
	for _, e := range g {
		if e.p.Contains(a) {
			return e.cc, true
		}
	}
	return [2]byte{}, false
}

var testGeo = prefixGeo{
	{netip.MustParsePrefix("203.0.113.0/24"), [2]byte{'D', 'E'}},
	{netip.MustParsePrefix("2001:db8::/32"), [2]byte{'J', 'P'}},
	{netip.MustParsePrefix("198.51.100.0/24"), [2]byte{'u', 's'}}, // lower case: taken upper-cased
	{netip.MustParsePrefix("192.0.2.0/24"), [2]byte{'1', '!'}},    // no country: unknown
}

// dayHash is a Visitors with salts for some days (day number to tag): a
// visitor is its address and User-Agent, so tests can tell hashes apart.
// It counts the digests asked for.
type dayHash struct {
	days    map[int64]uint64
	digests *int
}

func (d dayHash) UserAgent(at int64, ua []byte) (uint64, uint64, bool) {
	tag, ok := d.days[at/86_400_000]
	if !ok {
		return 0, 0, false
	}
	*d.digests++
	return tag, uint64(len(ua)), true
}

func (d dayHash) Visitor(tag, digest uint64, at int64, client netip.Addr) (uint64, bool) {
	if d.days[at/86_400_000] != tag || tag == 0 {
		return 0, false
	}
	a := client.As16()
	return binary.LittleEndian.Uint64(a[8:]) ^ digest ^ tag<<56 ^ 1<<63, true
}

var day = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

// TestCountryAndVisitor: a click gets its client's country and visitor
// hash; what cannot be known is left zero and counted by why; the
// client's address goes no further than the encoding (its ring slot is
// zeroed).
func TestCountryAndVisitor(t *testing.T) {
	pub := &capture{}
	digests := 0
	r := New(pub, Config{Edge: "e1", Geo: testGeo, Visitors: dayHash{map[int64]uint64{day.UnixMilli() / 86_400_000: 1}, &digests}})
	at := day.Add(time.Hour).UnixMilli()
	clients := []struct {
		addr    netip.Addr
		at      int64
		country string
		visitor bool
	}{
		{netip.MustParseAddr("203.0.113.7"), at, "DE", true},
		{netip.MustParseAddr("::ffff:203.0.113.8"), at, "DE", true}, // IPv4-mapped, as a dual-stack socket gives it
		{netip.MustParseAddr("2001:db8::1"), at, "JP", true},
		{netip.MustParseAddr("198.51.100.1"), at, "US", true},
		{netip.MustParseAddr("192.0.2.1"), at, "", true},                   // Geo answered no country
		{netip.MustParseAddr("100.64.0.1"), at, "", true},                  // Geo has no entry
		{netip.MustParseAddr("203.0.113.7"), at + 86_400_000, "DE", false}, // no salt that day
		{netip.Addr{}, at, "", false},                                      // no client address
		{netip.IPv4Unspecified(), at, "", false},
	}
	for _, c := range clients {
		r.Record(1, code, referer, iphone, c.addr, 302, 0, c.at)
	}
	var buf []byte
	ensured := false
	r.flush(context.Background(), &buf, &ensured)
	n, last := pub.clicks()
	if n != len(clients) {
		t.Fatalf("published %d clicks; want %d", n, len(clients))
	}
	for i, c := range last.Clicks {
		want := clients[i]
		country := ""
		if c.Country != [2]byte{} {
			country = string(c.Country[:])
		}
		if country != want.country || (c.Visitor != 0) != want.visitor {
			t.Errorf("client %v: country %q visitor %#x; want %q, a hash %v", want.addr, country, c.Visitor, want.country, want.visitor)
		}
		if c.Browser != clicks.BrowserSafari || c.OS != clicks.OSIOS || c.Device != clicks.DeviceMobile || c.Rule != 0 {
			t.Errorf("client %v: classes %v %v %v rule %d", want.addr, c.Browser, c.OS, c.Device, c.Rule)
		}
	}
	if last.Clicks[0].Visitor == last.Clicks[1].Visitor {
		t.Error("two clients hashed alike")
	}
	for name, got := range map[string]uint64{"no client": r.NoClient.Load(), "no country": r.NoCountry.Load(), "no salt": r.NoSalt.Load(), "no geo": r.NoGeo.Load()} {
		want := map[string]uint64{"no client": 2, "no country": 2, "no salt": 1, "no geo": 0}[name]
		if got != want {
			t.Errorf("%s: counted %d; want %d", name, got, want)
		}
	}
	for i := range r.ring {
		if r.ring[i].client != [16]byte{} {
			t.Fatalf("slot %d still holds a client address after publishing", i)
		}
	}
	if digests != 1 {
		t.Fatalf("the User-Agent was digested %d times; want once, kept in the classes' cache", digests)
	}

	// Without Geo and Visitors every click is counted as lacking both.
	bare := New(&capture{}, Config{Edge: "e2"})
	bare.Record(1, code, referer, iphone, clients[0].addr, 302, 0, at)
	bare.flush(context.Background(), &buf, &ensured)
	if bare.NoGeo.Load() != 1 || bare.NoSalt.Load() != 1 || bare.NoClient.Load() != 0 {
		t.Fatalf("without geo and salts: no geo %d, no salt %d, no client %d; want 1, 1, 0", bare.NoGeo.Load(), bare.NoSalt.Load(), bare.NoClient.Load())
	}
}

// TestDigestFollowsTheDay: a User-Agent's digest is kept for its day; a
// click of the next day (its own salt) has the User-Agent digested again,
// and hashes under that day's key.
func TestDigestFollowsTheDay(t *testing.T) {
	pub := &capture{}
	digests := 0
	d := day.UnixMilli() / 86_400_000
	r := New(pub, Config{Edge: "e1", Visitors: dayHash{map[int64]uint64{d: 1, d + 1: 2}, &digests}})
	for _, at := range []int64{day.UnixMilli(), day.UnixMilli() + 1, day.Add(24 * time.Hour).UnixMilli(), day.UnixMilli() + 2} {
		r.Record(1, code, referer, iphone, alice, 302, 0, at)
	}
	var buf []byte
	ensured := false
	r.flush(context.Background(), &buf, &ensured)
	_, last := pub.clicks()
	v := []uint64{}
	for _, c := range last.Clicks {
		v = append(v, c.Visitor)
	}
	if len(v) != 4 || v[0] == 0 || v[0] != v[1] || v[2] == v[0] || v[2] == 0 || v[3] != v[0] {
		t.Fatalf("visitors %#x; want day 1's three equal, day 2's apart", v)
	}
	if digests != 3 {
		t.Fatalf("%d digests; want 3 (day 1, day 2, day 1 again: the cache keeps one)", digests)
	}
}

// TestPerClickWorkDoesNotAllocate: encoding a batch (classes, referrer
// host, country, visitor hash, the click itself) allocates nothing once
// the buffer has grown, for many User-Agents and clients.
func TestPerClickWorkDoesNotAllocate(t *testing.T) {
	salts := saltsFor(t, day)
	// AllocsPerRun counts the whole process's allocations: no NATS client
	// may run meanwhile (the salts stay held).
	salts.stop()
	r := New(nil, Config{Buffer: 1 << 12, Geo: testGeo, Visitors: salts})
	uas := [][]byte{iphone, []byte("curl/8.0"), nil,
		[]byte("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.51")}
	clients := []netip.Addr{alice, netip.MustParseAddr("2001:db8::9"), netip.MustParseAddr("100.64.1.1"), {}}
	at := day.Add(time.Hour).UnixMilli()
	buf := make([]byte, 0, 1<<20)
	const n = 1000
	fill := func() {
		for i := range n {
			r.Record(link.DomainID(i%3), code, referer, uas[i%len(uas)], clients[i%len(clients)], 302, 0, at)
		}
	}
	fill()
	buf = r.appendClicks(buf[:0], n) // warm the User-Agent cache
	if got := testing.AllocsPerRun(10, func() { fill(); buf = r.appendClicks(buf[:0], n) }); got != 0 {
		t.Fatalf("%v allocations per %d clicks", got, n)
	}
}

// heldSalts is edge/visitorsalt watching a real bucket; stop ends the
// watch, closes the connection and stops the server (the salts stay
// held), so nothing else in the process allocates.
type heldSalts struct {
	*visitorsalt.Salts
	stop func()
}

// saltsFor is edge/visitorsalt holding a salt for day, from a real bucket.
func saltsFor(t testing.TB, day time.Time) heldSalts {
	t.Helper()
	ns := natstest.Start(t)
	nc, js := ns.Connect(t)
	kv, err := createBucket(js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(context.Background(), clicks.SaltKey(day), bytes.Repeat([]byte{7}, clicks.SaltLen), 0); err != nil {
		t.Fatal(err)
	}
	s := visitorsalt.New(js, visitorsalt.Config{Now: func() time.Time { return day }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; nc.Close(); ns.Stop() }) }
	t.Cleanup(stop)
	poll.Until(t, "the day's salt", 10*time.Second, func() bool { return s.Len() == 1 })
	return heldSalts{s, stop}
}

// TestTwoEdgesPublishOneVisitor: two edges (recorders) watching one salt
// bucket publish the same visitor hash for one client and User-Agent, to
// the real stream; and what they publish holds neither the client's
// address nor its raw User-Agent.
func TestTwoEdgesPublishOneVisitor(t *testing.T) {
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	kv, err := createBucket(js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(context.Background(), clicks.SaltKey(day), bytes.Repeat([]byte{7}, clicks.SaltLen), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stops []chan error
	t.Cleanup(func() {
		cancel()
		for _, c := range stops {
			<-c
		}
	})
	start := func(name string) *Recorder {
		s := visitorsalt.New(js, visitorsalt.Config{Now: func() time.Time { return day }})
		r := New(js, Config{Edge: name, Geo: testGeo, Visitors: s, FlushEvery: 10 * time.Millisecond})
		for _, run := range []func(context.Context) error{s.Run, r.Run} {
			done := make(chan error, 1)
			go func() { done <- run(ctx) }()
			stops = append(stops, done)
		}
		poll.Until(t, name+"'s salt", 10*time.Second, func() bool { return s.Len() == 1 })
		return r
	}
	edges := []*Recorder{start("e1"), start("e2")}
	bob := netip.MustParseAddr("2001:db8::beef")
	at := day.Add(12 * time.Hour).UnixMilli()
	for _, r := range edges {
		r.Record(0, code, referer, iphone, alice, 302, 0, at)
		r.Record(0, code, referer, iphone, bob, 302, 0, at)
	}
	poll.Until(t, "4 clicks published", 10*time.Second, func() bool {
		return edges[0].Published.Load()+edges[1].Published.Load() == 4
	})
	cons, err := js.OrderedConsumer(context.Background(), clicks.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	byEdge := map[string][]clicks.Click{}
	for got := 0; got < 4; {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range [][]byte{alice.AsSlice(), bob.AsSlice(), []byte(alice.String()), []byte(bob.String()), iphone[:40]} {
			if bytes.Contains(msg.Data(), secret) {
				t.Fatalf("a published message holds %q", secret)
			}
		}
		b, err := clicks.Decode(msg.Data())
		if err != nil {
			t.Fatal(err)
		}
		byEdge[b.Edge] = append(byEdge[b.Edge], b.Clicks...)
		got += len(b.Clicks)
	}
	e1, e2 := byEdge["e1"], byEdge["e2"]
	if len(e1) != 2 || len(e2) != 2 {
		t.Fatalf("clicks by edge: %d and %d", len(e1), len(e2))
	}
	if e1[0].Visitor == 0 || e1[0].Visitor != e2[0].Visitor || e1[1].Visitor != e2[1].Visitor || e1[0].Visitor == e1[1].Visitor {
		t.Fatalf("visitors: e1 %#x %#x, e2 %#x %#x; want alice's equal, bob's equal, alice's and bob's apart",
			e1[0].Visitor, e1[1].Visitor, e2[0].Visitor, e2[1].Visitor)
	}
	if e1[0].Country != [2]byte{'D', 'E'} || e2[1].Country != [2]byte{'J', 'P'} {
		t.Fatalf("countries %q and %q", e1[0].Country, e2[1].Country)
	}
}

// createBucket creates the salt bucket as control does.
func createBucket(js jetstream.JetStream) (jetstream.KeyValue, error) {
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, clicks.SaltStreamConfig()); err != nil {
		return nil, err
	}
	return js.KeyValue(ctx, clicks.SaltBucket)
}

// benchUAs are the User-Agents BenchmarkPublisherPerClick cycles through:
// desktop, mobile, in-app and a bot, as a busy link sees them.
var benchUAs = [][]byte{
	[]byte("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"),
	iphone,
	[]byte("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36"),
	[]byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/21E219 [FBAN/FBIOS;FBAV/455.0.0.44.107;FBBV/577357423;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.4]"),
	[]byte("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15"),
	[]byte("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"),
}

// discard is a Publisher that stores nothing.
type discard struct{}

func (discard) Publish(context.Context, string, []byte, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}

func (discard) CreateStream(context.Context, jetstream.StreamConfig) (jetstream.Stream, error) {
	return nil, nil
}

// BenchmarkPublisherPerClick is the publisher's cost per click: a batch of
// 1,024 clicks from 1,024 addresses recorded, then encoded and handed to a
// publisher that stores nothing; ns/click is per click (recording
// included). "bare" has no country data and no salts; "geo" looks every
// client up in edge/geo's table (Tor's data from ../../.data/geoip when
// the Taskfile has fetched it, else edge/geo's test fixture); "salt"
// hashes every visitor (edge/visitorsalt); "geo+salt" does both.
func BenchmarkPublisherPerClick(b *testing.B) {
	salts := saltsFor(b, day)
	salts.stop()
	dir := "../../.data/geoip"
	if _, err := os.Stat(dir + "/geoip"); err != nil {
		dir = "../geo/testdata"
	}
	table, err := geo.LoadTor(dir+"/geoip", dir+"/geoip6")
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("country data: %s (%d IPv4 ranges)", dir, table.Info().V4Ranges)
	clients := make([]netip.Addr, 1024)
	for i := range clients {
		clients[i] = netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, uint32(i+1)*2654435761)))
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"bare", Config{Edge: "bench"}},
		{"geo", Config{Edge: "bench", Geo: table}},
		{"salt", Config{Edge: "bench", Visitors: salts}},
		{"geo+salt", Config{Edge: "bench", Geo: table, Visitors: salts}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const batch = 1024
			tc.cfg.Batch, tc.cfg.Buffer = batch, batch
			r := New(discard{}, tc.cfg)
			at := day.Add(time.Hour).UnixMilli()
			var buf []byte
			ensured := false
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					r.Record(link.DomainID(i%3), code, referer, benchUAs[i%len(benchUAs)], clients[i], 302, 0, at)
				}
				r.flush(context.Background(), &buf, &ensured)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/click")
		})
	}
}
