package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// clientColumnNames are the columns scanClient reads, in order.
var clientColumnNames = []string{"id", "secret_hash", "name", "redirect_uris", "grant_types",
	"response_types", "scopes", "token_endpoint_auth_method", "client_uri", "logo_uri", "contacts",
	"skip_consent", "created_at", "updated_at", "post_logout_redirect_uris", "id_token_signed_response_alg",
	"dpop_bound_access_tokens", "require_pushed_authorization_requests", "backchannel_logout_uri",
	"backchannel_logout_session_required", "require_mfa", "first_party"}

// clientColumns lists clientColumnNames for SELECT and INSERT.
var clientColumns = strings.Join(clientColumnNames, ", ")

// prefixedClientColumns lists clientColumnNames qualified with alias "c".
var prefixedClientColumns = "c." + strings.Join(clientColumnNames, ", c.")

// scanClient scans clientColumns (optionally prefixed by other columns, which
// the caller passes in extra).
func scanClient(row pgx.Row, extra ...any) (*storage.Client, error) {
	var c storage.Client
	dst := append(extra, &c.ID, &c.SecretHash, &c.Name, &c.RedirectURIs, &c.GrantTypes,
		&c.ResponseTypes, &c.Scopes, &c.TokenEndpointAuthMethod, &c.ClientURI, &c.LogoURI,
		&c.Contacts, &c.SkipConsent, &c.CreatedAt, &c.UpdatedAt, &c.PostLogoutRedirectURIs, &c.IDTokenSignedResponseAlg,
		&c.DPoPBoundAccessTokens, &c.RequirePushedAuthorizationRequests, &c.BackchannelLogoutURI,
		&c.BackchannelLogoutSessionRequired, &c.RequireMFA, &c.FirstParty)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	c.CreatedAt = storage.NormalizeTime(c.CreatedAt)
	c.UpdatedAt = storage.NormalizeTime(c.UpdatedAt)
	if len(c.PostLogoutRedirectURIs) == 0 {
		c.PostLogoutRedirectURIs = nil // the column's default '{}': none
	}
	return &c, nil
}

// GetClient returns the client as a *storage.Client, or an error matching
// storage.ErrNotFound.
func (s *Store) GetClient(ctx context.Context, id string) (fosite.Client, error) {
	c, err := scanClient(s.q(ctx).QueryRow(ctx, `SELECT `+clientColumns+` FROM clients WHERE id = $1`, id))
	if err != nil {
		return nil, translate(fmt.Sprintf("get client %q", id), err)
	}
	return c, nil
}

// LockClient locks the client's row (SELECT … FOR UPDATE) until the
// transaction in ctx ends. It returns storage.ErrNotFound for an unknown
// client.
func (s *Store) LockClient(ctx context.Context, id string) error {
	var one int
	err := s.q(ctx).QueryRow(ctx, `SELECT 1 FROM clients WHERE id = $1 FOR UPDATE`, id).Scan(&one)
	return translate(fmt.Sprintf("lock client %q", id), err)
}

// CreateClient inserts c, setting c.CreatedAt and c.UpdatedAt to now when
// zero. It returns storage.ErrAlreadyExists if c.ID is taken.
func (s *Store) CreateClient(ctx context.Context, c *storage.Client) error {
	now := storage.NormalizeTime(time.Now())
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = now
	}
	c.CreatedAt, c.UpdatedAt = storage.NormalizeTime(c.CreatedAt), storage.NormalizeTime(c.UpdatedAt)
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO clients (`+clientColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)`,
		c.ID, c.SecretHash, c.Name, nonNil(c.RedirectURIs), nonNil(c.GrantTypes),
		nonNil(c.ResponseTypes), nonNil(c.Scopes), c.TokenEndpointAuthMethod, c.ClientURI,
		c.LogoURI, nonNil(c.Contacts), c.SkipConsent, c.CreatedAt, c.UpdatedAt,
		nonNil(c.PostLogoutRedirectURIs), c.IDTokenSignedResponseAlg, c.DPoPBoundAccessTokens,
		c.RequirePushedAuthorizationRequests, c.BackchannelLogoutURI, c.BackchannelLogoutSessionRequired, c.RequireMFA, c.FirstParty)
	return translate(fmt.Sprintf("create client %q", c.ID), err)
}

// UpdateClient replaces every field of the client with c.ID except
// CreatedAt, setting UpdatedAt to now when c.UpdatedAt is zero; the stored
// CreatedAt and UpdatedAt are written back into c. It returns
// storage.ErrNotFound if no such client exists.
func (s *Store) UpdateClient(ctx context.Context, c *storage.Client) error {
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = time.Now()
	}
	c.UpdatedAt = storage.NormalizeTime(c.UpdatedAt)
	err := s.q(ctx).QueryRow(ctx, `UPDATE clients SET secret_hash = $2, name = $3,
		redirect_uris = $4, grant_types = $5, response_types = $6, scopes = $7,
		token_endpoint_auth_method = $8, client_uri = $9, logo_uri = $10, contacts = $11,
		skip_consent = $12, updated_at = $13, post_logout_redirect_uris = $14,
		id_token_signed_response_alg = $15, dpop_bound_access_tokens = $16,
		require_pushed_authorization_requests = $17, backchannel_logout_uri = $18,
		backchannel_logout_session_required = $19, require_mfa = $20, first_party = $21
		WHERE id = $1 RETURNING created_at`,
		c.ID, c.SecretHash, c.Name, nonNil(c.RedirectURIs), nonNil(c.GrantTypes),
		nonNil(c.ResponseTypes), nonNil(c.Scopes), c.TokenEndpointAuthMethod, c.ClientURI,
		c.LogoURI, nonNil(c.Contacts), c.SkipConsent, c.UpdatedAt,
		nonNil(c.PostLogoutRedirectURIs), c.IDTokenSignedResponseAlg, c.DPoPBoundAccessTokens,
		c.RequirePushedAuthorizationRequests, c.BackchannelLogoutURI,
		c.BackchannelLogoutSessionRequired, c.RequireMFA, c.FirstParty).Scan(&c.CreatedAt)
	c.CreatedAt = storage.NormalizeTime(c.CreatedAt)
	return translate(fmt.Sprintf("update client %q", c.ID), err)
}

// DeleteClient deletes the client; ON DELETE CASCADE deletes every code,
// access and refresh token and PKCE session issued to it in the same
// statement, so they can never be used again. It returns storage.ErrNotFound
// if no such client exists.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM clients WHERE id = $1`, id)
	if err != nil {
		return translate(fmt.Sprintf("delete client %q", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete client %q: %w", id, storage.ErrNotFound)
	}
	return nil
}

// ListClients returns up to limit clients with ID > after, ordered by ID.
// A limit <= 0 means no limit.
func (s *Store) ListClients(ctx context.Context, after string, limit int) ([]*storage.Client, error) {
	var lim any
	if limit > 0 {
		lim = limit
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+clientColumns+` FROM clients
		WHERE id > $1 ORDER BY id LIMIT $2`, after, lim)
	if err != nil {
		return nil, translate("list clients", err)
	}
	defer rows.Close()
	out := []*storage.Client{}
	for rows.Next() {
		c, err := scanClient(rows)
		if err != nil {
			return nil, translate("list clients", err)
		}
		out = append(out, c)
	}
	return out, translate("list clients", rows.Err())
}

// ClientAssertionJWTValid returns fosite.ErrJTIKnown if jti was marked used
// and has not expired yet, else nil.
func (s *Store) ClientAssertionJWTValid(ctx context.Context, jti string) error {
	var known bool
	err := s.q(ctx).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM client_assertion_jwts
		WHERE jti = $1 AND expires_at > now())`, jti).Scan(&known)
	if err != nil {
		return translate("check client assertion jti", err)
	}
	if known {
		return fosite.ErrJTIKnown
	}
	return nil
}

// SetClientAssertionJWT marks jti as used until exp, after deleting expired
// JTIs. It is a conditional write: it returns fosite.ErrJTIKnown if jti is
// already marked and unexpired.
func (s *Store) SetClientAssertionJWT(ctx context.Context, jti string, exp time.Time) error {
	q := s.q(ctx)
	if _, err := q.Exec(ctx, `DELETE FROM client_assertion_jwts WHERE expires_at <= now()`); err != nil {
		return translate("delete expired client assertion jtis", err)
	}
	tag, err := q.Exec(ctx, `INSERT INTO client_assertion_jwts (jti, expires_at) VALUES ($1, $2)
		ON CONFLICT (jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
		WHERE client_assertion_jwts.expires_at <= now()`, jti, exp)
	if err != nil {
		return translate("set client assertion jti", err)
	}
	if tag.RowsAffected() == 0 {
		return fosite.ErrJTIKnown
	}
	return nil
}
