package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

func scanConsent(row pgx.Row) (*storage.Consent, error) {
	var c storage.Consent
	if err := row.Scan(&c.Subject, &c.ClientID, &c.Scopes, &c.GrantedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	normalizeConsent(&c)
	return &c, nil
}

// normalizeConsent puts a consent as read in storage's form: scopes sorted
// and never nil, times normalized.
func normalizeConsent(c *storage.Consent) {
	if c.Scopes == nil {
		c.Scopes = []string{}
	}
	slices.Sort(c.Scopes)
	c.GrantedAt, c.UpdatedAt = storage.NormalizeTime(c.GrantedAt), storage.NormalizeTime(c.UpdatedAt)
}

// GetConsent returns the consent, or storage.ErrNotFound.
func (s *Store) GetConsent(ctx context.Context, subject, clientID string) (*storage.Consent, error) {
	c, err := scanConsent(s.q(ctx).QueryRow(ctx, `SELECT subject, client_id, scopes, granted_at, updated_at
		FROM consents WHERE subject = $1 AND client_id = $2`, subject, clientID))
	if err != nil {
		return nil, translate("get consent", err)
	}
	return c, nil
}

// GrantConsent adds scopes to the consent (an upsert keeping the union).
func (s *Store) GrantConsent(ctx context.Context, subject, clientID string, scopes []string) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO consents (subject, client_id, scopes)
		VALUES ($1, $2, (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest($3::text[]) x))
		ON CONFLICT (subject, client_id) DO UPDATE SET updated_at = now(),
		  scopes = (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest(consents.scopes || excluded.scopes) x)`,
		subject, clientID, nonNil(scopes))
	return translate("grant consent", err)
}

// ListConsents returns the subject's consents by client ID.
func (s *Store) ListConsents(ctx context.Context, subject string) ([]*storage.Consent, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT subject, client_id, scopes, granted_at, updated_at
		FROM consents WHERE subject = $1 ORDER BY client_id`, subject)
	if err != nil {
		return nil, translate("list consents", err)
	}
	defer rows.Close()
	var out []*storage.Consent
	for rows.Next() {
		c, err := scanConsent(rows)
		if err != nil {
			return nil, translate("list consents", err)
		}
		out = append(out, c)
	}
	return out, translate("list consents", rows.Err())
}

// RevokeConsent deletes the consent, queues the client's back-channel
// logouts for the subject's sessions (signOutClientSQL) and deactivates the
// codes and tokens of subject for clientID, in one transaction.
func (s *Store) RevokeConsent(ctx context.Context, subject, clientID string) error {
	found := false
	err := s.inTx(ctx, "revoke consent", func(q querier) error {
		if _, err := q.Exec(ctx, signOutClientSQL, subject, clientID); err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `DELETE FROM consents WHERE subject = $1 AND client_id = $2`, subject, clientID)
		if err != nil {
			return err
		}
		found = tag.RowsAffected() > 0
		return revokeIssued(ctx, q, `subject = $1 AND client_id = $2`, subject, clientID)
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("postgres: revoke consent: %w", storage.ErrNotFound)
	}
	return nil
}
