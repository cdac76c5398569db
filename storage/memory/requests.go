package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// entry is a stored code, token or PKCE session.
type entry struct {
	rec             storage.Record
	expiresAt       time.Time
	active          bool
	accessSignature string // refresh tokens only
}

// table is one kind of request-bearing row, keyed by signature.
type table map[string]entry

// create encodes r and stores it in t under sig. It returns
// storage.ErrNotFound if r's client does not exist and
// storage.ErrAlreadyExists if sig is taken.
func (s *Store) create(ctx context.Context, kind string, t table, sig string, r fosite.Requester, exp fosite.TokenType, accessSig string) error {
	rec, err := storage.EncodeRequest(r)
	if err != nil {
		return fmt.Errorf("memory: create %s: %w", kind, err)
	}
	e := entry{rec: rec, expiresAt: storage.ExpiresAt(r, exp), active: true, accessSignature: accessSig}
	s.tx(func() {
		if (exp == fosite.AccessToken || exp == fosite.RefreshToken) && s.revokedGrants[rec.RequestID] {
			e.active = false // minted for a grant revoked meanwhile
		}
		if _, ok := s.clients[rec.ClientID]; !ok {
			err = fmt.Errorf("memory: create %s: client %q: %w", kind, rec.ClientID, storage.ErrNotFound)
			return
		}
		if _, ok := t[sig]; ok {
			err = fmt.Errorf("memory: create %s: %w", kind, storage.ErrAlreadyExists)
			return
		}
		s.setEntry(ctx, t, sig, e)
	})
	return err
}

// get returns the decoded request stored under sig in t, with its client
// rehydrated, and whether it is active. It returns storage.ErrNotFound if
// the row or its client is missing.
func (s *Store) get(kind string, t table, sig string, session fosite.Session) (*fosite.Request, bool, error) {
	sr, err := s.stored(kind, t, sig)
	if err != nil {
		return nil, false, err
	}
	req, err := sr.Record.Decode(sr.Client, session)
	if err != nil {
		return nil, false, fmt.Errorf("memory: get %s: %w", kind, err)
	}
	return req, sr.Active, nil
}

// stored returns the row of t under sig, undecoded, with its client; a
// missing row or client is storage.ErrNotFound.
func (s *Store) stored(kind string, t table, sig string) (*storage.StoredRequest, error) {
	var (
		e      entry
		client storage.Client
		ok     bool
	)
	s.tx(func() {
		if e, ok = t[sig]; !ok {
			return
		}
		e.rec = e.rec.Clone()
		var c storage.Client
		if c, ok = s.clients[e.rec.ClientID]; ok {
			client = cloneClient(&c)
		}
	})
	if !ok {
		return nil, fmt.Errorf("memory: get %s: %w", kind, storage.ErrNotFound)
	}
	return &storage.StoredRequest{Record: e.rec, Client: &client, Active: e.active}, nil
}

// deactivateByRequest marks every row of t with request ID id inactive.
// Callers hold s.mu.
func (s *Store) deactivateByRequest(ctx context.Context, t table, id string) {
	for sig, e := range t {
		if e.rec.RequestID == id && e.active {
			e.active = false
			s.setEntry(ctx, t, sig, e)
		}
	}
}

// CreatePARRequest implements storage.PARStore.
func (s *Store) CreatePARRequest(ctx context.Context, sig string, r fosite.Requester) error {
	return s.create(ctx, "pushed authorization request", s.par, sig, r, fosite.PushedAuthorizeRequestContext, "")
}

// GetPARRequest implements storage.PARStore.
func (s *Store) GetPARRequest(_ context.Context, sig string, session fosite.Session) (fosite.Requester, bool, error) {
	return s.get("pushed authorization request", s.par, sig, session)
}

// UsePARRequest implements storage.PARStore: exactly one caller marks an
// unused request used.
func (s *Store) UsePARRequest(ctx context.Context, sig string) error {
	var err error
	s.tx(func() {
		e, ok := s.par[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: use pushed authorization request: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInactiveToken
		default:
			e.active = false
			s.setEntry(ctx, s.par, sig, e)
		}
	})
	return err
}

// CreateAuthorizeCodeSession stores req under the code signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAuthorizeCodeSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "authorize code", s.codes, sig, req, fosite.AuthorizeCode, "")
}

// GetAuthorizeCodeSession returns the request stored under sig, decoding its
// session into session. For a redeemed code it returns the request AND
// storage.ErrInvalidatedAuthorizeCode; for a missing one storage.ErrNotFound.
func (s *Store) GetAuthorizeCodeSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.CodeRead(s.get("authorize code", s.codes, sig, session))
}

// InvalidateAuthorizeCodeSession marks the code inactive if it is active.
// It returns storage.ErrInvalidatedAuthorizeCode if the code was already
// inactive and storage.ErrNotFound if it does not exist.
func (s *Store) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	var err error
	s.tx(func() {
		s.waitRow(ctx, "c:"+sig)
		e, ok := s.codes[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: invalidate authorize code: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInvalidatedAuthorizeCode
		default:
			e.active = false
			s.setEntry(ctx, s.codes, sig, e)
			s.lockRow(ctx, "c:"+sig)
		}
	})
	return err
}

// CreateAccessTokenSession stores req under the access token signature sig.
// It returns storage.ErrAlreadyExists if sig is taken and
// storage.ErrNotFound if the request's client does not exist.
func (s *Store) CreateAccessTokenSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "access token", s.access, sig, req, fosite.AccessToken, "")
}

// GetAccessTokenSession returns the request stored under sig. For a revoked
// token it returns the request AND storage.ErrInactiveToken; for a missing
// one storage.ErrNotFound.
func (s *Store) GetAccessTokenSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.TokenRead(s.get("access token", s.access, sig, session))
}

// DeleteAccessTokenSession deletes the access token. Deleting a missing
// token is not an error (fosite's reuse handling may race with itself).
func (s *Store) DeleteAccessTokenSession(ctx context.Context, sig string) error {
	s.tx(func() { s.deleteEntry(ctx, s.access, sig) })
	return nil
}

// CreateRefreshTokenSession stores req under the refresh token signature
// sig, remembering the signature of the access token issued with it. It
// returns storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound
// if the request's client does not exist.
func (s *Store) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, req fosite.Requester) error {
	return s.create(ctx, "refresh token", s.refresh, sig, req, fosite.RefreshToken, accessSig)
}

// GetRefreshTokenSession returns the request stored under sig. For a
// rotated or revoked token it returns the request AND
// storage.ErrInactiveToken; for a missing one storage.ErrNotFound.
func (s *Store) GetRefreshTokenSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	return storage.TokenRead(s.get("refresh token", s.refresh, sig, session))
}

// DeleteRefreshTokenSession deletes the refresh token. Deleting a missing
// token is not an error.
func (s *Store) DeleteRefreshTokenSession(ctx context.Context, sig string) error {
	s.tx(func() { s.deleteEntry(ctx, s.refresh, sig) })
	return nil
}

// RotateRefreshToken marks the refresh token sig inactive, if it is active,
// and every access token of requestID inactive. It returns
// storage.ErrInactiveToken if the refresh token was already inactive (a lost
// rotation race) and storage.ErrNotFound if it does not exist; in both cases
// nothing is changed.
func (s *Store) RotateRefreshToken(ctx context.Context, requestID, sig string) error {
	var err error
	s.tx(func() {
		s.waitRow(ctx, "r:"+sig)
		e, ok := s.refresh[sig]
		switch {
		case !ok:
			err = fmt.Errorf("memory: rotate refresh token: %w", storage.ErrNotFound)
		case !e.active:
			err = storage.ErrInactiveToken
		default:
			e.active = false
			s.setEntry(ctx, s.refresh, sig, e)
			s.deactivateByRequest(ctx, s.access, requestID)
			s.lockRow(ctx, "r:"+sig)
		}
	})
	return err
}

// RevokeRefreshToken marks every refresh token of requestID inactive
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeRefreshToken(ctx context.Context, requestID string) error {
	s.tx(func() {
		s.deactivateByRequest(ctx, s.refresh, requestID)
		s.revokeReplays(ctx, requestID)
		// Revoking a refresh token revokes the grant (RFC 7009 §2.1): a
		// rotation already under way must not leave its new pair active.
		s.revokedGrants[requestID] = true
	})
	return nil
}

// RevokeAccessToken marks every access token of requestID inactive
// (RFC 7009 §2.1). It succeeds when there is none.
func (s *Store) RevokeAccessToken(ctx context.Context, requestID string) error {
	s.tx(func() {
		s.deactivateByRequest(ctx, s.access, requestID)
		s.revokeReplays(ctx, requestID)
	})
	return nil
}

// CreatePKCERequestSession stores req under the code signature sig. It
// returns storage.ErrAlreadyExists if sig is taken and storage.ErrNotFound
// if the request's client does not exist.
func (s *Store) CreatePKCERequestSession(ctx context.Context, sig string, req fosite.Requester) error {
	return s.create(ctx, "pkce session", s.pkce, sig, req, fosite.AuthorizeCode, "")
}

// GetPKCERequestSession returns the request stored under sig, or
// storage.ErrNotFound.
func (s *Store) GetPKCERequestSession(_ context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, _, err := s.get("pkce session", s.pkce, sig, session)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// DeletePKCERequestSession deletes the PKCE session. It returns
// storage.ErrNotFound if there was nothing to delete, so of concurrent
// callers exactly one succeeds.
func (s *Store) DeletePKCERequestSession(ctx context.Context, sig string) error {
	var ok bool
	s.tx(func() { ok = s.deleteEntry(ctx, s.pkce, sig) })
	if !ok {
		return fmt.Errorf("memory: delete pkce session: %w", storage.ErrNotFound)
	}
	return nil
}
