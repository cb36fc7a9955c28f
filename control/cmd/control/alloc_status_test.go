package main

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/shared/base62"
	"github.com/edgelink/edgelink/shared/link"
)

// allocatorIDs hands the links service IDs from the segment allocator.
type allocatorIDs struct{ a *idalloc.Allocator }

func (x allocatorIDs) NextID(ctx context.Context, d link.DomainID) (uint64, error) {
	return x.a.Next(ctx, link.NamespaceOf(d))
}
func (x allocatorIDs) Done(id uint64, committed bool) { x.a.Done(id, committed) }

// TestAllocStatusReportsCreates is issue 17's report: with 30 links made
// after a 100,000-ID segment lease, `alloc status` must give 30 creates in
// its windows and the time left at their rate, not the lease's 27.78
// IDs/s and its 23,667 days; the lease rate is still shown, as leases.
func TestAllocStatusReportsCreates(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	dsn := pool.Config().ConnString()
	a, err := idalloc.New(ctx, allocstore.New(pool), idalloc.Config{
		Namespaces: []idalloc.Namespace{{Name: "default", Start: base62.MinID, End: base62.Space, Step: 100_000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	svc := links.New(st, allocatorIDs{a}, links.Config{})
	for range 30 {
		if _, err := svc.Create(ctx, tenant, links.CreateRequest{URL: "https://example.com/"}); err != nil {
			t.Fatal(err)
		}
	}

	out, _, err := runCLIEnv(t, nil, "--database-url", dsn, "alloc", "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"creates     30 in the last 5 min", "30 in the last hour",
		"at the recent create rate", "at the peak rate",
		"creates in the busiest minute of the last 7 days", "not a create rate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("alloc status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "at this rate") {
		t.Errorf("alloc status gives a time left at an unnamed rate:\n%s", out)
	}

	out, _, err = runCLIEnv(t, nil, "--database-url", dsn, "alloc", "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	type count struct {
		Creates       uint64  `json:"creates"`
		WindowSeconds float64 `json:"window_seconds"`
		PerSecond     float64 `json:"per_second"`
	}
	var got struct {
		Namespaces []struct {
			Remaining   uint64   `json:"remaining"`
			Last5m      count    `json:"creates_last_5m"`
			LastHour    count    `json:"creates_last_hour"`
			CreateRate  float64  `json:"create_rate_per_second"`
			SecondsLeft *float64 `json:"seconds_left"`
			AtPeak      *float64 `json:"seconds_left_at_peak"`
			Leased      uint64   `json:"leased_last_hour"`
			LeaseRate   float64  `json:"lease_rate_per_second"`
		} `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Namespaces) != 1 {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	ns := got.Namespaces[0]
	if ns.Last5m.Creates != 30 || ns.LastHour.Creates != 30 || ns.Last5m.WindowSeconds < 300 || ns.Last5m.WindowSeconds > 360 {
		t.Errorf("creates: last 5m %+v, last hour %+v; want 30 in each, a 5-minute window of 300 to 360 s", ns.Last5m, ns.LastHour)
	}
	rate := 30 / ns.Last5m.WindowSeconds
	if math.Abs(ns.CreateRate-rate) > 1e-12*rate || ns.SecondsLeft == nil || math.Abs(*ns.SecondsLeft-float64(ns.Remaining)/rate) > 1e-6**ns.SecondsLeft {
		t.Errorf("create rate %v, seconds left %v; want %v and remaining %d at it", ns.CreateRate, ns.SecondsLeft, rate, ns.Remaining)
	}
	if ns.AtPeak == nil || *ns.AtPeak > *ns.SecondsLeft {
		t.Errorf("seconds left at the peak %v: want an estimate no longer than at the recent rate (%v)", ns.AtPeak, *ns.SecondsLeft)
	}
	if ns.Leased < 100_000 || ns.LeaseRate != float64(ns.Leased)/3600 {
		t.Errorf("leases: %d IDs, %v/s; want at least the first segment's 100,000, per hour", ns.Leased, ns.LeaseRate)
	}
}
