package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgelink/edgelink/control/webhooks"
)

// BenchmarkLinkInsertTriggers is what schema 018's link triggers cost a
// batch create: 100 links in one INSERT, as the create path writes them,
// with the triggers dropped (before 018), with no endpoint anywhere, with
// another tenant's endpoint subscribed, and with the writing tenant's
// (each link then writes its event). Compare the ns/op of the four in one
// run; the machine is shared, so the figures are indicative.
func BenchmarkLinkInsertTriggers(b *testing.B) {
	for _, tc := range []struct {
		name  string
		setup func(b *testing.B, f *fixture)
	}{
		{"no_triggers", func(b *testing.B, f *fixture) {
			for _, trg := range []string{"webhook_link_created", "webhook_link_changed"} {
				if _, err := f.pool.Exec(context.Background(), `DROP TRIGGER `+trg+` ON links`); err != nil {
					b.Fatal(err)
				}
			}
		}},
		{"no_endpoints", func(*testing.B, *fixture) {}},
		{"other_tenant_subscribed", func(b *testing.B, f *fixture) { f.subscribe(b, f.tenants[1]) }},
		{"own_tenant_subscribed", func(b *testing.B, f *fixture) { f.subscribe(b, f.tenants[0]) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, 0)
			tc.setup(b, f)
			ctx := context.Background()
			next := int64(1_000_000)
			b.ResetTimer()
			for range b.N {
				if _, err := f.pool.Exec(ctx, `INSERT INTO links (id, code, tenant_id, code_source, url_original, url, version)
					SELECT $1 + g, 'b' || ($1 + g), $2, 'generated', 'https://example.com/x', 'https://example.com/x', nextval('change_version_seq')
					FROM generate_series(1, 100) g`, next, f.tenants[0]); err != nil {
					b.Fatal(err)
				}
				next += 100
				b.StopTimer()
				if _, err := f.pool.Exec(ctx, `DELETE FROM webhook_outbox`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

func (f *fixture) subscribe(tb testing.TB, tenant int64) {
	tb.Helper()
	e := &webhooks.Endpoint{ID: "ep_0000000000000000000000bb", TenantID: tenant, URL: "https://h.example/",
		EventTypes: []string{"link.created"}, Secret: make([]byte, 32), CreatedAt: time.Now()}
	if err := f.st.CreateEndpoint(context.Background(), e, 10); err != nil {
		tb.Fatal(err)
	}
}
