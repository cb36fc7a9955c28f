package metrics_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/edgelink/edgelink/control/allocstore"
	"github.com/edgelink/edgelink/control/idalloc"
	"github.com/edgelink/edgelink/control/links"
	"github.com/edgelink/edgelink/control/metrics"
	"github.com/edgelink/edgelink/control/postgres"
	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/edgelink/edgelink/internal/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// scrape gathers c's registry once.
func scrape(t *testing.T, c *metrics.Control) []*dto.MetricFamily {
	t.Helper()
	fams, err := c.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value is the sample of family name in fams whose labels include every
// name=value pair of labels.
func value(fams []*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return sample(f.GetType(), m), true
		}
	}
	return 0, false
}

func sample(typ dto.MetricType, m *dto.Metric) float64 {
	if typ == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestCapacityAtCreateRate: the days left on /metrics are the remaining IDs
// at the rate of committed creates (not of segment leases), and that rate
// is exported beside them; the purge's count of deleted keys is exported.
func TestCapacityAtCreateRate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := pgtest.Pool(t)
	now := time.Date(2026, 3, 1, 12, 10, 30, 0, time.UTC)
	store := allocstore.New(pool, allocstore.WithClock(func() time.Time { return now }))
	a, err := idalloc.New(ctx, store, idalloc.Config{
		Namespaces: []idalloc.Namespace{{Name: "default", Start: 1, End: 1_000_001, Step: 100_000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	poll.Until(t, "the first segment leased", 30*time.Second, func() bool {
		s, _ := a.Stats("default")
		return s.CurrentRemaining > 0
	})
	st := postgres.New(pool)
	tenant, err := st.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	// 33 creates two minutes ago, by the store's clock: 33 in the 330 s
	// of the last five minutes, 0.1/s.
	if _, err := pool.Exec(ctx, `
		INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version, created_at)
		SELECT i, 'c' || i, $1, 'generated', 'https://example.com/', 'https://example.com/', nextval('change_version_seq'), $2
		FROM generate_series(1, 33) AS i`, tenant, now.Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO idempotency_keys (tenant_id, idem_key, request_hash, created_at)
		SELECT $1, 'k' || i, sha256(i::text::bytea), now() - interval '25 hours' FROM generate_series(1, 7) AS i`, tenant); err != nil {
		t.Fatal(err)
	}

	c := metrics.New()
	purge := links.NewKeyPurge(st, links.KeyPurgeConfig{Every: 10 * time.Millisecond})
	c.Attach(metrics.Sources{Alloc: a, Namespaces: []string{"default"}, KeyPurge: purge})
	go c.RunCapacity(ctx, a, []string{"default"}, 10*time.Millisecond, nil)
	go purge.Run(ctx)

	poll.Until(t, "capacity metrics", 30*time.Second, func() bool {
		_, ok := value(scrape(t, c), "control_idalloc_create_rate_per_second")
		return ok
	})
	// One scrape: the capacity gauges come from one read of the authority.
	fams := scrape(t, c)
	rate, _ := value(fams, "control_idalloc_create_rate_per_second", "namespace", "default")
	days, _ := value(fams, "control_idalloc_capacity_days_left", "namespace", "default")
	remaining, _ := value(fams, "control_idalloc_capacity_ids", "namespace", "default", "state", "remaining")
	if rate != 0.1 || remaining == 0 || days != remaining/0.1/86400 {
		t.Errorf("create rate %v/s, days left %v with %v IDs remaining; want 0.1/s and %v days",
			rate, days, remaining, remaining/0.1/86400)
	}
	poll.Until(t, "7 keys purged", 30*time.Second, func() bool {
		v, _ := value(scrape(t, c), "control_idempotency_keys_purged_total")
		return v == 7
	})
}
