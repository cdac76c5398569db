package oauth

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	fositeoauth2 "github.com/ory/fosite/handler/oauth2"

	"github.com/authd/authd/pkce"
	"github.com/authd/authd/storage"
)

// provider is the composed fosite provider plus the pieces of it the server
// calls directly. Handlers are built with concrete types here, so fosite's
// interface{}-typed Compose never reaches the rest of authd.
type provider struct {
	*fosite.Fosite
	config   *fosite.Config
	strategy *fositeoauth2.HMACSHAStrategy
	pkce     *pkce.Handler
}

// newProvider composes fosite: the authorization code grant, then PKCE (it
// needs the code the former produced), refresh, client credentials,
// introspection and revocation.
func newProvider(cfg Config, store storage.Store, hasher fosite.Hasher) *provider {
	fc := &fosite.Config{
		AccessTokenLifespan:   cfg.AccessTokenTTL,
		RefreshTokenLifespan:  cfg.RefreshTokenTTL,
		AuthorizeCodeLifespan: cfg.AuthorizeCodeTTL,
		GlobalSecret:          deriveKey(cfg.Secret, "fosite-hmac"),
		TokenURL:              cfg.Issuer + "/oauth2/token",
		IDTokenIssuer:         cfg.Issuer,
		AccessTokenIssuer:     cfg.Issuer,
		// Refresh tokens are issued only when offline_access is granted,
		// the convention mobile SDKs follow.
		RefreshTokenScopes:       []string{"offline_access"},
		ScopeStrategy:            fosite.ExactScopeStrategy,
		AudienceMatchingStrategy: fosite.DefaultAudienceMatchingStrategy,
		// PKCE is enforced by our own handler (package pkce); fosite's
		// settings stay off so its handler, never registered, cannot matter.
		EnforcePKCE:                false,
		SendDebugMessagesToClients: false,
		ClientSecretsHasher:        hasher,
		MinParameterEntropy:        fosite.MinParameterEntropy,
	}
	strategy := compose.NewOAuth2HMACStrategy(fc)

	// The grant handlers see the store through reuseGuard: reuse revokes
	// only for the client the code or refresh token was issued to.
	guarded := reuseGuard{store}
	codeHandler := &fositeoauth2.AuthorizeExplicitGrantHandler{
		AccessTokenStrategy:    strategy,
		RefreshTokenStrategy:   strategy,
		AuthorizeCodeStrategy:  strategy,
		CoreStorage:            guarded,
		TokenRevocationStorage: guarded,
		Config:                 fc,
	}
	pkceHandler := &pkce.Handler{
		AuthorizeCodeStrategy: strategy,
		Storage:               store,
		AllowPlain:            cfg.AllowPlainPKCE,
	}
	refreshHandler := &fositeoauth2.RefreshTokenGrantHandler{
		AccessTokenStrategy:    strategy,
		RefreshTokenStrategy:   strategy,
		TokenRevocationStorage: guarded,
		Config:                 fc,
	}
	introspector := &fositeoauth2.CoreValidator{
		CoreStrategy: strategy,
		CoreStorage:  store,
		Config:       fc,
	}
	revoker := &fositeoauth2.TokenRevocationHandler{
		TokenRevocationStorage: store,
		AccessTokenStrategy:    strategy,
		RefreshTokenStrategy:   strategy,
	}
	ccHandler := &clientCredentialsHandler{&fositeoauth2.ClientCredentialsGrantHandler{
		HandleHelper: &fositeoauth2.HandleHelper{
			AccessTokenStrategy: strategy,
			AccessTokenStorage:  store,
			Config:              fc,
		},
		Config: fc,
	}}

	// Order matters: PKCE runs after the code handler at the authorization
	// endpoint (it needs the code) and after it at the token endpoint (the
	// code handler detects reuse and revokes first, RFC 6749 §4.1.2).
	fc.AuthorizeEndpointHandlers.Append(codeHandler)
	fc.AuthorizeEndpointHandlers.Append(pkceHandler)
	fc.TokenEndpointHandlers.Append(codeHandler)
	fc.TokenEndpointHandlers.Append(pkceHandler)
	fc.TokenEndpointHandlers.Append(refreshHandler)
	fc.TokenEndpointHandlers.Append(ccHandler)
	fc.TokenIntrospectionHandlers.Append(introspector)
	fc.RevocationHandlers.Append(revoker)

	p := &provider{
		Fosite:   fosite.NewOAuth2Provider(store, fc),
		config:   fc,
		strategy: strategy,
		pkce:     pkceHandler,
	}
	fc.ClientAuthenticationStrategy = p.authenticateClient
	return p
}

// authenticateClient is fosite's client authentication with two rules of
// RFC 6749 §2.3 that fosite leaves out:
//   - a client uses one authentication method per request (§2.3.1): HTTP
//     Basic and a client_secret in the body together are invalid_request,
//     as is a body client_id that differs from the Basic one;
//   - a public client has no secret (§2.1): one that sends a secret is
//     refused with invalid_client rather than silently accepted.
func (p *provider) authenticateClient(ctx context.Context, r *http.Request, form url.Values) (fosite.Client, error) {
	basicID, _, basic := r.BasicAuth()
	if basic {
		if form.Get("client_secret") != "" {
			return nil, fosite.ErrInvalidRequest.WithHint("The client authenticated with both HTTP Basic and a client_secret in the body; use one method (RFC 6749 §2.3.1).")
		}
		if id := form.Get("client_id"); id != "" {
			if dec, err := url.QueryUnescape(basicID); err == nil && dec != id {
				return nil, fosite.ErrInvalidRequest.WithHint("The client_id in the body differs from the one in the HTTP Basic credentials.")
			}
		}
	} else if h := r.Header.Get("Authorization"); h != "" && !hasBearer(h) {
		return nil, fosite.ErrInvalidClient.WithHint("The Authorization header is not valid HTTP Basic credentials (RFC 6749 §2.3.1).")
	}
	client, err := p.DefaultClientAuthenticationStrategy(ctx, r, form)
	if err != nil {
		return nil, err
	}
	if client.IsPublic() {
		_, secret, _ := r.BasicAuth()
		if secret != "" || form.Get("client_secret") != "" {
			return nil, fosite.ErrInvalidClient.WithHint("This client is public (token_endpoint_auth_method none) and must not send a client_secret.")
		}
	}
	return client, nil
}

// hasBearer reports whether an Authorization header uses the Bearer scheme
// (case-insensitive, RFC 9110 §11.1).
func hasBearer(h string) bool {
	return len(h) > 7 && strings.EqualFold(h[:7], "Bearer ")
}
