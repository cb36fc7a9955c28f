package clickroll_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/control/clickroll"
	"github.com/edgelink/edgelink/control/clickstats"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/natstest"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
	"github.com/edgelink/edgelink/shared/clicks"
	"github.com/edgelink/edgelink/shared/link"
)

// rollerChildEnv makes the test binary, re-executed, run a click roller:
// "<database url>|<nats url>".
const rollerChildEnv = "EDGELINK_CLICKROLL_CHILD"

// TestRollerChild is not a test of its own: TestEveryDimensionExactlyOnce
// re-executes the test binary to run a roller it kills with SIGKILL.
// Without the environment variable it does nothing.
func TestRollerChild(t *testing.T) {
	spec := os.Getenv(rollerChildEnv)
	if spec == "" {
		return
	}
	dsn, natsURL, _ := strings.Cut(spec, "|")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// Small transactions, so a kill is likely to land in one.
	err = clickroll.New(postgres.New(pool), js, clickroll.Config{Batch: 4, FetchWait: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond}).Run(ctx)
	t.Fatalf("roller child stopped: %v", err)
}

// rollerChild runs a roller in a process of its own (its own process
// group, killed with the test's) and returns a kill: SIGKILL to the group,
// then the wait for it.
func rollerChild(t *testing.T, dsn, natsURL string) (kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRollerChild$")
	cmd.Env = append(os.Environ(), rollerChildEnv+"="+dsn+"|"+natsURL)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("roller child %d said:\n%s", cmd.Process.Pid, out.String())
		}
	})
	return kill
}

// sent is what the test published, counted independently of the roller:
// per link (or tenant, tenant<id>) and day and dimension value, per hour,
// and the visitors.
type sent struct {
	values   map[[3]string]map[string][2]int64 // (owner, day, dimension) → value → clicks, bots
	days     map[[2]string][2]int64            // (owner, day) → clicks, bots
	hours    map[[2]string][2]int64            // (owner, hour RFC 3339) → clicks, bots
	visitors map[[2]string]map[uint64]bool     // (owner, day) → human visitors
	unknown  int64
}

func (s *sent) add(owners []string, day, hour string, c *clicks.ClickView, edge string, utm clickroll.UTM) {
	bot := int64(0)
	if c.Bot {
		bot = 1
	}
	for _, o := range owners {
		dv := map[string]string{clickstats.DimDevice: c.Device.String(), clickstats.DimBrowser: c.Browser.String(), clickstats.DimOS: c.OS.String(),
			clickstats.DimReferrer: string(c.Referrer), clickstats.DimCountry: strings.TrimRight(string(c.Country[:]), "\x00")}
		if !strings.HasPrefix(o, "tenant") {
			dv[clickstats.DimStatus], dv[clickstats.DimEdge] = fmt.Sprint(c.Status), edge
		}
		if c.Rule == 0 {
			for dim, v := range map[string]string{clickstats.DimUTMSource: utm.Source, clickstats.DimUTMMedium: utm.Medium, clickstats.DimUTMCampaign: utm.Campaign} {
				if v != "" {
					dv[dim] = v
				}
			}
		}
		for dim, v := range dv {
			k := [3]string{o, day, dim}
			if s.values[k] == nil {
				s.values[k] = map[string][2]int64{}
			}
			n := s.values[k][v]
			s.values[k][v] = [2]int64{n[0] + 1, n[1] + bot}
		}
		for _, k := range [][2]string{{o, day}} {
			n := s.days[k]
			s.days[k] = [2]int64{n[0] + 1, n[1] + bot}
		}
		n := s.hours[[2]string{o, hour}]
		s.hours[[2]string{o, hour}] = [2]int64{n[0] + 1, n[1] + bot}
		if !c.Bot && c.Visitor != 0 {
			if s.visitors[[2]string{o, day}] == nil {
				s.visitors[[2]string{o, day}] = map[uint64]bool{}
			}
			s.visitors[[2]string{o, day}][c.Visitor] = true
		}
	}
}

// weighted draws an index by weight.
func weighted(r *rand.Rand, ws []int) int {
	total := 0
	for _, w := range ws {
		total += w
	}
	x := r.IntN(total)
	for i, w := range ws {
		if x < w {
			return i
		}
		x -= w
	}
	return len(ws) - 1
}

// clickLink is a link of the test, with what the edges know of it.
type clickLink struct {
	domain link.DomainID
	code   string
	tenant int64
	utm    clickroll.UTM
	status uint16
}

// TestEveryDimensionExactlyOnce is issue 22's proof: 100,000 clicks from
// three edges, with the countries, browsers, OS, devices, referrers,
// statuses, rules and visitors of a campaign (skewed: a few links, values
// and visitors take most clicks), over two days and their hours, on two
// tenants' links (one on a domain of its own) and 1% unknown codes; the
// roller runs in a process of its own, SIGKILLed twice mid-stream and
// started again. Then every rollup equals what was published, per link
// and per tenant, per day, per hour and per dimension value, and the
// unique visitors of every link's and tenant's day are within 2% of the
// true count.
func TestEveryDimensionExactlyOnce(t *testing.T) {
	pool := pgtest.Pool(t)
	st := postgres.New(pool)
	ctx := context.Background()
	cfg := pool.Config().ConnConfig
	dsn := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	ns := natstest.Start(t)
	_, js := ns.Connect(t)
	if _, err := js.CreateOrUpdateStream(ctx, clicks.StreamConfig()); err != nil {
		t.Fatal(err)
	}
	acme, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	beta, err := st.CreateTenant(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO domains (id, host, tenant_id, code_mode, version) VALUES (1, 'go.beta.test', $1, 'sequential', nextval('change_version_seq'))`, beta); err != nil {
		t.Fatal(err)
	}
	var links []clickLink
	for i := range 20 {
		l := clickLink{code: fmt.Sprintf("link-%02d", i), tenant: acme, status: 302}
		url := fmt.Sprintf("https://shop.example/p/%d", i)
		switch {
		case i >= 15:
			l.domain, l.tenant = 1, beta
		case i%3 == 0:
			l.utm = clickroll.UTM{Source: "newsletter", Medium: "email", Campaign: fmt.Sprint("spring-", i%2)}
			url += "?utm_source=newsletter&utm_medium=email&utm_campaign=" + l.utm.Campaign + "&id=7"
		case i%3 == 1:
			l.utm = clickroll.UTM{Source: "ads"}
			url += "?utm_source=ads"
		}
		if i == 4 {
			l.status = 301
		}
		id := int64(i + 1)
		if l.domain == 1 {
			id += int64(link.IDBase(1))
		}
		if _, err := pool.Exec(ctx, `INSERT INTO links (id, domain_id, code, tenant_id, code_source, url_original, url, version)
VALUES ($1, $2, $3, $4, 'custom', $5, $5, nextval('change_version_seq'))`, id, int32(l.domain), l.code, l.tenant, url); err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
	}
	linkWeights := make([]int, len(links)+1)
	for i := range links {
		linkWeights[i] = 1000 / (i + 1) // Zipf
	}
	linkWeights[len(links)] = 30 // some 1% on codes that are no link
	type ua struct {
		device  clicks.Device
		browser clicks.Browser
		os      clicks.OS
		bot     bool
		weight  int
	}
	uas := []ua{
		{clicks.DeviceMobile, clicks.BrowserSafari, clicks.OSIOS, false, 30}, {clicks.DeviceMobile, clicks.BrowserChrome, clicks.OSAndroid, false, 25},
		{clicks.DeviceMobile, clicks.BrowserInApp, clicks.OSIOS, false, 10}, {clicks.DeviceDesktop, clicks.BrowserChrome, clicks.OSWindows, false, 15},
		{clicks.DeviceDesktop, clicks.BrowserSafari, clicks.OSMacOS, false, 6}, {clicks.DeviceDesktop, clicks.BrowserFirefox, clicks.OSLinux, false, 2},
		{clicks.DeviceTablet, clicks.BrowserSamsung, clicks.OSAndroid, false, 2}, {clicks.DeviceTV, clicks.BrowserOther, clicks.OSOther, false, 1},
		{clicks.DeviceDesktop, clicks.BrowserEdge, clicks.OSWindows, false, 3}, {clicks.DeviceUnknown, clicks.BrowserUnknown, clicks.OSUnknown, true, 4},
		{clicks.DeviceDesktop, clicks.BrowserChrome, clicks.OSLinux, true, 2},
	}
	uaWeights := make([]int, len(uas))
	for i, u := range uas {
		uaWeights[i] = u.weight
	}
	countries := []string{"US", "IN", "BR", "DE", "GB", "FR", "JP", "ID", "MX", "NG", "", "CA", "ES"}
	countryWeights := []int{30, 15, 10, 8, 7, 6, 5, 4, 4, 3, 3, 3, 2}
	referrers := []string{"", "www.google.com", "t.co", "m.facebook.com", "l.instagram.com", "mail.google.com", "www.linkedin.com", "com.slack", "tail"}
	referrerWeights := []int{33, 15, 12, 9, 6, 5, 4, 4, 12}
	// Within hourly retention: the last 30 hours, so two UTC days.
	now := time.Now().UTC()
	start := now.Add(-30 * time.Hour).UnixMilli()

	const total = 100_000
	s := &sent{values: map[[3]string]map[string][2]int64{}, days: map[[2]string][2]int64{}, hours: map[[2]string][2]int64{},
		visitors: map[[2]string]map[uint64]bool{}}
	r := rand.New(rand.NewPCG(22, 3))
	edges := []string{"fra-1", "iad-1", "sin-1"}
	var msgs int
	for sentN := 0; sentN < total; {
		edge := edges[r.IntN(len(edges))]
		n := min(total-sentN, 50+r.IntN(450))
		b := clicks.AppendHeader(nil, clicks.Source{Edge: edge, Boot: "boot-" + edge, Offered: uint64(sentN + n)}, n)
		for range n {
			at := start + int64(sentN)*30*3600_000/total + int64(r.IntN(60_000)) // time goes on, a little disorder
			li := weighted(r, linkWeights)
			u := uas[weighted(r, uaWeights)]
			ref := referrers[weighted(r, referrerWeights)]
			if ref == "tail" {
				ref = fmt.Sprintf("blog-%d.example-news.net", r.IntN(60))
			}
			var country [2]byte
			copy(country[:], countries[weighted(r, countryWeights)])
			day := time.UnixMilli(at).UTC().Format(time.DateOnly)
			// Visitors: a pool per day, some return many times; a few
			// clicks have no visitor hash (the edge had no salt).
			var visitor uint64
			if r.IntN(40) != 0 {
				visitor = uint64(day[9]-'0')<<56 | uint64(r.IntN(200)*r.IntN(300)+r.IntN(100))
			}
			c := clicks.ClickView{At: at, Device: u.device, Browser: u.browser, OS: u.os, Bot: u.bot, Referrer: []byte(ref), Country: country,
				Visitor: visitor, Status: 302}
			if r.IntN(20) == 0 {
				c.Rule = 1 // served by a rule's target: no UTM of the link's own
			}
			hour := time.UnixMilli(at).UTC().Truncate(time.Hour).Format(time.RFC3339)
			if li == len(links) {
				c.Domain, c.Code = link.DefaultDomain, []byte(fmt.Sprintf("gone-%d", r.IntN(5)))
				s.unknown++
			} else {
				l := links[li]
				c.Domain, c.Code, c.Status = l.domain, []byte(l.code), l.status
				s.add([]string{fmt.Sprint(l.domain, "/", l.code), fmt.Sprint("tenant", l.tenant)}, day, hour, &c, edge, l.utm)
			}
			b = clicks.AppendClick(b, c)
			sentN++
		}
		if _, err := js.Publish(ctx, clicks.Subject(edge), b, jetstream.WithMsgID(fmt.Sprint(edge, "-", msgs))); err != nil {
			t.Fatal(err)
		}
		msgs++
	}
	t.Logf("published %d clicks in %d messages", total, msgs)

	kill := rollerChild(t, dsn, ns.ClientURL())
	position := func() uint64 {
		pos, err := st.ClickPosition(ctx, clicks.Stream)
		if err != nil {
			t.Fatal(err)
		}
		return pos
	}
	for _, at := range []uint64{uint64(msgs) / 3, 2 * uint64(msgs) / 3} {
		poll.Until(t, fmt.Sprint("the roller past message ", at), 5*time.Minute, func() bool { return position() >= at })
		kill()
		t.Logf("roller SIGKILLed at stream position %d of %d; restarting", position(), msgs)
		kill = rollerChild(t, dsn, ns.ClientURL())
	}
	poll.Until(t, "the roller through the stream", 5*time.Minute, func() bool { return position() >= uint64(msgs) })
	kill()

	// Every day, hour and value, per link and per tenant.
	owners := map[string]func(q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error){}
	dayRows := map[string]func(from, to time.Time) ([]clickstats.Day, error){}
	hourRows := map[string]func(from, to time.Time) ([]clickstats.Hour, error){}
	for _, l := range links {
		o := fmt.Sprint(l.domain, "/", l.code)
		owners[o] = func(q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
			return st.LinkBreakdown(ctx, l.domain, l.code, q)
		}
		dayRows[o] = func(from, to time.Time) ([]clickstats.Day, error) {
			return st.LinkDays(ctx, l.domain, l.code, from, to)
		}
		hourRows[o] = func(from, to time.Time) ([]clickstats.Hour, error) {
			return st.LinkHours(ctx, l.domain, l.code, from, to)
		}
	}
	for _, id := range []int64{acme, beta} {
		o := fmt.Sprint("tenant", id)
		owners[o] = func(q clickstats.BreakdownQuery) ([]clickstats.Breakdown, error) {
			return st.TenantBreakdown(ctx, id, q)
		}
		dayRows[o] = func(from, to time.Time) ([]clickstats.Day, error) { return st.TenantDays(ctx, id, from, to) }
		hourRows[o] = func(from, to time.Time) ([]clickstats.Hour, error) { return st.TenantHours(ctx, id, from, to) }
	}
	from, to := now.Add(-48*time.Hour).Truncate(24*time.Hour), now.Add(24*time.Hour)
	gotValues := map[[3]string]map[string][2]int64{}
	gotDays, gotHours := map[[2]string][2]int64{}, map[[2]string][2]int64{}
	var worst float64
	for o, read := range owners {
		br, err := read(clickstats.BreakdownQuery{From: from, To: to, Top: 1000, PerDay: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range br {
			if b.Other {
				t.Errorf("%s %s %s: other %+v; every value fits", o, b.Day.Format(time.DateOnly), b.Dimension, b)
				continue
			}
			k := [3]string{o, b.Day.Format(time.DateOnly), b.Dimension}
			if gotValues[k] == nil {
				gotValues[k] = map[string][2]int64{}
			}
			gotValues[k][b.Value] = [2]int64{b.Clicks, b.BotClicks}
		}
		days, err := dayRows[o](from, to)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range days {
			k := [2]string{o, d.Day.Format(time.DateOnly)}
			gotDays[k] = [2]int64{d.Clicks, d.BotClicks}
			want := float64(len(s.visitors[k]))
			e := math.Abs(float64(d.Visitors)-want) / want
			worst = max(worst, e)
			if e > 0.02 {
				t.Errorf("%s on %s: %d unique visitors estimated, %.0f true (%.2f%% off; want within 2%%)", o, k[1], d.Visitors, want, 100*e)
			}
		}
		hours, err := hourRows[o](from, to)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hours {
			gotHours[[2]string{o, h.Hour.Format(time.RFC3339)}] = [2]int64{h.Clicks, h.BotClicks}
		}
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{{"values", gotValues, s.values}, {"days", gotDays, s.days}, {"hours", gotHours, s.hours}} {
		if g, w := fmt.Sprint(c.got), fmt.Sprint(c.want); g != w {
			t.Errorf("%s rolled up differ from what was sent:\n got %.2000s\nwant %.2000s", c.what, g, w)
		}
	}
	var unknown int64
	if err := pool.QueryRow(ctx, `SELECT sum(unknown_clicks)::bigint FROM clicks_daily`).Scan(&unknown); err != nil || unknown != s.unknown {
		t.Errorf("unknown clicks %d, %v; sent %d", unknown, err, s.unknown)
	}
	least, most := math.MaxInt, 0
	for _, v := range s.visitors {
		least, most = min(least, len(v)), max(most, len(v))
	}
	t.Logf("%d link and tenant days, %d dimensions of them and %d hours exactly as sent; unique visitors (%d to %d a day) at worst %.2f%% off",
		len(gotDays), len(gotValues), len(gotHours), least, most, 100*worst)
}
