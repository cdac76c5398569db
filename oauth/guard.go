package oauth

import (
	"context"
	"strings"

	"github.com/authd/authd/storage"
)

// exchangeState follows one token request through fosite (which passes our
// context to its handlers and to the store).
type exchangeState struct {
	// revoked reports that this request revoked a grant's tokens (code or
	// refresh token reuse, RFC 6749 §4.1.2, RFC 9700 §4.14.2).
	revoked bool
}

type exchangeStateKey struct{}

func withExchangeState(ctx context.Context) (context.Context, *exchangeState) {
	st := &exchangeState{}
	return context.WithValue(ctx, exchangeStateKey{}, st), st
}

func exchangeStateFrom(ctx context.Context) *exchangeState {
	st, _ := ctx.Value(exchangeStateKey{}).(*exchangeState)
	return st
}

// reuseGuard is the store as fosite's code and refresh handlers see it. It
// records when fosite's reuse path revokes a grant, so the replay cache
// drops its entry exactly then (design.md, step 5), and not when a
// mismatching request merely failed while the first is still in flight.
//
// Who may trigger reuse revocation: anyone presenting the full, authentic
// code or refresh token a second time (RFC 6749 §4.1.2 makes no exception
// for the client; a code presented twice has leaked). A bare signature or a
// forged token never gets here: checkGrantParams verifies the HMAC first.
//
// It embeds the whole Store, so fosite's transaction type assertion still
// finds BeginTX/Commit/Rollback.
type reuseGuard struct {
	storage.Store
}

func (g reuseGuard) noteRevoked(ctx context.Context) {
	if st := exchangeStateFrom(ctx); st != nil {
		st.revoked = true
	}
}

// RevokeAccessToken revokes and records it.
func (g reuseGuard) RevokeAccessToken(ctx context.Context, requestID string) error {
	g.noteRevoked(ctx)
	return g.Store.RevokeAccessToken(ctx, requestID)
}

// RevokeRefreshToken revokes and records it.
func (g reuseGuard) RevokeRefreshToken(ctx context.Context, requestID string) error {
	g.noteRevoked(ctx)
	return g.Store.RevokeRefreshToken(ctx, requestID)
}

// authenticCode reports whether code is a well-formed authorization code
// whose HMAC verifies under the server's key; a forged code, a bare
// signature or bytes PostgreSQL cannot store never reach the database or
// the replay cache.
func (p *provider) authenticCode(ctx context.Context, code string) bool {
	return p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(code, "ory_ac_")) == nil
}

// authenticRefreshToken is authenticCode for refresh tokens.
func (p *provider) authenticRefreshToken(ctx context.Context, token string) bool {
	return p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(token, "ory_rt_")) == nil
}
