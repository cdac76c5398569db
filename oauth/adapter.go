package oauth

import (
	"context"
	"errors"
	"sync"

	"github.com/ory/fosite"

	"github.com/authd/authd/pkce"
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
//     tokens and the replay record commit together, in one write
//     transaction.
//   - A code's PKCE session (RFC 7636 §4.4: code_challenge and
//     code_challenge_method "associated with the authorization code") is
//     the code's own row: the provider keeps both parameters in the code's
//     stored form (fosite's sanitation allow-list, provider.go), so
//     storing, reading and deleting it are no statements of their own. A
//     code issued by an earlier authd has its PKCE session in the PKCE
//     session table, where it is still read and deleted.
type fositeStore struct {
	Store
	// pkceRows also writes PKCE sessions to the table (Config.PKCERows).
	pkceRows bool
}

// errGrantUsed reports that the code or refresh token of a token request
// is no longer active: redeemed, rotated or revoked. It carries the grant
// (request ID) so the exchanger can find the replay record or revoke.
type errGrantUsed struct {
	requestID string
	subject   string // the grant's user, where the read gave it
	refresh   bool
	// subjectToken: a provider ID token already exchanged (RFC 8693).
	subjectToken bool
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
	// tablePKCE holds the codes whose PKCE session was read from the PKCE
	// session table (issued by an earlier authd): the one to delete.
	tablePKCE map[string]bool
}

type memoCode struct {
	rec    storage.Record
	client fosite.Client
}

type codeMemoKey struct{}

// withCodeMemo returns a context for one token request, in which a
// repeated read of an active code is answered from the first.
func withCodeMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, codeMemoKey{}, &codeMemo{codes: map[string]memoCode{}, tablePKCE: map[string]bool{}})
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
			return nil, &errGrantUsed{requestID: req.GetID(), subject: subjectOf(req)}
		}
		return req, err
	}
	// The memo keeps the record as read, so later reads (fosite's second,
	// the PKCE handler's) decode it without encoding it again.
	code, err := f.Store.GetAuthorizeCodeRecord(ctx, sig)
	if err != nil {
		return nil, err
	}
	if !code.Active {
		return nil, &errGrantUsed{requestID: code.Record.RequestID, subject: code.Record.Subject}
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
		return nil, &errGrantUsed{requestID: req.GetID(), subject: subjectOf(req), refresh: true, granted: req.GetGrantedScopes()}
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

// CreatePKCERequestSession stores nothing: the code's own row, written
// just before by the same authorization request, holds code_challenge and
// code_challenge_method (fositeStore). With pkceRows it also writes the
// table row that earlier versions read.
func (f fositeStore) CreatePKCERequestSession(ctx context.Context, sig string, r fosite.Requester) error {
	if f.pkceRows {
		return f.Store.CreatePKCERequestSession(ctx, sig, r)
	}
	return nil
}

// GetPKCERequestSession returns the code's PKCE session: the code itself
// (this request's read of it, from the memo) when its stored form carries
// code_challenge, otherwise the PKCE session table's row (a code issued by
// an earlier authd). A code redeemed meanwhile is *errGrantUsed, like the
// code itself, so that the request is answered from the winner's replay
// record instead of being refused as a code issued without PKCE.
func (f fositeStore) GetPKCERequestSession(ctx context.Context, sig string, session fosite.Session) (fosite.Requester, error) {
	m, _ := ctx.Value(codeMemoKey{}).(*codeMemo)
	var (
		code fosite.Requester
		err  error
		hit  bool
	)
	if m != nil {
		m.mu.Lock()
		mc, ok := m.codes[sig]
		m.mu.Unlock()
		if ok {
			hit = true
			code, err = mc.rec.Decode(mc.client, session)
		}
	}
	if !hit {
		code, err = f.Store.GetAuthorizeCodeSession(ctx, sig, session)
		if errors.Is(err, storage.ErrInvalidatedAuthorizeCode) && code != nil {
			return nil, &errGrantUsed{requestID: code.GetID(), subject: subjectOf(code)}
		}
	}
	if err != nil {
		return nil, err
	}
	if code.GetRequestForm().Get(pkce.ChallengeKey) != "" {
		return code, nil
	}
	// An earlier authd's code: its PKCE session is a row of its own.
	req, err := f.Store.GetPKCERequestSession(ctx, sig, session)
	if err == nil && m != nil {
		m.mu.Lock()
		m.tablePKCE[sig] = true
		m.mu.Unlock()
	}
	return req, err
}

// DeletePKCERequestSession deletes nothing for a code whose PKCE session
// is its own row (redeemed in the same transaction); a table row (an
// earlier authd's code, or pkceRows) is deleted.
func (f fositeStore) DeletePKCERequestSession(ctx context.Context, sig string) error {
	if m, _ := ctx.Value(codeMemoKey{}).(*codeMemo); m != nil && !f.pkceRows {
		m.mu.Lock()
		fromTable := m.tablePKCE[sig]
		delete(m.tablePKCE, sig)
		m.mu.Unlock()
		if !fromTable {
			return nil
		}
	}
	return f.Store.DeletePKCERequestSession(ctx, sig)
}

// subjectOf is the requester's user (sub), or "".
func subjectOf(r fosite.Requester) string {
	if s := r.GetSession(); s != nil {
		return s.GetSubject()
	}
	return ""
}
