package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/storage/postgres"
	"github.com/authd/authd/storage/postgres/pgtest"
)

// TestTouchSessionIsHOT: touches within the granularity leave the indexed
// idle expiry as it is, so PostgreSQL updates the row in place (a HOT
// update, no new index entries); a touch past it moves the expiry and is
// an ordinary update. One connection, so its statistics are this test's.
func TestTouchSessionIsHOT(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := postgres.New(pool)
	ctx := t.Context()
	u := &storage.User{Username: "alice", PasswordHash: []byte("h")}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if err := s.CreateSession(ctx, &storage.Session{ID: "h1", Subject: u.Subject, AuthTime: now,
		IdleExpiresAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(12 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	stats := func() (upd, hot int64) {
		t.Helper()
		// Flush this backend's pending statistics, then read them.
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE relname = 'sessions' AND schemaname = current_schema()`).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		return upd, hot
	}
	upd0, hot0 := stats()
	const idle = 2 * time.Hour // granularity 72 s
	for i := range 10 {
		if _, err := s.TouchSession(ctx, "h1", "", now.Add(time.Duration(i)*time.Second), idle); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.TouchSession(ctx, "h1", "", now.Add(2*time.Minute), idle)
	if err != nil {
		t.Fatal(err)
	}
	if !got.IdleExpiresAt.Equal(now.Add(2*time.Minute + idle)) {
		t.Errorf("idle expiry after a touch past the granularity: %v, want %v", got.IdleExpiresAt, now.Add(2*time.Minute+idle))
	}
	upd, hot := stats()
	if upd-upd0 != 11 || hot-hot0 != 10 {
		t.Errorf("sessions: %d updates, %d of them HOT; want 11 and 10", upd-upd0, hot-hot0)
	}
}
