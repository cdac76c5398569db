package oauth

import (
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	fositeoauth2 "github.com/ory/fosite/handler/oauth2"
	"github.com/ory/fosite/handler/par"

	"github.com/authd/authd/pkce"
)

// provider is the composed fosite provider plus the pieces of it the server
// calls directly. Handlers are built with concrete types here, so fosite's
// interface{}-typed Compose never reaches the rest of authd.
type provider struct {
	*fosite.Fosite
	config   *fosite.Config
	strategy *fositeoauth2.HMACSHAStrategy
	pkce     *pkce.Handler
	par      parStorage
}

// newProvider composes fosite: the authorization code grant, then PKCE (it
// needs the code the former produced), refresh, client credentials,
// introspection and revocation.
//
// store is the store fosite's handlers use (Deps.Store, so every path that
// revokes goes through revocation.Store); the code and refresh handlers see
// it through fositeStore (adapter.go).
func newProvider(cfg Config, store Store, auth *clientAuthenticator, now func() time.Time) *provider {
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
		ClientSecretsHasher:        auth.hasher,
		MinParameterEntropy:        fosite.MinParameterEntropy,
		// RFC 9126: pushed requests; authd enforces PAR per client itself
		// (handleAuthorize), so fosite's server-wide switch stays off.
		PushedAuthorizeRequestURIPrefix: parURIPrefix,
		PushedAuthorizeContextLifespan:  parLifetime,
		// The code's stored form keeps what fosite's code handler keeps
		// when this list is empty (code, redirect_uri: RFC 6749 §4.1.3
		// compares redirect_uri), and code_challenge and
		// code_challenge_method: the code's row is its PKCE session
		// (RFC 7636 §4.4; fositeStore in adapter.go).
		SanitationWhiteList: []string{"code", "redirect_uri", pkce.ChallengeKey, pkce.ChallengeMethodKey},
	}
	strategy := compose.NewOAuth2HMACStrategy(fc)

	// The grant handlers see the store through fositeStore: a redeemed
	// code or used refresh token comes back as *errGrantUsed, for the
	// exchanger to decide (retry or reuse).
	guarded := fositeStore{Store: store, pkceRows: cfg.PKCERows}
	codeHandler := &fositeoauth2.AuthorizeExplicitGrantHandler{
		AccessTokenStrategy:    strategy,
		RefreshTokenStrategy:   strategy,
		AuthorizeCodeStrategy:  strategy,
		CoreStorage:            guarded,
		TokenRevocationStorage: store,
		Config:                 fc,
	}
	pkceHandler := &pkce.Handler{
		AuthorizeCodeStrategy: strategy,
		Storage:               guarded,
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
	ccHandler := &clientCredentialsHandler{&fositeoauth2.ClientCredentialsGrantHandler{
		HandleHelper: &fositeoauth2.HandleHelper{
			AccessTokenStrategy: strategy,
			AccessTokenStorage:  guarded, // binds to a DPoP key (adapter.go)
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
	pars := parStorage{Store: store, key: deriveKey(cfg.Secret, "par-request-uri"), now: now}
	fc.PushedAuthorizeEndpointHandlers.Append(&par.PushedAuthorizeHandler{Storage: pars, Config: fc})

	p := &provider{
		Fosite:   fosite.NewOAuth2Provider(pars, fc), // pars: the request_uri lookups (par.go)
		config:   fc,
		strategy: strategy,
		pkce:     pkceHandler,
		par:      pars,
	}
	fc.ClientAuthenticationStrategy = auth.authenticate
	return p
}
