package oauth

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
)

// refreshTokenGrant is the refresh token grant (RFC 6749 §6) with rotation
// (RFC 9700 §4.14.2).
type refreshTokenGrant struct{ p *provider }

// check: refresh_token is required (RFC 6749 §6) and must be one this
// server issued (see authorizationCodeGrant.check).
func (g refreshTokenGrant) check(ctx context.Context, form url.Values) error {
	rt := form.Get("refresh_token")
	if rt == "" {
		return fosite.ErrInvalidRequest.WithHint("The refresh_token parameter is missing (RFC 6749 Section 6).")
	}
	if g.p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(rt, "ory_rt_")) != nil {
		return fosite.ErrInvalidGrant.WithHint("The refresh token is malformed or was not issued by this server.")
	}
	return nil
}

// identity: the same refresh token and client; the requested scope is
// compared as a set when a response is replayed (sameRefreshScope).
func (g refreshTokenGrant) identity(ctx context.Context, clientID string, form url.Values) exchangeIdentity {
	rt := form.Get("refresh_token")
	_, hasScope := form["scope"]
	return exchangeIdentity{
		key:         "r:" + g.p.strategy.RefreshTokenSignature(ctx, rt),
		fingerprint: exchangecache.Fingerprint(clientID, "", rt),
		presented:   rt,
		scope:       scopeSet(form.Get("scope"), hasScope),
	}
}

// sameRefreshScope reports whether a refresh request asking for requested
// (nil: scope omitted) is the same request as the first one, which was
// granted granted. RFC 6749 §6: an omitted scope means the scope originally
// granted; a narrower one may be asked for, and authd (as fosite) issues the
// grant's whole scope whatever is asked; RFC 6749 §3.3: scope is a set. So
// every request whose scope is omitted or within the grant is answered
// with the same response, and is the same request; a wider one is
// invalid_scope before it gets here.
func sameRefreshScope(requested []string, granted string) bool {
	g := scopeSet(granted, true)
	for _, s := range requested {
		if !slices.Contains(g, s) {
			return false
		}
	}
	return true
}

// checkRefreshScope refuses a refresh that asks for a scope not originally
// granted: RFC 6749 §6, the requested scope MUST NOT include any scope not
// originally granted (invalid_scope).
func checkRefreshScope(requested []string, ar fosite.AccessRequester) error {
	for _, s := range requested {
		if !ar.GetGrantedScopes().Has(s) {
			return fosite.ErrInvalidScope.WithHintf("The scope %s was not granted to this refresh token (RFC 6749 Section 6).", truncate(s, 40))
		}
	}
	return nil
}
