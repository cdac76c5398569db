package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/authd/authd/migrations"
)

// VersionTable is the table, in the connection's search_path, in which tern
// records the applied schema version.
const VersionTable = "schema_version"

// Migrate applies every pending migration of package migrations, up to the
// latest. It runs on one connection acquired from pool; tern holds a
// PostgreSQL advisory lock meanwhile, so concurrent Migrate calls (several
// replicas starting at once) apply each file exactly once, one transaction
// per file. It returns the first error, wrapped.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	m, err := migrate.NewMigrator(ctx, conn.Conn(), VersionTable)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return fmt.Errorf("postgres: migrate: load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// SchemaStatus returns the schema version applied to the database (0 if
// none) and the latest version package migrations provides. It writes
// nothing. The schema is up to date when current == latest.
func SchemaStatus(ctx context.Context, pool *pgxpool.Pool) (current, latest int32, err error) {
	latest, err = LatestVersion()
	if err != nil {
		return 0, 0, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists); err != nil {
		return 0, 0, fmt.Errorf("postgres: schema status: %w", err)
	}
	if !exists {
		return 0, latest, nil
	}
	if err := pool.QueryRow(ctx, `SELECT version FROM `+VersionTable).Scan(&current); err != nil {
		return 0, 0, fmt.Errorf("postgres: schema status: %w", err)
	}
	return current, latest, nil
}

// LatestVersion returns the highest migration number in package migrations.
func LatestVersion() (int32, error) {
	// A Migrator without a connection only loads and parses files.
	m, err := migrate.NewMigrator(context.Background(), nil, VersionTable)
	if err != nil {
		return 0, fmt.Errorf("postgres: load migrations: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return 0, fmt.Errorf("postgres: load migrations: %w", err)
	}
	if len(m.Migrations) == 0 {
		return 0, nil
	}
	return m.Migrations[len(m.Migrations)-1].Sequence, nil
}
