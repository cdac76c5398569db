package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

// PutReplayRecord inserts rec and marks the grant's other records revoked
// (superseded) in one statement, in ctx's transaction when there is one:
// the redeeming transaction, so the record commits exactly when the code
// is redeemed (docs/architecture.md, "The exchange"). In a deferred
// transaction it sends the queued writes with it, in one round trip.
func (s *Store) PutReplayRecord(ctx context.Context, rec *storage.ReplayRecord) ([]string, error) {
	pq := putReplayQuery(rec)
	if s.queueFrom(ctx) != nil {
		// A deferred transaction: the queued token writes and this one in
		// one round trip.
		return s.flushWith(ctx, pq)
	}
	rows, err := s.q(ctx).Query(ctx, pq.sql, pq.args...)
	if err != nil {
		return nil, translate(pq.op, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(pq.op, err)
	}
	return keys, nil
}

// putReplayQuery is PutReplayRecord's statement: the insert, and the
// grant's other records marked revoked, returning their keys.
func putReplayQuery(rec *storage.ReplayRecord) *queuedQuery {
	return &queuedQuery{op: "put replay record", sql: `WITH ins AS (
			INSERT INTO replay_records (key, request_id, client_id, subject, fingerprint, sealed, window_end, revoked)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		)
		UPDATE replay_records SET revoked = true
		WHERE request_id = $2 AND key <> $1 AND NOT revoked
		RETURNING key`,
		args: []any{rec.Key, rec.RequestID, rec.ClientID, rec.Subject, rec.Fingerprint, rec.Sealed,
			storage.NormalizeTime(rec.WindowEnd), rec.Revoked}}
}

// GetReplayRecord returns the record with key, or storage.ErrNotFound.
func (s *Store) GetReplayRecord(ctx context.Context, key string) (*storage.ReplayRecord, error) {
	rec := &storage.ReplayRecord{Key: key}
	err := s.q(ctx).QueryRow(ctx, `SELECT request_id, client_id, subject, fingerprint, sealed, window_end, revoked
		FROM replay_records WHERE key = $1`, key).
		Scan(&rec.RequestID, &rec.ClientID, &rec.Subject, &rec.Fingerprint, &rec.Sealed, &rec.WindowEnd, &rec.Revoked)
	if err != nil {
		return nil, translate("get replay record", err)
	}
	rec.WindowEnd = storage.NormalizeTime(rec.WindowEnd)
	return rec, nil
}

// DeleteEndedReplayRecord deletes the record with key if its window ended.
func (s *Store) DeleteEndedReplayRecord(ctx context.Context, key string, now time.Time) error {
	_, err := s.q(ctx).Exec(ctx, `DELETE FROM replay_records WHERE key = $1 AND window_end <= $2`, key, now)
	return translate("delete ended replay record", err)
}

// ReplayKeys returns the keys of the records in scope.
func (s *Store) ReplayKeys(ctx context.Context, scope storage.ReplayScope) ([]string, error) {
	var (
		where []string
		args  []any
	)
	for _, f := range []struct{ col, v string }{{"request_id", scope.RequestID}, {"client_id", scope.ClientID}, {"subject", scope.Subject}} {
		if f.v != "" {
			args = append(args, f.v)
			where = append(where, fmt.Sprintf("%s = $%d", f.col, len(args)))
		}
	}
	if len(where) == 0 {
		return nil, fmt.Errorf("postgres: replay keys: an empty scope")
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT key FROM replay_records WHERE `+strings.Join(where, " AND "), args...)
	if err != nil {
		return nil, translate("replay keys", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return keys, translate("replay keys", err)
}

// revokeReplaySQL marks one grant's replay records revoked; run in the
// transaction that revokes the grant's tokens.
const revokeReplaySQL = `UPDATE replay_records SET revoked = true WHERE request_id = $1 AND NOT revoked`

// GrantActive reports whether any refresh token of requestID is active.
func (s *Store) GrantActive(ctx context.Context, requestID string) (bool, error) {
	var ok bool
	err := s.q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refresh_tokens WHERE request_id = $1 AND active)`, requestID).Scan(&ok)
	return ok, translate("grant active", err)
}
