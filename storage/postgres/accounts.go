package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.AccountFlowStore = (*Store)(nil)

const flowColumns = `id, purpose, email, subject, password_hash, code_hash, link_hash, client_id, return_to,
	attempts, expires_at, used_at, created_at`

func scanFlow(row pgx.Row) (*storage.AccountFlow, error) {
	var (
		f       storage.AccountFlow
		subject *string
		used    *time.Time
	)
	err := row.Scan(&f.ID, &f.Purpose, &f.Email, &subject, &f.PasswordHash, &f.CodeHash, &f.LinkHash,
		&f.ClientID, &f.ReturnTo, &f.Attempts, &f.ExpiresAt, &used, &f.CreatedAt)
	if err != nil {
		return nil, err
	}
	if subject != nil {
		f.Subject = *subject
	}
	if used != nil {
		f.UsedAt = storage.NormalizeTime(*used)
	}
	f.ExpiresAt = storage.NormalizeTime(f.ExpiresAt)
	f.CreatedAt = storage.NormalizeTime(f.CreatedAt)
	return &f, nil
}

// CreateAccountFlow inserts a flow unless its ID exists (the unique key
// decides, so a repeated form writes one row).
func (s *Store) CreateAccountFlow(ctx context.Context, f *storage.AccountFlow) (bool, error) {
	var subject any
	if f.Subject != "" {
		subject = f.Subject
	}
	tag, err := s.q(ctx).Exec(ctx, `insert into account_flows (id, purpose, email, subject, password_hash,
		code_hash, link_hash, client_id, return_to, expires_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		on conflict (id) do nothing`,
		f.ID, f.Purpose, f.Email, subject, f.PasswordHash, f.CodeHash, f.LinkHash, f.ClientID, f.ReturnTo,
		storage.NormalizeTime(f.ExpiresAt))
	if err != nil {
		return false, translate("create account flow", err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetAccountFlow returns a flow.
func (s *Store) GetAccountFlow(ctx context.Context, id string) (*storage.AccountFlow, error) {
	f, err := scanFlow(s.q(ctx).QueryRow(ctx, `select `+flowColumns+` from account_flows where id = $1`, id))
	return f, translate("get account flow", err)
}

// AttemptAccountFlow counts a guess with one conditional write.
func (s *Store) AttemptAccountFlow(ctx context.Context, id string, now time.Time, max int) (*storage.AccountFlow, error) {
	f, err := scanFlow(s.q(ctx).QueryRow(ctx, `update account_flows set attempts = attempts + 1
		where id = $1 and used_at is null and expires_at > $2 and attempts < $3
		returning `+flowColumns, id, storage.NormalizeTime(now), max))
	return f, translate("attempt account flow", err)
}

// UseAccountFlow marks a flow used, once.
func (s *Store) UseAccountFlow(ctx context.Context, id string, now time.Time) (bool, error) {
	tag, err := s.q(ctx).Exec(ctx, `update account_flows set used_at = $2 where id = $1 and used_at is null`,
		id, storage.NormalizeTime(now))
	if err != nil {
		return false, translate("use account flow", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteAccountFlows deletes a subject's flows.
func (s *Store) DeleteAccountFlows(ctx context.Context, subject string) error {
	_, err := s.q(ctx).Exec(ctx, `delete from account_flows where subject = $1`, subject)
	return translate("delete account flows", err)
}

// FindUserByEmail returns the user named username, else one whose email
// is email (the oldest).
func (s *Store) FindUserByEmail(ctx context.Context, username, email string) (*storage.User, error) {
	u, err := scanUser(s.q(ctx).QueryRow(ctx, `select `+userColumns+` from users
		where username = $1 or lower(email) = lower($2)
		order by (username = $1) desc, created_at limit 1`, username, email))
	return u, translate("find user by email", err)
}

// ClaimUserEmail sets a verified address unless another user has it (as
// email or username), with one conditional UPDATE. A transaction-scoped
// advisory lock on the address, taken first, serialises concurrent claims
// of one address (a NOT EXISTS alone would let two concurrent claims both
// pass under READ COMMITTED). There is no unique index on users.email:
// operators may set any address, and existing rows may share one.
func (s *Store) ClaimUserEmail(ctx context.Context, subject, email, username string) error {
	q := s.q(ctx)
	if _, err := q.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('authd.user_email:' || lower($1), 0))`, email); err != nil {
		return translate("claim user email", err)
	}
	tag, err := q.Exec(ctx, `update users set email = $2, email_verified = true, updated_at = now()
		where subject = $1 and not exists (select 1 from users o
			where o.subject <> $1 and (lower(o.email) = lower($2) or o.username = $3))`, subject, email, username)
	if err != nil {
		return translate("claim user email", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists bool
	if err := q.QueryRow(ctx, `select exists (select 1 from users where subject = $1)`, subject).Scan(&exists); err != nil {
		return translate("claim user email", err)
	}
	if !exists {
		return fmt.Errorf("postgres: claim user email: %w", storage.ErrNotFound)
	}
	return fmt.Errorf("postgres: claim user email: %w", storage.ErrAlreadyExists)
}
