package postgres

import (
	"context"
	"testing"

	"github.com/edgelink/edgelink/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// storeWithTenant is a store on a fresh database holding one tenant, acme,
// and that tenant's id.
func storeWithTenant(t *testing.T) (*Store, int64) {
	t.Helper()
	st := New(pgtest.Pool(t))
	tenant, err := st.CreateTenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return st, tenant
}
