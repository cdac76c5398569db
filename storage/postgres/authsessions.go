package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/authd/authd/storage"
)

// CreateAuthSession inserts a; in a deferred transaction the insert is
// queued and goes with the commit (its failure fails the commit).
func (s *Store) CreateAuthSession(ctx context.Context, a *storage.AuthSession) error {
	const sql = `INSERT INTO auth_sessions (id, client_id, jkt, code_challenge, params, subject, amr,
		auth_time, version, done, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	args := []any{a.ID, a.ClientID, a.JKT, a.CodeChallenge, a.Params, a.Subject, nonNil(a.AMR), nullTime(a.AuthTime),
		a.Version, a.Done, storage.NormalizeTime(a.ExpiresAt), storage.NormalizeTime(a.CreatedAt)}
	if s.enqueue(ctx, "create auth session", sql, args...) {
		return nil
	}
	_, err := s.q(ctx).Exec(ctx, sql, args...)
	return translate("create auth session", err)
}

// GetAuthSession returns the open, unexpired session with this ID.
func (s *Store) GetAuthSession(ctx context.Context, id string, now time.Time) (*storage.AuthSession, error) {
	a := &storage.AuthSession{ID: id}
	var at *time.Time
	err := s.q(ctx).QueryRow(ctx, `SELECT client_id, jkt, code_challenge, params, subject, amr, auth_time, version,
		done, expires_at, created_at FROM auth_sessions WHERE id = $1 AND NOT done AND expires_at > $2`, id, now).
		Scan(&a.ClientID, &a.JKT, &a.CodeChallenge, &a.Params, &a.Subject, &a.AMR, &at, &a.Version, &a.Done,
			&a.ExpiresAt, &a.CreatedAt)
	if err != nil {
		return nil, translate("get auth session", err)
	}
	if at != nil {
		a.AuthTime = storage.NormalizeTime(*at)
	}
	if len(a.AMR) == 0 {
		a.AMR = nil
	}
	a.ExpiresAt, a.CreatedAt = storage.NormalizeTime(a.ExpiresAt), storage.NormalizeTime(a.CreatedAt)
	return a, nil
}

// UpdateAuthSession is one conditional write on the version: a
// concurrent update of the same row waits on its lock, then finds the
// version moved and updates nothing.
//
// In a deferred transaction the write is queued and checked at the commit
// (storage.ErrNotFound then fails the commit).
func (s *Store) UpdateAuthSession(ctx context.Context, a *storage.AuthSession, now time.Time) error {
	const sql = `UPDATE auth_sessions SET subject = $3, amr = $4, auth_time = $5, done = $6,
		version = version + 1 WHERE id = $1 AND version = $2 AND NOT done AND expires_at > $7`
	args := []any{a.ID, a.Version, a.Subject, nonNil(a.AMR), nullTime(a.AuthTime), a.Done, now}
	if s.enqueueChecked(ctx, queuedOp{op: "update auth session", errNone: storage.ErrNotFound}, sql, args...) {
		a.Version++
		return nil
	}
	tag, err := s.q(ctx).Exec(ctx, sql, args...)
	if err != nil {
		return translate("update auth session", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: update auth session: %w", storage.ErrNotFound)
	}
	a.Version++
	return nil
}

// DeleteExpiredAuthSessions deletes expired sessions.
func (s *Store) DeleteExpiredAuthSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM auth_sessions WHERE id IN (
		SELECT id FROM auth_sessions WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, translate("delete expired auth sessions", err)
	}
	return int(tag.RowsAffected()), nil
}

// endAuthSessions ends the subject's open auth sessions (EndSessions,
// RevokeSubject): their first factor no longer stands, as the browser's
// half-signed-in session ends. The version moves, so a step in flight
// loses its conditional write (UpdateAuthSession).
func endAuthSessions(ctx context.Context, q querier, subject string) error {
	_, err := q.Exec(ctx, `UPDATE auth_sessions SET done = true, version = version + 1
		WHERE subject = $1 AND NOT done`, subject)
	return err
}
