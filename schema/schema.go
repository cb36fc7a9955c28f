// Package schema holds the numbered SQL migrations of the authority database
// and applies them.
//
// Migrations run with github.com/jackc/tern/v2: it speaks pgx natively (no
// database/sql layer), keeps plain numbered .sql files, runs each in a
// transaction and holds a Postgres advisory lock while migrating, so two
// control processes starting together never race.
package schema

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable records the applied migration number.
const VersionTable = "schema_version"

// Migrate brings the database behind conn up to the newest migration.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return fmt.Errorf("migrate: load: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
