package oauth

import (
	"context"
	"net/url"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
)

// authorizationCodeGrant is the authorization code grant (RFC 6749 §4.1.3)
// with PKCE (RFC 7636 §4.5, enforced by package pkce inside fosite).
type authorizationCodeGrant struct{ p *provider }

// check: code is required (RFC 6749 §4.1.3) and must be one this server
// issued: a code whose HMAC does not verify is invalid_grant here, before
// the database or the replay cache sees it, so a bare signature (say, read
// from a cache key) or a forged key half is worth nothing.
func (g authorizationCodeGrant) check(ctx context.Context, form url.Values) error {
	code := form.Get("code")
	if code == "" {
		return fosite.ErrInvalidRequest.WithHint("The code parameter is missing (RFC 6749 Section 4.1.3).")
	}
	if g.p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(code, "ory_ac_")) != nil {
		return fosite.ErrInvalidGrant.WithHint("The authorization code is malformed or was not issued by this server.")
	}
	return nil
}

// identity: the same code, client, redirect_uri and code_verifier.
func (g authorizationCodeGrant) identity(ctx context.Context, clientID string, form url.Values) exchangeIdentity {
	v := form.Get("code_verifier")
	return exchangeIdentity{
		key:         "c:" + g.p.strategy.AuthorizeCodeSignature(ctx, form.Get("code")),
		fingerprint: exchangecache.Fingerprint(clientID, form.Get("redirect_uri"), v),
		presented:   v,
	}
}
