package pgtest

import (
	"context"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabasesAreFreshAndMigrated(t *testing.T) {
	ctx := context.Background()
	a, b := Pool(t), Pool(t)
	if _, err := a.Exec(ctx, "INSERT INTO tenants (name) VALUES ('only-in-a')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM tenants").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("second database sees %d tenants from the first; want 0", n)
	}
}
