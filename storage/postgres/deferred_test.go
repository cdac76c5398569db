package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestBreakCheckedWriteCommitsAnyway: issueCode's batch is
// BEGIN; INSERT code; INSERT pkce; UPDATE sessions (checked: 1 row); COMMIT.
// An UPDATE matching 0 rows is not an error in PostgreSQL, so the COMMIT in
// the same pipeline runs: the code is committed although Commit reports
// ErrNotFound ("Your session has ended ... no code exists").
func TestBreakCheckedWriteCommitsAnyway(t *testing.T) {
	s := postgres.New(pgtest.New(t))
	ctx := t.Context()
	if err := s.CreateClient(ctx, &storage.Client{ID: "app", TokenEndpointAuthMethod: "none"}); err != nil {
		t.Fatal(err)
	}
	u := &storage.User{Username: "alice", PasswordHash: []byte("h")}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.CreateSession(ctx, &storage.Session{ID: "s1", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The session ends (sign-out) after it was read, before the commit.
	if err := s.DeleteSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	tx, err := s.BeginDeferredTX(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &fosite.Request{ID: "req-1", Client: &storage.Client{ID: "app"}, RequestedAt: now,
		Session: &fosite.DefaultSession{Subject: u.Subject}}
	if err := s.CreateAuthorizeCodeSession(tx, "code-sig", r); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePKCERequestSession(tx, "code-sig", r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TouchSession(tx, "s1", "", now, time.Hour); err != nil {
		t.Fatal(err)
	}
	err = s.Commit(tx)
	_ = s.Rollback(tx)
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Commit = %v, want ErrNotFound", err)
	}
	if _, err := s.GetAuthorizeCodeSession(ctx, "code-sig", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("after a failed commit (session ended) the code exists: GetAuthorizeCodeSession err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetPKCERequestSession(ctx, "code-sig", &fosite.DefaultSession{}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("after a failed commit the PKCE session exists: err = %v", err)
	}
}
