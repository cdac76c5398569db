package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/exchangecache"
	"github.com/authd/authd/federation"
)

// RFC 8693 §2.1, §3: the grant type and the token types.
const (
	grantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// maxSubjectToken bounds subject_token (provider ID tokens are ~1 KiB).
const maxSubjectToken = 8 << 10

// tokenExchangeGrant is the native sign-in (issue 25): RFC 8693 token
// exchange of an upstream provider's ID token (Sign in with Apple's or
// Google's native button) for authd's tokens. Retried, it is answered like
// a retried code exchange: the key is the subject token's hash, consumed
// by a conditional write in the minting transaction, and the answer is
// the replay record's (docs/architecture.md, "The exchange"). A provider
// ID token signs in once: after the window, or from another client, it is
// invalid_request (RFC 8693 §2.2.2).
type tokenExchangeGrant struct {
	s   *Server
	reg *federation.Registry
}

// check: the RFC 8693 §2.1 parameters. Errors are §2.2.2's.
func (g tokenExchangeGrant) check(_ context.Context, form url.Values) error {
	tok := form.Get("subject_token")
	switch {
	case tok == "":
		return fosite.ErrInvalidRequest.WithHint("The subject_token parameter is missing (RFC 8693 Section 2.1).")
	case len(tok) > maxSubjectToken:
		return fosite.ErrInvalidRequest.WithHint("The subject_token is too large.")
	case form.Get("subject_token_type") != tokenTypeIDToken:
		return fosite.ErrInvalidRequest.WithHint("subject_token_type must be urn:ietf:params:oauth:token-type:id_token (a provider's ID token).")
	case form.Has("actor_token") || form.Has("actor_token_type"):
		return fosite.ErrInvalidRequest.WithHint("Delegation (actor_token) is not supported.")
	}
	if t := form.Get("requested_token_type"); t != "" && t != tokenTypeAccessToken {
		return fosite.ErrInvalidRequest.WithHint("requested_token_type must be urn:ietf:params:oauth:token-type:access_token.")
	}
	// RFC 8693 §2.2.2: a target this server does not know is
	// invalid_target. authd issues tokens for itself only.
	for _, p := range []string{"audience", "resource"} {
		if v := form.Get(p); v != "" && strings.TrimRight(v, "/") != g.s.cfg.Issuer {
			return errInvalidTarget
		}
		form.Del(p) // its one acceptable value is the default
	}
	if len(form.Get("nonce")) > 512 {
		return fosite.ErrInvalidRequest.WithHint("The nonce is too long.")
	}
	return nil
}

var errInvalidTarget = &fosite.RFC6749Error{
	ErrorField:       "invalid_target",
	DescriptionField: "The requested audience or resource is not one this server issues tokens for (RFC 8693 Section 2.2.2).",
	CodeField:        http.StatusBadRequest,
}

// nativeSignIn is the verified subject token, handed to the fosite handler
// through the context.
type nativeSignIn struct {
	provider *federation.Provider
	id       *federation.Identity
}

type nativeSignInKey struct{}

// verify checks the client and the subject token before anything is read
// from storage or consumed: the client may use the grant
// (unauthorized_client), and the token is a provider's ID token for one of
// its native_audiences, unexpired, with the right nonce (invalid_request).
func (g tokenExchangeGrant) verify(ctx context.Context, client fosite.Client, form url.Values) (context.Context, error) {
	if !client.GetGrantTypes().Has(grantTokenExchange) {
		return ctx, fosite.ErrUnauthorizedClient.WithHint("The client is not registered for the token exchange grant.")
	}
	tok := form.Get("subject_token")
	providers, err := g.reg.ByIssuer(ctx, federation.UnverifiedIssuer(tok))
	if err != nil {
		return ctx, fosite.ErrTemporarilyUnavailable.WithWrap(err).WithHint("The providers could not be read; retry.")
	}
	if len(providers) == 0 {
		g.s.countFederation("unknown", "native", "issuer")
		return ctx, fosite.ErrInvalidRequest.WithHint("The subject token's issuer is not a provider of this server.")
	}
	var refusal *federation.Refusal
	for _, p := range providers {
		id, err := p.VerifyIDToken(ctx, tok, federation.Check{Audiences: p.NativeAudiences, RawNonce: form.Get("nonce"), Now: g.s.now})
		if err == nil {
			return context.WithValue(ctx, nativeSignInKey{}, &nativeSignIn{provider: p, id: id}), nil
		}
		if errors.Is(err, federation.ErrProviderUnavailable) {
			g.s.countFederation(p.ID, "native", "provider_unavailable")
			g.s.log.Warn("federation: provider keys unavailable", "provider", p.ID, "error", err)
			return ctx, fosite.ErrTemporarilyUnavailable.WithHint("The provider's keys could not be read; retry.")
		}
		if !errors.As(err, &refusal) {
			return ctx, fosite.ErrServerError.WithWrap(err)
		}
		g.s.countFederation(p.ID, "native", refusal.Reason)
	}
	return ctx, fosite.ErrInvalidRequest.WithHint(refusal.Description)
}

// identity: the same subject token from the same client, with the same
// scope and nonce (and DPoP key, added by the pipeline).
func (g tokenExchangeGrant) identity(_ context.Context, clientID string, form url.Values) exchangeIdentity {
	tok := form.Get("subject_token")
	return exchangeIdentity{
		key:         subjectTokenKey(tok),
		fingerprint: exchangecache.Fingerprint(clientID, "scope="+strings.Join(scopeSet(form.Get("scope"), true), " ")+"\x00nonce="+form.Get("nonce"), tok),
		presented:   tok,
	}
}

// subjectTokenKey is the replay key of a subject token: "x:" and its
// SHA-256 (the token itself is never stored).
func subjectTokenKey(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "x:" + hex.EncodeToString(sum[:])
}

// errSubjectTokenUsed answers a subject token exchanged before whose
// record does not answer this request (RFC 8693 §2.2.2: reuse is a
// subject token unacceptable by policy).
var errSubjectTokenUsed = fosite.ErrInvalidRequest.WithHint("The subject token was already exchanged; a provider ID token signs in once. Get a new one from the provider.")

// enableTokenExchange registers the grant and its fosite handler.
func (s *Server) enableTokenExchange(reg *federation.Registry) {
	if reg == nil {
		return
	}
	s.federation = reg
	_ = s.metrics.registry.Register(reg.Collector()) // once per registry
	s.grants[grantTokenExchange] = tokenExchangeGrant{s: s, reg: reg}
	s.provider.config.TokenEndpointHandlers.Append(&tokenExchangeHandler{s: s, store: fositeStore{Store: s.store}})
}

// countFederation counts one federated sign-in attempt.
func (s *Server) countFederation(provider, path, result string) {
	if r := s.federation; r != nil {
		r.Count(provider, path, result)
	}
}

// nativeFrom returns what the handler learnt (the verified provider ID token), for the handler and for the caller's
// metrics and audit after the commit.
func nativeFrom(ctx context.Context) *nativeSignIn {
	n, _ := ctx.Value(nativeSignInKey{}).(*nativeSignIn)
	return n
}

// afterTokenExchange counts a native sign-in's outcome and audits a first
// sign-in or a link (never with a token).
func (s *Server) afterTokenExchange(ctx context.Context, a *answer, err error) {
	n := nativeFrom(ctx)
	if n == nil {
		return
	}
	switch {
	case err == nil:
		s.countFederation(n.provider.ID, "native", "ok")
	case toRFC6749(err).HintField == errSubjectTokenUsed.HintField: // errors.Is matches any invalid_request
		s.countFederation(n.provider.ID, "native", "reuse")
	default:
		s.countFederation(n.provider.ID, "native", "error")
	}
	_ = a
}

// accessTokenExpiry is when an access token minted now expires.
func (s *Server) accessTokenExpiry() time.Time {
	return s.now().UTC().Add(s.cfg.AccessTokenTTL)
}

// grantTypesSupported is discovery's grant_types_supported: the token
// exchange when providers are configured.
func (s *Server) grantTypesSupported() []string {
	g := []string{"authorization_code", "refresh_token", "client_credentials"}
	if s.federation != nil {
		g = append(g, grantTokenExchange)
	}
	return g
}

// Federation returns the providers (Deps.Federation), for the jobs cmd
// runs beside the server (federation.RevocationKind); nil without.
func (s *Server) Federation() *federation.Registry { return s.federation }
