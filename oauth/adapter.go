package oauth

import (
	"context"
	"errors"
	"sync"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// fositeStore is the store as fosite's authorization code and refresh
// token handlers see it: the protocol rules that sit between fosite and
// storage, always on (docs/architecture.md, "The token pipeline"):
//
//   - A redeemed code or a rotated/revoked refresh token comes back to
//     fosite as *errGrantUsed, not as fosite's sentinel, so fosite never
//     takes its own reuse path: whether a redeemed code is a retry (answered
//     from the replay record) or reuse (revoked) is decided by
//     grantExchanger alone, with the grant's request ID in hand.
//   - Within one token request (a context from withCodeMemo), fosite's
//     second read of the code (PopulateTokenEndpointResponse) is answered
//     from its first (HandleTokenEndpointRequest). The code is still
//     redeemed by the conditional UPDATE in InvalidateAuthorizeCodeSession,
//     which alone decides a race.
//   - Inside the exchange's own transaction (a context from
//     withExchangeTx), fosite's BeginTX, Commit and Rollback do nothing:
//     grantExchanger owns the transaction, so the code redemption, the
//     tokens, the PKCE session's deletion and the replay record commit
//     together, in one write transaction.
type fositeStore struct {
	storage.Store
}

// errGrantUsed reports that the code or refresh token of a token request
// is no longer active: redeemed, rotated or revoked. It carries the grant
// (request ID) so the exchanger can find the replay record or revoke.
type errGrantUsed struct {
	requestID string
	refresh   bool
	// granted is the scope granted to the refresh token (refresh only,
	// when read): a retry asking for more is invalid_scope, not reuse.
	granted []string
}

func (e *errGrantUsed) Error() string {
	if e.refresh {
		return "oauth: refresh token no longer active"
	}
	return "oauth: authorization code already redeemed"
}

type exchangeTxKey struct{}

// withExchangeTx marks ctx (which carries a transaction begun by the
// exchanger) as the exchange's own transaction.
func withExchangeTx(ctx context.Context) context.Context {
	return context.WithValue(ctx, exchangeTxKey{}, true)
}

func inExchangeTx(ctx context.Context) bool { return ctx.Value(exchangeTxKey{}) != nil }

// BeginTX begins a transaction, or inside the exchange's own does nothing.
func (f fositeStore) BeginTX(ctx context.Context) (context.Context, error) {
	if inExchangeTx(ctx) {
		return ctx, nil
	}
	return f.Store.BeginTX(ctx)
}

// Commit commits, or inside the exchange's own transaction does nothing
// (the exchanger commits).
func (f fositeStore) Commit(ctx context.Context) error {
	if inExchangeTx(ctx) {
		return nil
	}
	return f.Store.Commit(ctx)
}

// Rollback rolls back, or inside the exchange's own transaction does
// nothing (the exchanger rolls back when fosite returns an error).
func (f fositeStore) Rollback(ctx context.Context) error {
	if inExchangeTx(ctx) {
		return nil
	}
	return f.Store.Rollback(ctx)
}

// codeMemo holds the codes read during one token request.
type codeMemo struct {
	mu    sync.Mutex
	codes map[string]memoCode
	// pkce holds the PKCE sessions read together with their code
	// (storage.Batcher), for the PKCE handler's read that follows.
	pkce map[string]memoPKCE
}

type memoPKCE struct {
	rec    storage.Record
	client fosite.Client
	err    error
}

type memoCode struct {
	rec    storage.Record
	client fosite.Client
}

type codeMemoKey struct{}

// withCodeMemo returns a context for one token request, in which a
// repeated read of an active code is answered from the first.
func withCodeMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, codeMemoKey{}, &codeMemo{codes: map[string]memoCode{}, pkce: map[string]memoPKCE{}})
}

// GetAuthorizeCodeSession reads the code (or repeats this request's first
// read of it); a redeemed code is *errGrantUsed.
func (f fositeStore) GetAuthorizeCodeSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	m, _ := ctx.Value(codeMemoKey{}).(*codeMemo)
	if m != nil {
		m.mu.Lock()
		mc, ok := m.codes[sig]
		m.mu.Unlock()
		if ok {
			return mc.rec.Decode(mc.client, session)
		}
	}
	if m == nil {
		req, err := f.Store.GetAuthorizeCodeSession(ctx, sig, session)
		if errors.Is(err, storage.ErrInvalidatedAuthorizeCode) && req != nil {
			return nil, &errGrantUsed{requestID: req.GetID()}
		}
		return req, err
	}
	// The PKCE handler reads the code's PKCE session next: both in one
	// round trip, as stored records, so the memo keeps them without
	// encoding them again.
	code, pkce, err, pkceErr := f.Store.GetAuthorizeCodeAndPKCERecords(ctx, sig)
	mp := memoPKCE{err: pkceErr}
	if pkceErr == nil {
		mp.rec, mp.client = pkce.Record, pkce.Client
	}
	m.mu.Lock()
	m.pkce[sig] = mp
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !code.Active {
		return nil, &errGrantUsed{requestID: code.Record.RequestID}
	}
	req, err := code.Record.Clone().Decode(code.Client, session)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.codes[sig] = memoCode{rec: code.Record, client: code.Client}
	m.mu.Unlock()
	return req, nil
}

// InvalidateAuthorizeCodeSession redeems the code with the backend's
// conditional write; the loser of a race gets *errGrantUsed.
func (f fositeStore) InvalidateAuthorizeCodeSession(ctx context.Context, sig string) error {
	var requestID string
	if m, _ := ctx.Value(codeMemoKey{}).(*codeMemo); m != nil {
		m.mu.Lock()
		requestID = m.codes[sig].rec.RequestID
		delete(m.codes, sig)
		m.mu.Unlock()
	}
	err := f.Store.InvalidateAuthorizeCodeSession(ctx, sig)
	if errors.Is(err, storage.ErrInvalidatedAuthorizeCode) {
		return &errGrantUsed{requestID: requestID}
	}
	return err
}

// CreateAccessTokenSession stores an access token bound to the request's
// DPoP key, if any (bindSession).
func (f fositeStore) CreateAccessTokenSession(ctx context.Context, sig string, r fosite.Requester) error {
	bindSession(ctx, r)
	return f.Store.CreateAccessTokenSession(ctx, sig, r)
}

// CreateRefreshTokenSession stores a refresh token bound to the request's
// DPoP key, if any (bindSession; RFC 9449 §5).
func (f fositeStore) CreateRefreshTokenSession(ctx context.Context, sig, accessSig string, r fosite.Requester) error {
	bindSession(ctx, r)
	return f.Store.CreateRefreshTokenSession(ctx, sig, accessSig, r)
}

// GetRefreshTokenSession reads the refresh token; an inactive one (rotated
// or revoked) is *errGrantUsed.
func (f fositeStore) GetRefreshTokenSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	req, err := f.Store.GetRefreshTokenSession(ctx, sig, session)
	if errors.Is(err, storage.ErrInactiveToken) && req != nil {
		return nil, &errGrantUsed{requestID: req.GetID(), refresh: true, granted: req.GetGrantedScopes()}
	}
	return req, err
}

// RotateRefreshToken rotates with the backend's conditional write; the
// loser of a race gets *errGrantUsed.
func (f fositeStore) RotateRefreshToken(ctx context.Context, requestID, sig string) error {
	err := f.Store.RotateRefreshToken(ctx, requestID, sig)
	if errors.Is(err, storage.ErrInactiveToken) {
		return &errGrantUsed{requestID: requestID, refresh: true}
	}
	return err
}

// GetPKCERequestSession reads the PKCE session of a code. A session that
// is gone because the code was redeemed meanwhile (a concurrent exchange
// committed between fosite's read of the code and this read) is
// *errGrantUsed, like the code itself, so that the request is answered
// from the winner's replay record instead of being refused as a code
// issued without PKCE.
func (f fositeStore) GetPKCERequestSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	var (
		req fosite.Requester
		err error
		hit bool
	)
	if m, _ := ctx.Value(codeMemoKey{}).(*codeMemo); m != nil {
		m.mu.Lock()
		mp, ok := m.pkce[sig]
		delete(m.pkce, sig)
		m.mu.Unlock()
		if ok {
			hit = true
			if err = mp.err; err == nil {
				req, err = mp.rec.Decode(mp.client, session)
			}
		}
	}
	if !hit {
		req, err = f.Store.GetPKCERequestSession(ctx, sig, session)
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return req, err
	}
	code, cerr := f.Store.GetAuthorizeCodeSession(ctx, sig, &fosite.DefaultSession{})
	if errors.Is(cerr, storage.ErrInvalidatedAuthorizeCode) && code != nil {
		return nil, &errGrantUsed{requestID: code.GetID()}
	}
	return req, err
}
