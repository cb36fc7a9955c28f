package postgres

import (
	"context"
	"testing"

	"github.com/edgelink/edgelink/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newStore is a store on a fresh database, and the database's pool.
func newStore(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Pool(t)
	return New(pool), pool
}

// storeWithTenant is a store on a fresh database holding one tenant, acme,
// and that tenant's id.
func storeWithTenant(t *testing.T) (*Store, int64) {
	t.Helper()
	st, _ := newStore(t)
	tenant, err := st.CreateTenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return st, tenant
}
