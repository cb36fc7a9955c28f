package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/edgelink/edgelink/control/allocstore"
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
// counter, what is left, the recent lease rate and the time left at it,
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
			fmt.Fprintf(stdout, "  leased      %s IDs in the last hour, %s in the last day: %.2f IDs/s\n",
				thousands(ns.LeasedLastHour), thousands(ns.LeasedLastDay), ns.Rate)
			fmt.Fprintf(stdout, "  time left   %s\n", timeLeft(ns))
		}
		if len(st.Open) == 0 {
			fmt.Fprintln(stdout, "open segments: none")
			return nil
		}
		fmt.Fprintln(stdout, "open segments:")
		now := time.Now()
		for _, o := range st.Open {
			hb := "never"
			if !o.Heartbeat.IsZero() {
				hb = now.Sub(o.Heartbeat).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(stdout, "  %s %s: %d segments, %s IDs, oldest leased %s ago, heartbeat %s\n",
				o.Namespace, o.Instance, o.Segments, thousands(o.IDs), now.Sub(o.Oldest).Round(time.Second), hb)
		}
		return nil
	})
}

func timeLeft(ns allocstore.NamespaceStatus) string {
	switch {
	case ns.Remaining == 0:
		return "none: the range is exhausted, creates fail (see docs/runbooks/capacity-exhaustion.md)"
	case ns.Rate == 0:
		return "no leases in the last day: no estimate"
	case math.IsInf(ns.DaysLeft, 1) || ns.DaysLeft > 365*100:
		return "more than a century at this rate"
	case ns.DaysLeft >= 2:
		return fmt.Sprintf("about %.0f days at this rate", ns.DaysLeft)
	default:
		return fmt.Sprintf("about %s at this rate", ns.TimeLeft.Round(time.Second))
	}
}

func allocStatusJSON(st allocstore.Status) any {
	type nsJSON struct {
		Namespace      string   `json:"namespace"`
		Lower          uint64   `json:"lower"`
		Upper          uint64   `json:"upper"`
		Next           uint64   `json:"next"`
		Step           uint64   `json:"step"`
		Epoch          int64    `json:"epoch"`
		Remaining      uint64   `json:"remaining"`
		Allocated      uint64   `json:"allocated"`
		Committed      uint64   `json:"committed"`
		Wasted         uint64   `json:"wasted"`
		Reserved       uint64   `json:"reserved"`
		LeasedLastHour uint64   `json:"leased_last_hour"`
		LeasedLastDay  uint64   `json:"leased_last_day"`
		RatePerSecond  float64  `json:"rate_per_second"`
		SecondsLeft    *float64 `json:"seconds_left"` // null: no estimate
	}
	type openJSON struct {
		Namespace string  `json:"namespace"`
		Instance  string  `json:"instance"`
		Segments  int     `json:"segments"`
		IDs       uint64  `json:"ids"`
		Oldest    string  `json:"oldest"`
		Heartbeat *string `json:"heartbeat"`
	}
	out := struct {
		Namespaces []nsJSON   `json:"namespaces"`
		Open       []openJSON `json:"open_segments"`
	}{Namespaces: []nsJSON{}, Open: []openJSON{}}
	for _, ns := range st.Namespaces {
		j := nsJSON{ns.Namespace, ns.Lower, ns.Upper, ns.Next, ns.Step, ns.Epoch, ns.Remaining, ns.Allocated,
			ns.Committed, ns.Wasted, ns.Reserved, ns.LeasedLastHour, ns.LeasedLastDay, ns.Rate, nil}
		if ns.Rate > 0 {
			secs := float64(ns.Remaining) / ns.Rate
			j.SecondsLeft = &secs
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
