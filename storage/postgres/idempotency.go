package postgres

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.IdempotencyStore = (*Store)(nil)

// idempotencyColumns are the columns scanIdempotency reads, in order.
const idempotencyColumns = `credential, endpoint, key_hash, request_hash, status, response, created_at, expires_at`

// idempotencyLockID maps a key to a 64-bit value from which the advisory
// lock that serializes its claims is derived (see ClaimIdempotencyKey). A
// collision between two keys only makes one of them answer "in flight"
// while the other is being processed.
func idempotencyLockID(k storage.IdempotencyKey) int64 {
	h := sha256.New()
	h.Write([]byte("authd/idempotency-lock/v1"))
	for _, part := range [][]byte{k.Credential, []byte(k.Endpoint), k.KeyHash} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

func scanIdempotency(row pgx.Row) (*storage.IdempotencyRecord, error) {
	var (
		r      storage.IdempotencyRecord
		status *int32
	)
	if err := row.Scan(&r.Credential, &r.Endpoint, &r.KeyHash, &r.RequestHash, &status, &r.Response,
		&r.CreatedAt, &r.ExpiresAt); err != nil {
		return nil, err
	}
	if status != nil {
		r.Status = int(*status)
	}
	r.CreatedAt = storage.NormalizeTime(r.CreatedAt)
	r.ExpiresAt = storage.NormalizeTime(r.ExpiresAt)
	return &r, nil
}

// ClaimIdempotencyKey claims c's key for the transaction in ctx (see
// storage.IdempotencyStore).
//
// A claim that is inserted but not yet committed is invisible to other
// transactions, and a second INSERT of the same primary key would block on
// it. So every claim first takes a transaction-scoped advisory lock on the
// key without waiting (pg_try_advisory_xact_lock): failing to get it means
// another transaction holds the key, ErrIdempotencyInFlight. The holder
// releases it only when it commits (its row then visible) or rolls back (its
// row gone). Under the lock, an expired record of the key is deleted and the
// claim itself is INSERT … ON CONFLICT DO NOTHING RETURNING: no row back
// means a completed record exists, which is read and compared.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, c storage.IdempotencyClaim) (*storage.IdempotencyRecord, bool, error) {
	tx := s.txFrom(ctx)
	if tx == nil {
		return nil, false, errors.New("postgres: claim idempotency key: no transaction in context")
	}
	var locked bool
	// Advisory locks are database-wide: mix in the schema, so deployments
	// (or tests) sharing a database in different schemas never contend.
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema(), $1))`,
		idempotencyLockID(c.IdempotencyKey)).Scan(&locked); err != nil {
		return nil, false, translate("claim idempotency key: lock", err)
	}
	if !locked {
		return nil, false, fmt.Errorf("postgres: claim idempotency key: %w", storage.ErrIdempotencyInFlight)
	}
	createdAt, expiresAt := storage.NormalizeTime(c.CreatedAt), storage.NormalizeTime(c.ExpiresAt)
	if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys
		WHERE credential = $1 AND endpoint = $2 AND key_hash = $3 AND expires_at <= $4`,
		c.Credential, c.Endpoint, c.KeyHash, createdAt); err != nil {
		return nil, false, translate("claim idempotency key: forget expired", err)
	}
	var one int
	err := tx.QueryRow(ctx, `INSERT INTO idempotency_keys
		(credential, endpoint, key_hash, request_hash, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT DO NOTHING RETURNING 1`,
		c.Credential, c.Endpoint, c.KeyHash, c.RequestHash, createdAt, expiresAt).Scan(&one)
	if err == nil {
		return nil, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, translate("claim idempotency key", err)
	}
	rec, err := scanIdempotency(tx.QueryRow(ctx, `SELECT `+idempotencyColumns+` FROM idempotency_keys
		WHERE credential = $1 AND endpoint = $2 AND key_hash = $3`, c.Credential, c.Endpoint, c.KeyHash))
	if err != nil {
		return nil, false, translate("claim idempotency key: read stored", err)
	}
	switch {
	case rec.Status == 0:
		// Committed without being completed: a caller broke the protocol.
		// Treat it as held until it expires.
		return nil, false, fmt.Errorf("postgres: claim idempotency key: uncompleted record: %w", storage.ErrIdempotencyInFlight)
	case !bytes.Equal(rec.RequestHash, c.RequestHash):
		return nil, false, fmt.Errorf("postgres: claim idempotency key: %w", storage.ErrIdempotencyKeyReused)
	}
	return rec, false, nil
}

// CompleteIdempotencyKey stores the response of a claimed key, or returns
// storage.ErrNotFound if the key is not in flight.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, k storage.IdempotencyKey, status int, response []byte) error {
	if status == 0 {
		return errors.New("postgres: complete idempotency key: status 0")
	}
	if response == nil {
		response = []byte{}
	}
	tag, err := s.q(ctx).Exec(ctx, `UPDATE idempotency_keys SET status = $4, response = $5
		WHERE credential = $1 AND endpoint = $2 AND key_hash = $3 AND status IS NULL`,
		k.Credential, k.Endpoint, k.KeyHash, status, response)
	if err != nil {
		return translate("complete idempotency key", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: complete idempotency key: %w", storage.ErrNotFound)
	}
	return nil
}

// GetIdempotencyKey returns the stored record, or storage.ErrNotFound.
func (s *Store) GetIdempotencyKey(ctx context.Context, k storage.IdempotencyKey) (*storage.IdempotencyRecord, error) {
	rec, err := scanIdempotency(s.q(ctx).QueryRow(ctx, `SELECT `+idempotencyColumns+` FROM idempotency_keys
		WHERE credential = $1 AND endpoint = $2 AND key_hash = $3`, k.Credential, k.Endpoint, k.KeyHash))
	if err != nil {
		return nil, translate("get idempotency key", err)
	}
	return rec, nil
}

// DeleteExpiredIdempotencyKeys deletes up to limit records (all if
// limit <= 0) with expires_at <= now and returns how many it deleted.
func (s *Store) DeleteExpiredIdempotencyKeys(ctx context.Context, now time.Time, limit int) (int, error) {
	var lim any
	if limit > 0 {
		lim = limit
	}
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM idempotency_keys WHERE (credential, endpoint, key_hash) IN (
		SELECT credential, endpoint, key_hash FROM idempotency_keys
		WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`,
		storage.NormalizeTime(now), lim)
	if err != nil {
		return 0, translate("delete expired idempotency keys", err)
	}
	return int(tag.RowsAffected()), nil
}
