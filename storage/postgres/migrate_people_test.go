package postgres_test

import (
	"errors"
	"regexp"
	"testing"

	"github.com/jackc/tern/v2/migrate"
	"github.com/ory/fosite"

	"github.com/authd/authd/migrations"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestMigrationGivesUsersSubjects: migration 005 gives existing users a
// random subject, and the codes and tokens issued before it (whose subject
// was the username) carry that subject afterwards, so they keep working,
// introspect with the new sub and are revoked with the user. ASCII
// usernames are lower-cased (PRECIS case folding) where no other user
// collides.
func TestMigrationGivesUsersSubjects(t *testing.T) {
	ctx := t.Context()
	pool := pgtest.NewEmpty(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewMigrator(ctx, conn.Conn(), postgres.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO users (username, password_hash) VALUES ('Alice', 'h1'), ('bob', 'h2'), ('Carl', 'h3'), ('carl', 'h4')`,
		`INSERT INTO clients (id, token_endpoint_auth_method) VALUES ('app', 'none')`,
		`INSERT INTO access_tokens (signature, request_id, client_id, subject, requested_at, expires_at, session)
		 VALUES ('sig-a', 'req-a', 'app', 'Alice', now(), now() + interval '1 hour', '{"subject":"Alice","username":"Alice"}')`,
		`INSERT INTO refresh_tokens (signature, request_id, client_id, subject, requested_at, expires_at, session)
		 VALUES ('rsig-a', 'req-a', 'app', 'Alice', now(), now() + interval '1 day', '{"subject":"Alice","username":"Alice"}')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Release()
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s := postgres.New(pool)
	alice, err := s.GetUser(ctx, "alice")
	if err != nil {
		t.Fatalf("Alice after migration: %v", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(alice.Subject) {
		t.Errorf("subject %q is not 32 hex digits", alice.Subject)
	}
	// Carl and carl collide after case folding: both keep their names.
	for _, n := range []string{"Carl", "carl", "bob"} {
		if _, err := s.GetUser(ctx, n); err != nil {
			t.Errorf("user %q after migration: %v", n, err)
		}
	}
	req, err := s.GetAccessTokenSession(ctx, "sig-a", &fosite.DefaultSession{})
	if err != nil {
		t.Fatalf("old access token after migration: %v", err)
	}
	if sub := req.GetSession().GetSubject(); sub != alice.Subject {
		t.Errorf("old token's subject = %q, want %q", sub, alice.Subject)
	}
	if u := req.GetSession().GetUsername(); u != "Alice" {
		t.Errorf("old token's username = %q, want the name it was issued to", u)
	}
	if err := s.RevokeSubject(ctx, alice.Subject); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAccessTokenSession(ctx, "sig-a", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrInactiveToken) {
		t.Errorf("old token after RevokeSubject: %v, want ErrInactiveToken", err)
	}
	// And back down: the down migration restores usernames as subjects.
	conn, err = pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m, _ = migrate.NewMigrator(ctx, conn.Conn(), postgres.VersionTable)
	_ = m.LoadMigrations(migrations.FS)
	if err := m.MigrateTo(ctx, 3); err != nil {
		t.Fatalf("migrate down to 3: %v", err)
	}
	var sub string
	if err := conn.QueryRow(ctx, `SELECT session->>'subject' FROM access_tokens WHERE signature = 'sig-a'`).Scan(&sub); err != nil || sub != "alice" {
		t.Errorf("after down migration the token's subject = %q, %v; want alice", sub, err)
	}
}
