package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

// This file is storage.FactorStore: TOTP secrets (sealed by package totp),
// recovery codes (keyed hashes), the operator's requirement per user, and
// the raise of a session to the factors it proved (migration 013).

// PutPendingTOTP implements storage.FactorStore: an upsert that leaves a
// confirmed row alone (then no row is returned: ErrAlreadyExists).
func (s *Store) PutPendingTOTP(ctx context.Context, subject string, sealed []byte, now time.Time) error {
	var one int
	err := s.q(ctx).QueryRow(ctx, `INSERT INTO totp_factors (subject, secret, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (subject) DO UPDATE SET secret = excluded.secret, created_at = excluded.created_at, last_step = 0
		WHERE totp_factors.confirmed_at IS NULL
		RETURNING 1`, subject, sealed, storage.NormalizeTime(now)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		// The conflict's WHERE kept the confirmed row.
		return fmt.Errorf("postgres: put totp: a confirmed one exists: %w", storage.ErrAlreadyExists)
	}
	return translate("put totp", err)
}

// GetTOTP implements storage.FactorStore.
func (s *Store) GetTOTP(ctx context.Context, subject string) (*storage.TOTP, error) {
	t := storage.TOTP{Subject: subject}
	var confirmed *time.Time
	err := s.q(ctx).QueryRow(ctx, `SELECT secret, last_step, created_at, confirmed_at FROM totp_factors WHERE subject = $1`,
		subject).Scan(&t.Secret, &t.LastStep, &t.CreatedAt, &confirmed)
	if err != nil {
		return nil, translate("get totp", err)
	}
	t.Confirmed = confirmed != nil
	t.CreatedAt = storage.NormalizeTime(t.CreatedAt)
	return &t, nil
}

// ConfirmTOTP implements storage.FactorStore in one transaction: the
// conditional confirmation (confirmed_at IS NULL) decides a race of two
// confirmations, then the codes are replaced.
func (s *Store) ConfirmTOTP(ctx context.Context, subject string, step int64, codeHashes [][]byte, now time.Time) error {
	now = storage.NormalizeTime(now)
	return s.inTx(ctx, "confirm totp", func(q querier) error {
		var one int
		if err := q.QueryRow(ctx, `UPDATE totp_factors SET confirmed_at = $3, last_step = $2
			WHERE subject = $1 AND confirmed_at IS NULL RETURNING 1`, subject, step, now).Scan(&one); err != nil {
			return translate("confirm totp", err)
		}
		return replaceCodes(ctx, q, subject, codeHashes, now)
	})
}

func replaceCodes(ctx context.Context, q querier, subject string, codeHashes [][]byte, now time.Time) error {
	if _, err := q.Exec(ctx, `DELETE FROM recovery_codes WHERE subject = $1`, subject); err != nil {
		return translate("delete recovery codes", err)
	}
	_, err := q.Exec(ctx, `INSERT INTO recovery_codes (subject, code_hash, created_at)
		SELECT $1, h, $3 FROM unnest($2::bytea[]) AS h`, subject, codeHashes, now)
	return translate("insert recovery codes", err)
}

// UseTOTPStep implements storage.FactorStore: last_step moves forward
// only, in one conditional UPDATE (RFC 6238 §5.2), so of concurrent
// uses of one step exactly one updates a row.
func (s *Store) UseTOTPStep(ctx context.Context, subject string, step int64) error {
	var last int64
	err := s.q(ctx).QueryRow(ctx, `WITH u AS (
			UPDATE totp_factors SET last_step = $2
			WHERE subject = $1 AND confirmed_at IS NOT NULL AND last_step < $2 RETURNING last_step)
		SELECT coalesce((SELECT last_step FROM u), -1)`, subject, step).Scan(&last)
	if err != nil {
		return translate("use totp step", err)
	}
	if last == step {
		return nil
	}
	// No row moved: used already, or no confirmed factor.
	var confirmed bool
	err = s.q(ctx).QueryRow(ctx, `SELECT confirmed_at IS NOT NULL FROM totp_factors WHERE subject = $1`, subject).Scan(&confirmed)
	if err != nil || !confirmed {
		return fmt.Errorf("postgres: use totp step: no confirmed factor: %w", storage.ErrNotFound)
	}
	return fmt.Errorf("postgres: use totp step: already used: %w", storage.ErrInactiveToken)
}

// UseRecoveryCode implements storage.FactorStore: one conditional UPDATE
// (used_at IS NULL) spends the code.
func (s *Store) UseRecoveryCode(ctx context.Context, subject string, codeHash []byte, now time.Time) (int, error) {
	var left int
	err := s.q(ctx).QueryRow(ctx, `WITH u AS (
			UPDATE recovery_codes SET used_at = $3
			WHERE subject = $1 AND code_hash = $2 AND used_at IS NULL RETURNING 1)
		SELECT (SELECT count(*) FROM recovery_codes WHERE subject = $1 AND used_at IS NULL) - 1
		FROM u`, subject, codeHash, storage.NormalizeTime(now)).Scan(&left)
	if err != nil {
		return 0, translate("use recovery code", err)
	}
	// The count reads the statement's snapshot, which still has the code
	// unused: hence the - 1.
	return left, nil
}

// ReplaceRecoveryCodes implements storage.FactorStore.
func (s *Store) ReplaceRecoveryCodes(ctx context.Context, subject string, codeHashes [][]byte, now time.Time) error {
	return s.inTx(ctx, "replace recovery codes", func(q querier) error {
		var one int
		if err := q.QueryRow(ctx, `SELECT 1 FROM totp_factors WHERE subject = $1 AND confirmed_at IS NOT NULL FOR UPDATE`,
			subject).Scan(&one); err != nil {
			return translate("replace recovery codes", err)
		}
		return replaceCodes(ctx, q, subject, codeHashes, storage.NormalizeTime(now))
	})
}

// RecoveryCodesLeft implements storage.FactorStore.
func (s *Store) RecoveryCodesLeft(ctx context.Context, subject string) (int, error) {
	var n int
	err := s.q(ctx).QueryRow(ctx, `SELECT count(*) FROM recovery_codes WHERE subject = $1 AND used_at IS NULL`, subject).Scan(&n)
	return n, translate("count recovery codes", err)
}

// DeleteFactors implements storage.FactorStore.
func (s *Store) DeleteFactors(ctx context.Context, subject string) (bool, error) {
	var had bool
	err := s.q(ctx).QueryRow(ctx, `WITH t AS (DELETE FROM totp_factors WHERE subject = $1 RETURNING 1),
		r AS (DELETE FROM recovery_codes WHERE subject = $1)
		SELECT EXISTS (SELECT 1 FROM t)`, subject).Scan(&had)
	return had, translate("delete factors", err)
}

// SetMFARequired implements storage.FactorStore.
func (s *Store) SetMFARequired(ctx context.Context, subject string, required bool, now time.Time) error {
	var err error
	if required {
		_, err = s.q(ctx).Exec(ctx, `INSERT INTO mfa_required_users (subject, created_at) VALUES ($1, $2)
			ON CONFLICT (subject) DO NOTHING`, subject, storage.NormalizeTime(now))
		return translate("set mfa required", err)
	}
	var one int
	err = s.q(ctx).QueryRow(ctx, `WITH d AS (DELETE FROM mfa_required_users WHERE subject = $1)
		SELECT 1 FROM users WHERE subject = $1`, subject).Scan(&one)
	return translate("set mfa not required", err)
}

// MFARequired implements storage.FactorStore.
func (s *Store) MFARequired(ctx context.Context, subject string) (bool, error) {
	var req bool
	err := s.q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mfa_required_users WHERE subject = $1)`, subject).Scan(&req)
	return req, translate("mfa required", err)
}

// FactorState implements storage.FactorStore: one round trip.
func (s *Store) FactorState(ctx context.Context, subject string) (hasTOTP, required bool, err error) {
	err = s.q(ctx).QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM totp_factors WHERE subject = $1 AND confirmed_at IS NOT NULL),
		EXISTS (SELECT 1 FROM mfa_required_users WHERE subject = $1)`, subject).Scan(&hasTOTP, &required)
	return hasTOTP, required, translate("factor state", err)
}

// RaiseSession implements storage.FactorStore: one conditional UPDATE of
// a valid session of an enabled user.
func (s *Store) RaiseSession(ctx context.Context, id string, amr []string, authTime, now time.Time) (*storage.Session, error) {
	sess, err := scanSession(s.q(ctx).QueryRow(ctx, `UPDATE sessions s
		SET amr = s.amr || ARRAY(SELECT v FROM unnest($2::text[]) AS v WHERE NOT v = ANY (s.amr)), auth_time = $3
		FROM users u
		WHERE s.id = $1 AND u.subject = s.subject AND NOT u.disabled
		  AND s.idle_expires_at > $4 AND s.expires_at > $4
		RETURNING s.id, s.subject, s.auth_time, s.amr, s.idle_expires_at, s.expires_at, s.created_at, s.last_seen_at`,
		id, nonNil(amr), storage.NormalizeTime(authTime), now))
	if err != nil {
		return nil, translate("raise session", err)
	}
	return sess, nil
}
