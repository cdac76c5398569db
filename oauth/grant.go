package oauth

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"
)

// grant is one grant type's own rules at the token endpoint: its required
// parameters, its checks before anything is read from storage, and what
// makes two of its requests "the same request" for the replay record. One
// file per grant: grant_authorization_code.go, grant_refresh_token.go,
// grant_client_credentials.go.
type grant interface {
	// check validates the grant's parameters. Errors are RFC 6749 §5.2:
	// invalid_request for a missing parameter, invalid_grant for a code
	// or refresh token this server did not issue.
	check(ctx context.Context, form url.Values) error
	// identity returns the replay identity of a request by clientID; the
	// zero value means the grant is never replayed.
	identity(ctx context.Context, clientID string, form url.Values) exchangeIdentity
}

// exchangeIdentity is what identifies "the same request" for one grant
// (docs/architecture.md, "The exchange").
type exchangeIdentity struct {
	// key is "c:" + the code's signature or "r:" + the refresh token's:
	// the replay record's and the cache entry's key.
	key string
	// fingerprint is exchangecache.Fingerprint of client_id, redirect_uri
	// and the code_verifier (or refresh token).
	fingerprint string
	// presented is the code_verifier or refresh token: the sealing key's
	// input, never stored.
	presented string
	// scope is, for the refresh grant, the requested scope as a sorted
	// set, nil when the request omits scope (RFC 6749 §6: then the scope
	// originally granted). It is compared when a response is replayed, not
	// hashed into the fingerprint, because "omitted" equals the granted
	// scope, which only the stored response knows.
	scope []string
}

// grants are the grant types the token endpoint serves.
func (p *provider) grants() map[string]grant {
	return map[string]grant{
		"authorization_code": authorizationCodeGrant{p},
		"refresh_token":      refreshTokenGrant{p},
		"client_credentials": clientCredentialsGrant{},
	}
}

// lookupGrant returns the grant named by grant_type: a missing one is
// invalid_request, an unknown one unsupported_grant_type (RFC 6749 §5.2).
func (s *Server) lookupGrant(form url.Values) (grant, string, error) {
	name := form.Get("grant_type")
	if name == "" {
		return nil, "", fosite.ErrInvalidRequest.WithHint("The grant_type parameter is missing (RFC 6749 Section 3.2).")
	}
	g, ok := s.grants[name]
	if !ok {
		// The grants discovery advertises (token exchange with providers).
		return nil, "", fosite.ErrUnsupportedGrantType.WithHintf("The grant type is not supported; use one of %s.", strings.Join(s.grantTypesSupported(), ", "))
	}
	return g, name, nil
}

// scopeSet returns the space-delimited scope (RFC 6749 §3.3) as a sorted
// set without duplicates; nil when scope is absent.
func scopeSet(scope string, present bool) []string {
	if !present {
		return nil
	}
	s := strings.Fields(scope)
	slices.Sort(s)
	return slices.Compact(s)
}
