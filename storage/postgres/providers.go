package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.ProviderStore = (*Store)(nil)

const providerColumns = `id, kind, issuer, client_id, team_id, key_id, sealed, scopes, display_name,
	native_audiences, link_by_verified_email, created_at, updated_at`

func scanProvider(row pgx.Row) (*storage.Provider, error) {
	var p storage.Provider
	err := row.Scan(&p.ID, &p.Kind, &p.Issuer, &p.ClientID, &p.TeamID, &p.KeyID, &p.Sealed, &p.Scopes,
		&p.DisplayName, &p.NativeAudiences, &p.LinkByVerifiedEmail, &p.CreatedAt, &p.UpdatedAt)
	if err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt = storage.NormalizeTime(p.CreatedAt), storage.NormalizeTime(p.UpdatedAt)
	return &p, nil
}

// CreateProvider inserts p.
func (s *Store) CreateProvider(ctx context.Context, p *storage.Provider) error {
	now := storage.NormalizeTime(time.Now())
	p.CreatedAt, p.UpdatedAt = now, now
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO providers (`+providerColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		p.ID, p.Kind, p.Issuer, p.ClientID, p.TeamID, p.KeyID, p.Sealed, nonNil(p.Scopes), p.DisplayName,
		nonNil(p.NativeAudiences), p.LinkByVerifiedEmail, now)
	return translate("create provider", err)
}

// GetProvider returns the provider id.
func (s *Store) GetProvider(ctx context.Context, id string) (*storage.Provider, error) {
	p, err := scanProvider(s.q(ctx).QueryRow(ctx, `SELECT `+providerColumns+` FROM providers WHERE id = $1`, id))
	if err != nil {
		return nil, translate("get provider", err)
	}
	return p, nil
}

// UpdateProvider replaces the provider p.ID.
func (s *Store) UpdateProvider(ctx context.Context, p *storage.Provider) error {
	now := storage.NormalizeTime(time.Now())
	var created time.Time
	err := s.q(ctx).QueryRow(ctx, `UPDATE providers SET kind = $2, issuer = $3, client_id = $4, team_id = $5,
		key_id = $6, sealed = $7, scopes = $8, display_name = $9, native_audiences = $10,
		link_by_verified_email = $11, updated_at = $12 WHERE id = $1 RETURNING created_at`,
		p.ID, p.Kind, p.Issuer, p.ClientID, p.TeamID, p.KeyID, p.Sealed, nonNil(p.Scopes), p.DisplayName,
		nonNil(p.NativeAudiences), p.LinkByVerifiedEmail, now).Scan(&created)
	if err != nil {
		return translate("update provider", err)
	}
	p.CreatedAt, p.UpdatedAt = storage.NormalizeTime(created), now
	return nil
}

// DeleteProvider deletes the provider id.
func (s *Store) DeleteProvider(ctx context.Context, id string) error {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM providers WHERE id = $1`, id)
	if err != nil {
		return translate("delete provider", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete provider: %w", storage.ErrNotFound)
	}
	return nil
}

// ListProviders returns up to limit providers after after (limit <= 0: all).
func (s *Store) ListProviders(ctx context.Context, after string, limit int) ([]*storage.Provider, error) {
	var lim any
	if limit > 0 {
		lim = limit
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+providerColumns+` FROM providers
		WHERE id > $1 ORDER BY id LIMIT $2`, after, lim)
	if err != nil {
		return nil, translate("list providers", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*storage.Provider, error) { return scanProvider(row) })
	if err != nil {
		return nil, translate("list providers", err)
	}
	return out, nil
}

// ProvidersVersion is the row count and the latest updated_at: an insert,
// update or delete changes one of them (updated_at is set from the clock
// of the writer, so a delete is caught by the count, and a delete with an
// insert by the insert's updated_at).
func (s *Store) ProvidersVersion(ctx context.Context) (string, error) {
	var n int64
	var latest *time.Time
	err := s.q(ctx).QueryRow(ctx, `SELECT count(*), max(updated_at) FROM providers`).Scan(&n, &latest)
	if err != nil {
		return "", translate("providers version", err)
	}
	v := fmt.Sprintf("%d", n)
	if latest != nil {
		v += "/" + latest.UTC().Format(time.RFC3339Nano)
	}
	return v, nil
}

// GetFederatedIdentity returns the link of (issuer, sub).
func (s *Store) GetFederatedIdentity(ctx context.Context, issuer, sub string) (*storage.FederatedIdentity, error) {
	var f storage.FederatedIdentity
	err := s.q(ctx).QueryRow(ctx, `SELECT issuer, sub, provider_id, subject, email, created_at
		FROM federated_identities WHERE issuer = $1 AND sub = $2`, issuer, sub).
		Scan(&f.Issuer, &f.Sub, &f.ProviderID, &f.Subject, &f.Email, &f.CreatedAt)
	if err != nil {
		return nil, translate("get federated identity", err)
	}
	f.CreatedAt = storage.NormalizeTime(f.CreatedAt)
	return &f, nil
}

// LinkFederatedIdentity inserts the link unless the pair is linked. ON
// CONFLICT DO NOTHING makes a concurrent insert of the same pair wait on
// the first one's index entry, then insert nothing.
func (s *Store) LinkFederatedIdentity(ctx context.Context, f *storage.FederatedIdentity) (bool, error) {
	if f.CreatedAt.IsZero() {
		f.CreatedAt = storage.NormalizeTime(time.Now())
	}
	tag, err := s.q(ctx).Exec(ctx, `INSERT INTO federated_identities (issuer, sub, provider_id, subject, email, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (issuer, sub) DO NOTHING`,
		f.Issuer, f.Sub, f.ProviderID, f.Subject, f.Email, f.CreatedAt)
	if err != nil {
		return false, translate("link federated identity", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListFederatedIdentities returns the links of subject.
func (s *Store) ListFederatedIdentities(ctx context.Context, subject string) ([]*storage.FederatedIdentity, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT issuer, sub, provider_id, subject, email, created_at
		FROM federated_identities WHERE subject = $1 ORDER BY created_at, issuer, sub`, subject)
	if err != nil {
		return nil, translate("list federated identities", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*storage.FederatedIdentity, error) {
		var f storage.FederatedIdentity
		err := row.Scan(&f.Issuer, &f.Sub, &f.ProviderID, &f.Subject, &f.Email, &f.CreatedAt)
		f.CreatedAt = storage.NormalizeTime(f.CreatedAt)
		return &f, err
	})
	if err != nil {
		return nil, translate("list federated identities", err)
	}
	return out, nil
}

// UnlinkFederatedIdentity deletes one link of subject unless it is the
// last way in, under the user's row lock.
func (s *Store) UnlinkFederatedIdentity(ctx context.Context, subject, issuer, sub string) error {
	return s.inTx(ctx, "unlink federated identity", func(q querier) error {
		if err := lockWaysIn(ctx, q, subject); err != nil {
			return err
		}
		var hasPassword bool
		var others int
		err := q.QueryRow(ctx, `SELECT length(password_hash) > 0,
			(SELECT count(*) FROM federated_identities WHERE subject = $1 AND NOT (issuer = $2 AND sub = $3))
			+ (SELECT count(*) FROM passkeys WHERE subject = $1 AND disabled_at IS NULL)
			FROM users WHERE subject = $1`, subject, issuer, sub).Scan(&hasPassword, &others)
		if err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `DELETE FROM federated_identities WHERE subject = $1 AND issuer = $2 AND sub = $3`, subject, issuer, sub)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return storage.ErrNotFound
		}
		if !hasPassword && others == 0 {
			return storage.ErrLastWayIn // rolls the delete back
		}
		return nil
	})
}

// GetUserByVerifiedEmail returns the one user with this verified email.
func (s *Store) GetUserByVerifiedEmail(ctx context.Context, email string) (*storage.User, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT `+userColumns+` FROM users
		WHERE lower(email) = lower($1) AND email_verified AND email <> '' LIMIT 2`, email)
	if err != nil {
		return nil, translate("get user by verified email", err)
	}
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*storage.User, error) { return scanUser(row) })
	if err != nil {
		return nil, translate("get user by verified email", err)
	}
	if len(users) != 1 {
		return nil, fmt.Errorf("postgres: get user by verified email: %w", storage.ErrNotFound)
	}
	return users[0], nil
}

// ConsumeSubjectToken inserts the key; a taken key inserts nothing. The
// insert waits on a concurrent transaction's uncommitted entry for the
// same key (the unique index), so a duplicate sees the first one's end.
func (s *Store) ConsumeSubjectToken(ctx context.Context, key string, expiresAt time.Time) (bool, error) {
	tag, err := s.q(ctx).Exec(ctx, `INSERT INTO federation_exchanges (key, expires_at) VALUES ($1, $2)
		ON CONFLICT (key) DO NOTHING`, key, expiresAt)
	if err != nil {
		return false, translate("consume subject token", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteExpiredSubjectTokens deletes expired consumed-token rows.
func (s *Store) DeleteExpiredSubjectTokens(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM federation_exchanges WHERE key IN (
		SELECT key FROM federation_exchanges WHERE expires_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, translate("delete expired subject tokens", err)
	}
	return int(tag.RowsAffected()), nil
}

// CreateFederationLogin stores a sign-in in flight.
func (s *Store) CreateFederationLogin(ctx context.Context, l *storage.FederationLogin) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO federation_logins (key, browser, provider_id, sealed, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, l.Key, l.Browser, l.ProviderID, l.Sealed, l.ExpiresAt)
	return translate("create federation login", err)
}

// TakeFederationLogin deletes and returns the sign-in: one conditional
// DELETE, so a replayed state finds nothing.
func (s *Store) TakeFederationLogin(ctx context.Context, key, browser string, now time.Time) (*storage.FederationLogin, error) {
	var l storage.FederationLogin
	err := s.q(ctx).QueryRow(ctx, `DELETE FROM federation_logins WHERE key = $1 AND browser = $2 AND expires_at > $3
		RETURNING key, browser, provider_id, sealed, expires_at`, key, browser, now).
		Scan(&l.Key, &l.Browser, &l.ProviderID, &l.Sealed, &l.ExpiresAt)
	if err != nil {
		return nil, translate("take federation login", err)
	}
	return &l, nil
}

// SaveProviderToken upserts the token of (issuer, sub).
func (s *Store) SaveProviderToken(ctx context.Context, t *storage.ProviderToken) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO provider_tokens (issuer, sub, provider_id, subject, sealed)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (issuer, sub) DO UPDATE
		SET provider_id = excluded.provider_id, subject = excluded.subject, sealed = excluded.sealed
		WHERE NOT provider_tokens.pending`, t.Issuer, t.Sub, t.ProviderID, t.Subject, t.Sealed)
	return translate("save provider token", err)
}

// ClaimProviderRevocations locks the due pending tokens.
func (s *Store) ClaimProviderRevocations(ctx context.Context, now time.Time, limit int) ([]*storage.ProviderToken, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT issuer, sub, provider_id, subject, sealed, attempts FROM provider_tokens
		WHERE pending AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED`, now, limit)
	if err != nil {
		return nil, translate("claim provider revocations", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*storage.ProviderToken, error) {
		var t storage.ProviderToken
		err := row.Scan(&t.Issuer, &t.Sub, &t.ProviderID, &t.Subject, &t.Sealed, &t.Attempts)
		return &t, err
	})
	return out, translate("claim provider revocations", err)
}

// FinishProviderRevocation deletes the token or schedules its retry.
func (s *Store) FinishProviderRevocation(ctx context.Context, issuer, sub string, retryAt *time.Time) error {
	var err error
	if retryAt == nil {
		_, err = s.q(ctx).Exec(ctx, `DELETE FROM provider_tokens WHERE issuer = $1 AND sub = $2`, issuer, sub)
	} else {
		_, err = s.q(ctx).Exec(ctx, `UPDATE provider_tokens SET attempts = attempts + 1, next_attempt_at = $3
			WHERE issuer = $1 AND sub = $2`, issuer, sub, *retryAt)
	}
	return translate("finish provider revocation", err)
}
