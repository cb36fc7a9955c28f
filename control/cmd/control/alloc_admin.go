package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/postgres"
)

type allocStatusCmd struct {
	database
	JSON bool `name:"json" help:"Print JSON instead of text."`
}

func (c *allocStatusCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocStatus(ctx, g.DatabaseURL, *c, stdout)
}

type allocRaiseFloorCmd struct {
	database
	Namespace string `default:"default" help:"Namespace whose counter to raise."`
	To        uint64 `required:"" help:"New counter: the first ID the allocator may hand out; every ID below it never will be."`
	Actor     string `help:"Who raises it, recorded in the audit (default: $USER)."`
}

func (c *allocRaiseFloorCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocRaiseFloor(ctx, g.DatabaseURL, *c, stdout)
}

func withAllocStore(ctx context.Context, dsn string, fn func(*allocstore.Store) error) error {
	pool, err := postgres.Open(ctx, dsn, 0)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	return fn(allocstore.New(pool))
}

// runAllocStatus is `control alloc status`: per namespace its range,
// counter, what is left, the committed creates of the last five minutes
// and hour and the peak minute of the last 7 days, the time left at the
// recent and at the peak create rate, the lease rate (labelled as such),
// then the open segments per instance.
func runAllocStatus(ctx context.Context, dsn string, c allocStatusCmd, stdout io.Writer) error {
	return withAllocStore(ctx, dsn, func(s *allocstore.Store) error {
		st, err := s.Status(ctx)
		if err != nil {
			return fmt.Errorf("alloc status: %w", err)
		}
		if c.JSON {
			return printJSON(stdout, allocStatusJSON(st))
		}
		printAllocStatus(stdout, st, time.Now())
		return nil
	})
}

func printAllocStatus(stdout io.Writer, st allocstore.Status, now time.Time) {
	for _, ns := range st.Namespaces {
		used := 0.0
		if ns.Total > 0 {
			used = 100 * float64(ns.Allocated) / float64(ns.Total)
		}
		fmt.Fprintf(stdout, "namespace %s: IDs [%s, %s), next %s, step %s, epoch %d\n",
			ns.Namespace, thousands(ns.Lower), thousands(ns.Upper), thousands(ns.Next), thousands(ns.Step), ns.Epoch)
		fmt.Fprintf(stdout, "  remaining   %s IDs (%.4f%% of the range allocated)\n", thousands(ns.Remaining), used)
		fmt.Fprintf(stdout, "  allocated   %s = committed %s + wasted %s + reserved (open segments) %s\n",
			thousands(ns.Allocated), thousands(ns.Committed), thousands(ns.Wasted), thousands(ns.Reserved))
		fmt.Fprintf(stdout, "  creates     %s in the last 5 min (%s), %s in the last hour (%s): committed links, every instance's\n",
			thousands(ns.Last5m.Creates), perSecond(ns.Last5m.PerSecond()), thousands(ns.LastHour.Creates), perSecond(ns.LastHour.PerSecond()))
		if ns.PeakMinute.IsZero() {
			fmt.Fprintln(stdout, "  peak        no creates in the last 7 days")
		} else {
			fmt.Fprintf(stdout, "  peak        %s creates in the busiest minute of the last 7 days (%s UTC): %s\n",
				thousands(ns.PeakCreates), ns.PeakMinute.UTC().Format("2006-01-02 15:04"), perSecond(ns.PeakRate))
		}
		fmt.Fprintf(stdout, "  time left   %s\n", timeLeft(ns.Remaining, ns.TimeLeft, "at the recent create rate (the busier of the last 5 min and hour)"))
		fmt.Fprintf(stdout, "              %s\n", timeLeft(ns.Remaining, ns.TimeLeftAtPeak, "at the peak rate"))
		fmt.Fprintf(stdout, "  leased      %s IDs in the last hour, %s in the last day: %s (segment leases reserve IDs ahead of creates; not a create rate)\n",
			thousands(ns.LeasedLastHour), thousands(ns.LeasedLastDay), perSecond(ns.LeaseRate))
	}
	if len(st.Open) == 0 {
		fmt.Fprintln(stdout, "open segments: none")
		return
	}
	fmt.Fprintln(stdout, "open segments:")
	for _, o := range st.Open {
		hb := "never"
		if !o.Heartbeat.IsZero() {
			hb = now.Sub(o.Heartbeat).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(stdout, "  %s %s: %d segments, %s IDs, oldest leased %s ago, heartbeat %s\n",
			o.Namespace, o.Instance, o.Segments, thousands(o.IDs), now.Sub(o.Oldest).Round(time.Second), hb)
	}
}

// perSecond prints a rate with the digits a low one needs.
func perSecond(r float64) string {
	switch {
	case r == 0:
		return "0/s"
	case r < 0.1:
		return fmt.Sprintf("%.4f/s", r)
	default:
		return fmt.Sprintf("%.2f/s", r)
	}
}

// timeLeft says how long remaining IDs last, left being that at some rate
// (zero: no creates, no estimate); at names the rate.
func timeLeft(remaining uint64, left time.Duration, at string) string {
	days := left.Hours() / 24
	switch {
	case remaining == 0:
		return "none: the range is exhausted, creates fail (see docs/runbooks/capacity-exhaustion.md)"
	case left == 0:
		return "no estimate " + at + ": no creates"
	case days > 365*100:
		return "more than a century " + at
	case days >= 2:
		return fmt.Sprintf("about %.0f days %s", days, at)
	default:
		return fmt.Sprintf("about %s %s", left.Round(time.Second), at)
	}
}

func allocStatusJSON(st allocstore.Status) any {
	type countJSON struct {
		Creates       uint64  `json:"creates"`
		WindowSeconds float64 `json:"window_seconds"`
		PerSecond     float64 `json:"per_second"`
	}
	type peakJSON struct {
		Minute    *string `json:"minute"` // null: no creates in the window
		Creates   uint64  `json:"creates"`
		PerSecond float64 `json:"per_second"`
		Window    string  `json:"window"`
	}
	type nsJSON struct {
		Namespace      string    `json:"namespace"`
		Lower          uint64    `json:"lower"`
		Upper          uint64    `json:"upper"`
		Next           uint64    `json:"next"`
		Step           uint64    `json:"step"`
		Epoch          int64     `json:"epoch"`
		Remaining      uint64    `json:"remaining"`
		Allocated      uint64    `json:"allocated"`
		Committed      uint64    `json:"committed"`
		Wasted         uint64    `json:"wasted"`
		Reserved       uint64    `json:"reserved"`
		CreatesLast5m  countJSON `json:"creates_last_5m"`
		CreatesLastHr  countJSON `json:"creates_last_hour"`
		CreatesPeak    peakJSON  `json:"creates_peak"`
		CreateRate     float64   `json:"create_rate_per_second"`
		SecondsLeft    *float64  `json:"seconds_left"`         // at create_rate_per_second; null: no estimate
		SecondsAtPeak  *float64  `json:"seconds_left_at_peak"` // null: no estimate
		LeasedLastHour uint64    `json:"leased_last_hour"`
		LeasedLastDay  uint64    `json:"leased_last_day"`
		LeaseRate      float64   `json:"lease_rate_per_second"`
	}
	type openJSON struct {
		Namespace string  `json:"namespace"`
		Instance  string  `json:"instance"`
		Segments  int     `json:"segments"`
		IDs       uint64  `json:"ids"`
		Oldest    string  `json:"oldest"`
		Heartbeat *string `json:"heartbeat"`
	}
	count := func(c idalloc.CreateCount) countJSON {
		return countJSON{c.Creates, c.Window.Seconds(), c.PerSecond()}
	}
	secsLeft := func(remaining uint64, rate float64) *float64 {
		if rate <= 0 {
			return nil
		}
		secs := float64(remaining) / rate
		return &secs
	}
	out := struct {
		Namespaces []nsJSON   `json:"namespaces"`
		Open       []openJSON `json:"open_segments"`
	}{Namespaces: []nsJSON{}, Open: []openJSON{}}
	for _, ns := range st.Namespaces {
		j := nsJSON{Namespace: ns.Namespace, Lower: ns.Lower, Upper: ns.Upper, Next: ns.Next, Step: ns.Step, Epoch: ns.Epoch,
			Remaining: ns.Remaining, Allocated: ns.Allocated, Committed: ns.Committed, Wasted: ns.Wasted, Reserved: ns.Reserved,
			CreatesLast5m: count(ns.Last5m), CreatesLastHr: count(ns.LastHour),
			CreatesPeak: peakJSON{Creates: ns.PeakCreates, PerSecond: ns.PeakRate, Window: "busiest minute of the last 7 days, the current one included"},
			CreateRate:  ns.Rate, SecondsLeft: secsLeft(ns.Remaining, ns.Rate), SecondsAtPeak: secsLeft(ns.Remaining, ns.PeakRate),
			LeasedLastHour: ns.LeasedLastHour, LeasedLastDay: ns.LeasedLastDay, LeaseRate: ns.LeaseRate}
		if !ns.PeakMinute.IsZero() {
			m := ns.PeakMinute.UTC().Format(time.RFC3339)
			j.CreatesPeak.Minute = &m
		}
		out.Namespaces = append(out.Namespaces, j)
	}
	for _, o := range st.Open {
		j := openJSON{o.Namespace, o.Instance, o.Segments, o.IDs, o.Oldest.UTC().Format(time.RFC3339), nil}
		if !o.Heartbeat.IsZero() {
			h := o.Heartbeat.UTC().Format(time.RFC3339)
			j.Heartbeat = &h
		}
		out.Open = append(out.Open, j)
	}
	return out
}

// runAllocRaiseFloor is `control alloc raise-floor`: it moves a
// namespace's counter forward (never back) so the allocator starts above
// an old system's high-water mark.
func runAllocRaiseFloor(ctx context.Context, dsn string, c allocRaiseFloorCmd, stdout io.Writer) error {
	actor := c.Actor
	if actor == "" {
		actor = os.Getenv("USER")
	}
	return withAllocStore(ctx, dsn, func(s *allocstore.Store) error {
		res, err := s.RaiseFloor(ctx, c.Namespace, c.To, actor)
		if err != nil {
			return fmt.Errorf("alloc raise-floor: %w", err)
		}
		fmt.Fprintf(stdout, "namespace %s: counter raised from %s to %s\n", res.Namespace, thousands(res.From), thousands(res.To))
		if res.RequestID != "" {
			fmt.Fprintf(stdout, "skipped [%s, %s) (%s IDs, never handed out) audited as waste, audit request %s\n",
				thousands(res.SkipFrom), thousands(res.To), thousands(res.To-res.SkipFrom), res.RequestID)
		}
		return nil
	})
}

type allocWidenCmd struct {
	database
	Namespace string `default:"default" help:"Namespace whose range to widen."`
	To        uint64 `required:"" help:"New end (exclusive), at most 62^6 = 56800235584, not into another namespace."`
}

func (c *allocWidenCmd) Run(ctx context.Context, g *globals, stdout io.Writer) error {
	return runAllocWiden(ctx, g.DatabaseURL, *c, stdout)
}

// runAllocWiden is `control alloc widen`: it moves a namespace's end up.
// Run it with every control instance stopped and start them again with the
// new --id-end: instances compare their configured range with the
// authority's at start.
func runAllocWiden(ctx context.Context, dsn string, c allocWidenCmd, stdout io.Writer) error {
	return withAllocStore(ctx, dsn, func(s *allocstore.Store) error {
		old, err := s.Widen(ctx, c.Namespace, c.To)
		if err != nil {
			return fmt.Errorf("alloc widen: %w", err)
		}
		fmt.Fprintf(stdout, "namespace %s: end raised from %s to %s (+%s IDs); start control with --id-end %d\n",
			c.Namespace, thousands(old), thousands(c.To), thousands(c.To-old), c.To)
		return nil
	})
}
