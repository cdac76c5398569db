// Package pgtest gives tests a fresh, migrated PostgreSQL schema.
//
// The server comes from AUTHD_TEST_POSTGRES_DSN, e.g.
//
//	AUTHD_TEST_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// When it is unset the test is skipped, unless AUTHD_TEST_REQUIRE_BACKENDS=1
// or CI=true, in which case it fails: CI cannot skip the backend silently.
//
// Each call creates a uniquely named schema, applies every migration to it,
// and drops it (CASCADE) when the test ends, so tests may run in parallel.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage/postgres"
)

// EnvDSN names the environment variable holding the test server's DSN.
const EnvDSN = "AUTHD_TEST_POSTGRES_DSN"

// BaseDSN returns the DSN from AUTHD_TEST_POSTGRES_DSN. If it is unset it
// skips the test, or fails it when AUTHD_TEST_REQUIRE_BACKENDS=1 or CI=true.
func BaseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvDSN)
	if dsn != "" {
		return dsn
	}
	if os.Getenv("AUTHD_TEST_REQUIRE_BACKENDS") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): "+
			"PostgreSQL tests are required here (AUTHD_TEST_REQUIRE_BACKENDS=1 or CI=true)", EnvDSN)
	}
	t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run PostgreSQL tests", EnvDSN)
	return ""
}

// EmptyDSN creates a fresh, empty schema, registers its removal with
// t.Cleanup, and returns a DSN whose connections use it as search_path.
// Nothing is migrated.
func EmptyDSN(t testing.TB) string {
	t.Helper()
	base := BaseDSN(t)
	ctx := context.Background()

	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	schema := "authd_test_" + hex.EncodeToString(b[:])

	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvDSN, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})

	dsn, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// DSN returns a DSN for a fresh schema with every migration applied, removed
// when the test ends. Another pool or process can connect with it and share
// the schema.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := EmptyDSN(t)
	pool := connect(t, dsn)
	defer pool.Close()
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// New returns a pool on a fresh, migrated schema. The pool is closed and the
// schema dropped when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := connect(t, DSN(t))
	t.Cleanup(pool.Close)
	return pool
}

// NewEmpty returns a pool on a fresh schema with nothing migrated. The pool
// is closed and the schema dropped when the test ends.
func NewEmpty(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool := connect(t, EmptyDSN(t))
	t.Cleanup(pool.Close)
	return pool
}

func connect(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	return pool
}

// withSearchPath sets the search_path runtime parameter of a URL or
// keyword/value DSN.
func withSearchPath(dsn, schema string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// keyword/value form
		return fmt.Sprintf("%s search_path=%s", dsn, schema), nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
