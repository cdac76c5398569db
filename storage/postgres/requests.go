package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// Tables holding encoded requests, keyed by signature.
const (
	tableCodes   = "authorize_codes"
	tableAccess  = "access_tokens"
	tableRefresh = "refresh_tokens"
	tablePKCE    = "pkce_sessions"
	tablePAR     = "pushed_requests"
)

// kinds names each table in error messages.
var kinds = map[string]string{
	tableCodes:   "authorize code",
	tableAccess:  "access token",
	tableRefresh: "refresh token",
	tablePKCE:    "pkce session",
	tablePAR:     "pushed authorization request",
}

// CreatePARRequest implements storage.PARStore.
func (s *Store) CreatePARRequest(ctx context.Context, sig string, r fosite.Requester) error {
	return s.create(ctx, tablePAR, sig, r, fosite.PushedAuthorizeRequestContext, "")
}

// GetPARRequest implements storage.PARStore.
func (s *Store) GetPARRequest(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, bool, error) {
	return s.get(ctx, tablePAR, sig, session)
}

// UsePARRequest implements storage.PARStore: a conditional UPDATE.
func (s *Store) UsePARRequest(ctx context.Context, sig string) error {
	return s.deactivate(ctx, tablePAR, sig, storage.ErrInactiveToken)
}

// create inserts r into table under sig. It returns storage.ErrAlreadyExists
// if sig is taken and storage.ErrNotFound if r's client does not exist.
func (s *Store) create(ctx context.Context, table, sig string, r fosite.Requester, exp fosite.TokenType, accessSig string) error {
	op := "create " + kinds[table]
	rec, err := storage.EncodeRequest(r)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	args := []any{sig, rec.RequestID, rec.ClientID, rec.Subject, rec.RequestedAt,
		nullTime(storage.ExpiresAt(r, exp)), rec.RequestedScopes, rec.GrantedScopes,
		rec.RequestedAudience, rec.GrantedAudience, rec.Form, string(rec.Session)}
	cols := `signature, request_id, client_id, subject, requested_at, expires_at, scopes,
		granted_scopes, audience, granted_audience, form, session`
	vals := `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12`
	if table == tableRefresh {
		cols += ", access_signature"
		vals += ", $13"
		args = append(args, accessSig)
	}
	sql := `INSERT INTO ` + table + ` (` + cols + `) VALUES (` + vals + `)`
	if table != tablePAR && s.enqueue(ctx, op, sql, args...) {
		return nil // deferred: sent with the next PutReplayRecord or Commit
	}
	_, err = s.q(ctx).Exec(ctx, sql, args...)
	return translate(op, err)
}

// get returns the request stored in table under sig, with its client
// (rehydrated in the same query), and whether it is active. It returns
// storage.ErrNotFound if the row or its client is missing.
func (s *Store) get(ctx context.Context, table, sig string, session fosite.Session) (*fosite.Request, bool, error) {
	return scanRequest(table, s.q(ctx).QueryRow(ctx, getSQL(table), sig), session)
}

// getSQL reads one request of table by signature, with its client.
func getSQL(table string) string {
	return `SELECT t.active, t.request_id, t.client_id,
		t.subject, t.requested_at, t.scopes, t.granted_scopes, t.audience, t.granted_audience,
		t.form, t.session, ` + prefixedClientColumns + `
		FROM ` + table + ` t JOIN clients c ON c.id = t.client_id
		WHERE t.signature = $1`
}

// scanRequest decodes a row of getSQL.
func scanRequest(table string, row pgx.Row, session fosite.Session) (*fosite.Request, bool, error) {
	sr, err := scanRecord(table, row)
	if err != nil {
		return nil, false, err
	}
	req, err := sr.Record.Decode(sr.Client, session)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: get %s: %w", kinds[table], err)
	}
	return req, sr.Active, nil
}

// scanRecord scans a row of getSQL without decoding it.
func scanRecord(table string, row pgx.Row) (*storage.StoredRequest, error) {
	sr := &storage.StoredRequest{}
	rec := &sr.Record
	client, err := scanClient(row,
		&sr.Active, &rec.RequestID, &rec.ClientID, &rec.Subject, &rec.RequestedAt,
		&rec.RequestedScopes, &rec.GrantedScopes, &rec.RequestedAudience, &rec.GrantedAudience,
		&rec.Form, &rec.Session)
	if err != nil {
		return nil, translate("get "+kinds[table], err)
	}
	sr.Client = client
	return sr, nil
}

// GetAuthorizeCodeRecord reads a code, undecoded (storage.Batcher). In a
// deferred transaction the code's row is locked (FOR UPDATE) and BEGIN
// travels with the read: redeeming it then cannot lose a race and is
// queued with the other writes, and a concurrent exchange of the same code
// waits here until this one commits, and then reads it redeemed.
func (s *Store) GetAuthorizeCodeRecord(ctx context.Context, sig string) (*storage.StoredRequest, error) {
	sql := getSQL(tableCodes)
	q := s.queueFrom(ctx)
	if q != nil {
		sql += ` FOR UPDATE OF t`
	}
	code, err := scanRecord(tableCodes, s.q(ctx).QueryRow(ctx, sql, sig))
	if err != nil {
		return nil, err
	}
	if code.Active && q != nil {
		q.locked[sig] = true
	}
	return code, nil
}

// deactivate runs a conditional UPDATE … SET active = false WHERE
// signature = sig AND active. It returns errInactive if the row exists but
// was already inactive, storage.ErrNotFound if it does not exist.
func (s *Store) deactivate(ctx context.Context, table, sig string, errInactive error) error {
	op := "deactivate " + kinds[table]
	if wq := s.queueFrom(ctx); wq != nil && table == tableCodes && wq.locked[sig] {
		// This transaction holds the row lock of an active code
		// (GetAuthorizeCodeRecord): the conditional write cannot miss,
		// and goes with the other writes (checked there all the same).
		delete(wq.locked, sig)
		s.enqueueChecked(ctx, queuedOp{op: op, errNone: errInactive}, `UPDATE `+table+` SET active = false
		WHERE signature = $1 AND active`, sig)
		return nil
	}
	q := s.q(ctx)
	var one int
	err := q.QueryRow(ctx, `UPDATE `+table+` SET active = false
		WHERE signature = $1 AND active RETURNING 1`, sig).Scan(&one)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return translate(op, err)
	}
	// Lost the race or never existed: tell the two apart.
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE signature = $1)`, sig).Scan(&exists); err != nil {
		return translate(op, err)
	}
	if exists {
		return errInactive
	}
	return fmt.Errorf("postgres: %s: %w", op, storage.ErrNotFound)
}

// deactivateByRequest marks every active row of table with request ID id
// inactive.
func (s *Store) deactivateByRequest(ctx context.Context, table, id string) error {
	_, err := s.q(ctx).Exec(ctx, `UPDATE `+table+` SET active = false
		WHERE request_id = $1 AND active`, id)
	return translate("revoke "+kinds[table]+"s", err)
}

// CreateAuthorizeCodeSession stores req under the code signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAuthorizeCodeSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, tableCodes, sig, req, fosite.AuthorizeCode, "")
}

// GetAuthorizeCodeSession returns the request stored under sig, decoding its
// session into session. For a redeemed code it returns the request AND
// storage.ErrInvalidatedAuthorizeCode; for a missing one storage.ErrNotFound.
func (s *Store) GetAuthorizeCodeSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.CodeRead(s.get(ctx, tableCodes, sig, session))
}

// InvalidateAuthorizeCodeSession marks the code inactive with a conditional
// UPDATE. Of concurrent callers exactly one gets nil; the others get
// storage.ErrInvalidatedAuthorizeCode. A missing code gives
// storage.ErrNotFound.
func (s *Store) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	return s.deactivate(ctx, tableCodes, sig, storage.ErrInvalidatedAuthorizeCode)
}

// CreateAccessTokenSession stores req under the access token signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAccessTokenSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, tableAccess, sig, req, fosite.AccessToken, "")
}

// GetAccessTokenSession returns the request stored under sig. For a revoked
// token it returns the request AND storage.ErrInactiveToken; for a missing
// one storage.ErrNotFound.
func (s *Store) GetAccessTokenSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.TokenRead(s.get(ctx, tableAccess, sig, session))
}

// DeleteAccessTokenSession deletes the access token. Deleting a missing
// token is not an error (fosite's reuse handling may race with itself).
func (s *Store) DeleteAccessTokenSession(ctx context.Context, sig string) error {
	_, err := s.q(ctx).Exec(ctx, `DELETE FROM access_tokens WHERE signature = $1`, sig)
	return translate("delete access token", err)
}

// CreateRefreshTokenSession stores req under the refresh token signature
// sig, with the signature of the access token issued alongside. It returns
// storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound if the
// request's client does not exist.
func (s *Store) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, req fosite.Requester) error {
	return s.create(ctx, tableRefresh, sig, req, fosite.RefreshToken, accessSig)
}

// GetRefreshTokenSession returns the request stored under sig. For a
// rotated or revoked token it returns the request AND
// storage.ErrInactiveToken; for a missing one storage.ErrNotFound.
func (s *Store) GetRefreshTokenSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.TokenRead(s.get(ctx, tableRefresh, sig, session))
}

// DeleteRefreshTokenSession deletes the refresh token. Deleting a missing
// token is not an error.
func (s *Store) DeleteRefreshTokenSession(ctx context.Context, sig string) error {
	_, err := s.q(ctx).Exec(ctx, `DELETE FROM refresh_tokens WHERE signature = $1`, sig)
	return translate("delete refresh token", err)
}

// RotateRefreshToken deactivates the refresh token sig with a conditional
// UPDATE and, if that won, every access token of requestID. Of concurrent
// callers exactly one gets nil; the others get storage.ErrInactiveToken.
// A missing refresh token gives storage.ErrNotFound. Run it in a transaction
// (fosite does) so the two updates commit together.
func (s *Store) RotateRefreshToken(ctx context.Context, requestID, sig string) error {
	// Serialize with revocation of the same grant (see revokeGrant): the
	// lock is held until fosite's transaction commits the new pair.
	if _, err := s.q(ctx).Exec(ctx, grantLockSQL, requestID); err != nil {
		return translate("lock grant", err)
	}
	if err := s.deactivate(ctx, tableRefresh, sig, storage.ErrInactiveToken); err != nil {
		return err
	}
	return s.deactivateByRequest(ctx, tableAccess, requestID)
}

// grantLockSQL takes a transaction-scoped advisory lock on one grant
// (request ID). Rotation and revocation of a grant both take it, so a
// revocation that races a refresh waits for the refresh to commit and then
// also revokes the pair it minted (RFC 7009 §2.1: revoking a refresh token
// invalidates the grant). Without it, READ COMMITTED lets the revoking
// UPDATE miss the new row.
const grantLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 7009))`

// revokeGrant deactivates every token of table issued under requestID,
// after taking the grant lock. Outside a transaction it runs in one of its
// own, so the UPDATE (a new statement, a new snapshot) sees whatever a
// concurrent rotation committed while we waited.
func (s *Store) revokeGrant(ctx context.Context, table, requestID string) error {
	if s.txFrom(ctx) != nil {
		if _, err := s.q(ctx).Exec(ctx, grantLockSQL, requestID); err != nil {
			return translate("lock grant", err)
		}
		if err := s.deactivateByRequest(ctx, table, requestID); err != nil {
			return err
		}
		_, err := s.q(ctx).Exec(ctx, revokeReplaySQL, requestID)
		return translate("revoke replay records", err)
	}
	// One transaction, one round trip per statement, batched: the lock,
	// the tokens, and the grant's replay records (storage.ReplayStore).
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(grantLockSQL, requestID)
		b.Queue(`UPDATE `+table+` SET active = false WHERE request_id = $1 AND active`, requestID)
		b.Queue(revokeReplaySQL, requestID)
		return tx.SendBatch(ctx, b).Close()
	})
	return translate("revoke "+kinds[table]+"s", err)
}

// RevokeRefreshToken deactivates every refresh token of requestID
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeRefreshToken(ctx context.Context, requestID string) error {
	return s.revokeGrant(ctx, tableRefresh, requestID)
}

// RevokeAccessToken deactivates every access token of requestID
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeAccessToken(ctx context.Context, requestID string) error {
	return s.revokeGrant(ctx, tableAccess, requestID)
}

// CreatePKCERequestSession stores req under the code signature sig. It
// returns storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound
// if the request's client does not exist.
func (s *Store) CreatePKCERequestSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, tablePKCE, sig, req, fosite.AuthorizeCode, "")
}

// GetPKCERequestSession returns the request stored under sig, or
// storage.ErrNotFound.
func (s *Store) GetPKCERequestSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get(ctx, tablePKCE, sig, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession deletes the PKCE session with a conditional
// DELETE. It returns storage.ErrNotFound if nothing was deleted, so of
// concurrent callers exactly one succeeds. In a deferred transaction
// (BeginDeferredTX) the delete is queued and reports nothing.
func (s *Store) DeletePKCERequestSession(ctx context.Context, sig string) error {
	if s.enqueue(ctx, "delete pkce session", `DELETE FROM pkce_sessions WHERE signature = $1`, sig) {
		return nil // deferred: sent with the next PutReplayRecord or Commit
	}
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM pkce_sessions WHERE signature = $1`, sig)
	if err != nil {
		return translate("delete pkce session", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete pkce session: %w", storage.ErrNotFound)
	}
	return nil
}
