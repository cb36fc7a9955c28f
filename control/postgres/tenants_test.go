package postgres

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edgelink/edgelink/shared/link"
)

func TestTenantNamesAreCheckedBeforeTheDatabase(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	if _, err := st.CreateTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want error
	}{
		{"", link.ErrInvalidInput},
		{" acme", link.ErrInvalidInput},
		{"acme\n", link.ErrInvalidInput},
		{"ac\x00me", link.ErrInvalidInput},
		{"bad\xffutf8", link.ErrInvalidInput},
		{strings.Repeat("é", 201), link.ErrInvalidInput},
		{"acme", ErrTenantExists},
	} {
		_, err := st.CreateTenant(ctx, tc.name)
		if !errors.Is(err, tc.want) {
			t.Errorf("CreateTenant(%q): %v; want %v", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "SQLSTATE") {
			t.Errorf("CreateTenant(%q) shows the driver's error: %v", tc.name, err)
		}
		_, _, err = st.CreateTenantWithKey(ctx, tc.name)
		if !errors.Is(err, tc.want) {
			t.Errorf("CreateTenantWithKey(%q): %v; want %v", tc.name, err, tc.want)
		}
	}
	if _, err := st.CreateTenant(ctx, strings.Repeat("é", 200)); err != nil {
		t.Errorf("a 200-character name: %v", err)
	}
	// Nothing refused left a tenant or a key behind.
	var tenants, keys int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_keys)`).Scan(&tenants, &keys); err != nil {
		t.Fatal(err)
	}
	if tenants != 2 || keys != 0 {
		t.Errorf("%d tenants, %d keys; want 2 and 0", tenants, keys)
	}
}

func TestTenantLimits(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	_, key, err := st.CreateTenantWithLimits(ctx, "acme", TenantLimits{PerSecond: 2.5, Burst: 7})
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := st.CreateTenantWithKey(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	auth := func(key string) TenantLimits {
		t.Helper()
		_, r, b, err := st.Authenticate(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return TenantLimits{r, b}
	}
	if got := auth(key); got != (TenantLimits{2.5, 7}) {
		t.Errorf("acme's limits %+v", got)
	}
	if got := auth(other); got != (TenantLimits{}) {
		t.Errorf("bob's limits %+v; want none of its own", got)
	}

	ptr := func(v float64) *float64 { return &v }
	iptr := func(v int) *int { return &v }
	for _, tc := range []struct {
		what   string
		change LimitChange
		want   TenantLimits
	}{
		{"rate only: burst kept", LimitChange{PerSecond: ptr(40)}, TenantLimits{40, 7}},
		{"burst only: rate kept", LimitChange{Burst: iptr(80)}, TenantLimits{40, 80}},
		{"rate back to the default", LimitChange{PerSecond: ptr(0)}, TenantLimits{0, 80}},
		{"both back to the default", LimitChange{PerSecond: ptr(0), Burst: iptr(0)}, TenantLimits{}},
		{"both", LimitChange{PerSecond: ptr(0.5), Burst: iptr(1)}, TenantLimits{0.5, 1}},
	} {
		got, err := st.SetTenantLimits(ctx, "acme", tc.change)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got != tc.want || auth(key) != tc.want {
			t.Errorf("%s: set %+v, authenticated with %+v; want %+v", tc.what, got, auth(key), tc.want)
		}
	}
	for _, bad := range []LimitChange{
		{PerSecond: ptr(-1)}, {PerSecond: ptr(math.NaN())}, {PerSecond: ptr(math.Inf(1))}, {PerSecond: ptr(MaxTenantRate + 1)},
		{Burst: iptr(-1)}, {Burst: iptr(MaxTenantBurst + 1)},
	} {
		if _, err := st.SetTenantLimits(ctx, "acme", bad); !errors.Is(err, link.ErrInvalidInput) {
			t.Errorf("SetTenantLimits(%+v): %v; want invalid input", bad, err)
		}
	}
	if got := auth(key); got != (TenantLimits{0.5, 1}) {
		t.Errorf("refused changes changed the limits to %+v", got)
	}
	if _, err := st.SetTenantLimits(ctx, "nosuch", LimitChange{Burst: iptr(3)}); !errors.Is(err, ErrNoTenant) || !errors.Is(err, link.ErrNotFound) {
		t.Errorf("SetTenantLimits of an unknown tenant: %v", err)
	}
	if _, _, err := st.CreateTenantWithLimits(ctx, "carol", TenantLimits{Burst: -3}); !errors.Is(err, link.ErrInvalidInput) {
		t.Errorf("a tenant with a negative burst: %v", err)
	}

	if _, err := st.CreateAPIKey(ctx, mustTenant(t, st, "bob")); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, other); err != nil {
		t.Fatal(err)
	}
	ts, err := st.Tenants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name   string
		Limits TenantLimits
		Keys   int
	}
	var got []row
	for _, tn := range ts {
		got = append(got, row{tn.Name, tn.Limits, tn.ActiveKeys})
	}
	want := []row{{"acme", TenantLimits{0.5, 1}, 1}, {"bob", TenantLimits{}, 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Tenants (-want +got):\n%s", d)
	}
}

func mustTenant(t *testing.T, st *Store, name string) int64 {
	t.Helper()
	id, err := st.TenantByName(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestKeyErrorsSayWhatHappened(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	if _, err := st.TenantByName(ctx, "nosuch"); !errors.Is(err, ErrNoTenant) || !errors.Is(err, link.ErrNotFound) ||
		strings.Contains(err.Error(), "link") {
		t.Errorf("TenantByName of an unknown tenant: %v", err)
	}
	_, key, err := st.CreateTenantWithKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, KeyPrefix+"never-issued"); !errors.Is(err, ErrNoKey) {
		t.Errorf("revoking an unknown key: %v; want ErrNoKey", err)
	}
	if err := st.RevokeAPIKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, key); !errors.Is(err, ErrKeyRevoked) || !strings.Contains(err.Error(), "(at ") {
		t.Errorf("revoking a revoked key: %v; want ErrKeyRevoked with when", err)
	}
	if _, _, _, err := st.Authenticate(ctx, key); !errors.Is(err, link.ErrUnauthorized) {
		t.Errorf("a revoked key authenticates: %v", err)
	}
}
