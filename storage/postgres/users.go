package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

const userColumns = `subject, username, password_hash, email, email_verified, name, disabled, created_at, updated_at`

func scanUser(row pgx.Row) (*storage.User, error) {
	var u storage.User
	if err := row.Scan(&u.Subject, &u.Username, &u.PasswordHash, &u.Email, &u.EmailVerified,
		&u.Name, &u.Disabled, &u.CreatedAt, &u.UpdatedAt); err != nil {
		return nil, err
	}
	u.CreatedAt = storage.NormalizeTime(u.CreatedAt)
	u.UpdatedAt = storage.NormalizeTime(u.UpdatedAt)
	return &u, nil
}

// CreateUser inserts u, setting its Subject (when empty) and times (when
// zero). It returns storage.ErrAlreadyExists if the username or subject is
// taken.
func (s *Store) CreateUser(ctx context.Context, u *storage.User) error {
	if u.Subject == "" {
		u.Subject = storage.NewSubject()
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = time.Now()
	}
	if u.UpdatedAt.IsZero() {
		u.UpdatedAt = u.CreatedAt
	}
	u.CreatedAt, u.UpdatedAt = storage.NormalizeTime(u.CreatedAt), storage.NormalizeTime(u.UpdatedAt)
	hash := u.PasswordHash
	if hash == nil {
		hash = []byte{} // no password (a passkey-only user): the column is not null
	}
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO users (`+userColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, u.Subject, u.Username, hash,
		u.Email, u.EmailVerified, u.Name, u.Disabled, u.CreatedAt, u.UpdatedAt)
	return translate(fmt.Sprintf("create user %q", u.Username), err)
}

// GetUser returns the user with this username, or storage.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, username string) (*storage.User, error) {
	u, err := scanUser(s.q(ctx).QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE username = $1`, username))
	if err != nil {
		return nil, translate(fmt.Sprintf("get user %q", username), err)
	}
	return u, nil
}

// GetUserBySubject returns the user with this subject, or
// storage.ErrNotFound.
func (s *Store) GetUserBySubject(ctx context.Context, subject string) (*storage.User, error) {
	u, err := scanUser(s.q(ctx).QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE subject = $1`, subject))
	if err != nil {
		return nil, translate("get user by subject", err)
	}
	return u, nil
}

// ListUsers returns up to limit users with username > after, by username.
func (s *Store) ListUsers(ctx context.Context, after string, limit int) ([]*storage.User, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT `+userColumns+` FROM users
		WHERE username > $1 ORDER BY username LIMIT $2`, after, limit)
	if err != nil {
		return nil, translate("list users", err)
	}
	defer rows.Close()
	var out []*storage.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, translate("list users", err)
		}
		out = append(out, u)
	}
	return out, translate("list users", rows.Err())
}

// updateUser runs a one-row UPDATE of users WHERE subject = $1.
func (s *Store) updateUser(ctx context.Context, op, set, subject string, args ...any) error {
	tag, err := s.q(ctx).Exec(ctx, `UPDATE users SET `+set+`, updated_at = now() WHERE subject = $1`,
		append([]any{subject}, args...)...)
	if err != nil {
		return translate(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: %s: %w", op, storage.ErrNotFound)
	}
	return nil
}

// UpdateUserProfile replaces the profile fields, or returns
// storage.ErrNotFound.
func (s *Store) UpdateUserProfile(ctx context.Context, u *storage.User) error {
	return s.updateUser(ctx, "update user profile", `email = $2, email_verified = $3, name = $4`,
		u.Subject, u.Email, u.EmailVerified, u.Name)
}

// RenameUser changes the username; storage.ErrAlreadyExists if taken.
func (s *Store) RenameUser(ctx context.Context, subject, username string) error {
	return s.updateUser(ctx, "rename user", `username = $2`, subject, username)
}

// SetUserPassword replaces the password hash, or returns
// storage.ErrNotFound.
func (s *Store) SetUserPassword(ctx context.Context, subject string, hash []byte) error {
	return s.updateUser(ctx, "set user password", `password_hash = $2`, subject, hash)
}

// UpgradePasswordHash replaces the hash if it is still oldHash, with one
// conditional UPDATE; updated_at stays.
func (s *Store) UpgradePasswordHash(ctx context.Context, subject string, oldHash, newHash []byte) (bool, error) {
	tag, err := s.q(ctx).Exec(ctx, `UPDATE users SET password_hash = $3
		WHERE subject = $1 AND password_hash = $2`, subject, oldHash, newHash)
	if err != nil {
		return false, translate("upgrade password hash", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetUserDisabled sets or clears disabled, or returns storage.ErrNotFound.
func (s *Store) SetUserDisabled(ctx context.Context, subject string, disabled bool) error {
	return s.updateUser(ctx, "set user disabled", `disabled = $2`, subject, disabled)
}

// DeleteUser deletes the user; its sessions and consents go with it (ON
// DELETE CASCADE). It returns storage.ErrNotFound for an unknown subject.
//
// The sessions are ended first, by the statement that queues their
// back-channel logouts (endSessionsSQL): the cascade would end them
// silently.
func (s *Store) DeleteUser(ctx context.Context, subject string) error {
	var deleted bool
	err := s.inTx(ctx, "delete user", func(q querier) error {
		if _, err := q.Exec(ctx, endSessionsSQL(`subject = $1`), subject); err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `DELETE FROM users WHERE subject = $1`, subject)
		deleted = err == nil && tag.RowsAffected() > 0
		if err != nil {
			return err
		}
		// The user's provider refresh tokens (Apple's) are revoked at the
		// provider by a leased job (package federation): queued here, in
		// the transaction that deletes the user.
		_, err = q.Exec(ctx, `UPDATE provider_tokens SET pending = true, next_attempt_at = now() WHERE subject = $1 AND NOT pending`, subject)
		return err
	})
	if err != nil {
		return err
	}
	if !deleted {
		return fmt.Errorf("postgres: delete user: %w", storage.ErrNotFound)
	}
	return nil
}

// RevokeSubject ends the subject's sessions (queuing their back-channel
// logouts, endSessionsSQL) and its auth sessions (done: a step in flight
// loses its conditional write), and deactivates its codes and tokens, in
// one transaction.
func (s *Store) RevokeSubject(ctx context.Context, subject string) error {
	return s.inTx(ctx, "revoke subject", func(q querier) error {
		if _, err := q.Exec(ctx, endSessionsSQL(`subject = $1`), subject); err != nil {
			return err
		}
		if err := endAuthSessions(ctx, q, subject); err != nil {
			return err
		}
		return revokeIssued(ctx, q, `subject = $1`, subject)
	})
}

// inTx runs f in the transaction carried by ctx, or in one of its own.
func (s *Store) inTx(ctx context.Context, op string, f func(q querier) error) error {
	if tx := s.txFrom(ctx); tx != nil {
		return translate(op, f(tx))
	}
	return translate(op, pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return f(tx) }))
}

// revokeIssued deactivates every active code, refresh and access token
// matching cond (over subject and, optionally, client_id). Codes go first:
// an exchange that holds a code's row lock commits before we pass it, and
// the later statements (new snapshots under READ COMMITTED) then see the
// tokens it issued. Refresh grants are locked (grantLockSQL, as
// RotateRefreshToken takes it) before their tokens are updated, so a
// rotation in flight commits first and its new pair is revoked too.
func revokeIssued(ctx context.Context, q querier, cond string, args ...any) error {
	if _, err := q.Exec(ctx, `UPDATE authorize_codes SET active = false WHERE active AND `+cond, args...); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(g.request_id, 7009))
		FROM (SELECT DISTINCT request_id FROM refresh_tokens WHERE active AND `+cond+`
		      ORDER BY request_id) g`, args...); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `UPDATE refresh_tokens SET active = false WHERE active AND `+cond, args...); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `UPDATE access_tokens SET active = false WHERE active AND `+cond, args...); err != nil {
		return err
	}
	// The replay records of those grants (storage.ReplayStore contract).
	_, err := q.Exec(ctx, `UPDATE replay_records SET revoked = true WHERE NOT revoked AND `+cond, args...)
	return err
}
