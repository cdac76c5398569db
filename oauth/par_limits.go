package oauth

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ory/fosite"
)

// Bounds on what an authorization request may carry, wherever it enters
// (the authorization endpoint, PAR). A state is echoed in the redirect, a
// nonce in the ID token, a scope on the consent page: each stays small.
const (
	maxNonceLen = 512
	maxScopeLen = 2048
)

// PARLimits bounds pushed authorization requests (RFC 9126), an entry
// point like the authorization endpoint: per authenticated client and per
// source address. Budgets are shared by every replica through Deps.Limits.
type PARLimits struct {
	PerClient TokenLimits // default 10/s, burst 50
	PerSource TokenLimits // default 5/s, burst 30
}

func (l *PARLimits) applyDefaults() {
	if l.PerClient.PerSecond == 0 {
		l.PerClient = TokenLimits{PerSecond: 10, Burst: 50}
	}
	if l.PerSource.PerSecond == 0 {
		l.PerSource = TokenLimits{PerSecond: 5, Burst: 30}
	}
}

// requestBounds refuses an authorization request whose state, nonce or
// scope is longer than authd echoes (invalid_request, RFC 6749 §4.1.2.1;
// the description never repeats the value).
func requestBounds(form url.Values) error {
	switch {
	case len(form.Get("state")) > maxStateLen:
		return fosite.ErrInvalidRequest.WithHint("The state parameter is longer than 2048 bytes.")
	case len(form.Get("nonce")) > maxNonceLen:
		return fosite.ErrInvalidRequest.WithHint("The nonce parameter is longer than 512 bytes.")
	case len(form.Get("scope")) > maxScopeLen:
		return fosite.ErrInvalidRequest.WithHint("The scope parameter is longer than 2048 bytes.")
	}
	return nil
}

// chargePARSource spends one push of the source address's budget.
func (s *Server) chargePARSource(ctx context.Context, r *http.Request) error {
	if ok, wait := s.limits.Take(ctx, "par-source", clientIP(r), s.cfg.PARLimits.PerSource.rate()); !ok {
		return errTooManyRequests(wait, "Too many pushed authorization requests from this address; retry after the Retry-After delay.")
	}
	return nil
}

// chargePARClient spends one push of the authenticated client's budget.
func (s *Server) chargePARClient(ctx context.Context, clientID string) error {
	if ok, wait := s.limits.Take(ctx, "par-client", clientID, s.cfg.PARLimits.PerClient.rate()); !ok {
		return errTooManyRequests(wait, "Too many pushed authorization requests for this client; retry after the Retry-After delay.")
	}
	return nil
}
