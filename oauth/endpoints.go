package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// isAdmin reports whether r carries one of the configured admin bearer
// tokens (constant time, admintoken.go).
func (s *Server) isAdmin(r *http.Request) bool {
	token, _ := bearerToken(r)
	if token == "" {
		return false // the common case (client authentication): no HMAC
	}
	return s.adminTokens.match(token)
}

// handleIntrospect implements RFC 7662 token introspection. The caller must
// be a confidential client (RFC 7662 §2.1: the endpoint requires
// authorization) or present an admin token. It reads as the token
// endpoint does: parse, authenticate, check, act, write (writer.go).
func (s *Server) handleIntrospect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := parseTokenForm(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !s.isAdmin(r) {
		if hasBearer(r.Header.Get("Authorization")) {
			s.writeError(w, r, fosite.ErrInvalidClient.WithHint("The bearer token is not an admin token."))
			return
		}
		client, err := s.clientAuth.authenticate(ctx, r, r.PostForm)
		if err != nil {
			s.writeError(w, r, s.chargeAuthFailure(r, err))
			return
		}
		if client.IsPublic() {
			s.writeError(w, r, fosite.ErrInvalidClient.WithHint("Public clients may not introspect tokens (RFC 7662 Section 2.1)."))
			return
		}
	}
	token := r.PostForm.Get("token")
	if token == "" {
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing (RFC 7662 Section 2.1)."))
		return
	}
	hint := fosite.TokenUse(r.PostForm.Get("token_type_hint"))
	use, ar, err := s.provider.IntrospectToken(ctx, token, hint, newSession(""))
	if errors.Is(err, storage.ErrUnavailable) {
		// Not "inactive": the database did not answer (503, retry).
		s.writeError(w, r, err)
		return
	}
	if err != nil {
		// RFC 7662 §2.2: an invalid, expired or revoked token is inactive,
		// without further detail.
		writeJSON(w, http.StatusOK, map[string]any{"active": false})
		return
	}
	resp := map[string]any{
		"active":     true,
		"scope":      strings.Join(ar.GetGrantedScopes(), " "),
		"client_id":  ar.GetClient().GetID(),
		"iat":        ar.GetRequestedAt().Unix(),
		"iss":        s.cfg.Issuer,
		"token_type": "Bearer",
	}
	if use == fosite.RefreshToken {
		resp["token_type"] = "refresh_token"
	}
	if sess, ok := ar.GetSession().(*fosite.DefaultSession); ok {
		if sess.Subject != "" {
			resp["sub"] = sess.Subject
		}
		if sess.Username != "" {
			resp["username"] = sess.Username
		}
		kind := fosite.AccessToken
		if use == fosite.RefreshToken {
			kind = fosite.RefreshToken
		}
		if exp := sess.GetExpiresAt(kind); !exp.IsZero() {
			resp["exp"] = exp.Unix()
		}
		// RFC 9449 §6.2: a DPoP-bound token's confirmation, the JWK
		// thumbprint of its key, and token_type DPoP.
		if jkt := sessionJKT(sess, extraCnfJKT); jkt != "" {
			resp["cnf"] = map[string]string{"jkt": jkt}
			if use == fosite.AccessToken {
				resp["token_type"] = "DPoP"
			}
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleRevoke implements RFC 7009 token revocation: parse, authenticate
// the client as at the token endpoint (RFC 7009 §2.1), revoke, write.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := parseTokenForm(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	client, err := s.clientAuth.authenticate(ctx, r, r.PostForm)
	if err != nil {
		s.writeError(w, r, s.chargeAuthFailure(r, err))
		return
	}
	token := r.PostForm.Get("token")
	if token == "" {
		// RFC 7009 §2.1: token is REQUIRED.
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing (RFC 7009 Section 2.1)."))
		return
	}
	if err := s.revoke(ctx, client, token, r.PostForm.Get("token_type_hint")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// revoke ends the grant that token belongs to (RFC 7009 §2.1): its refresh
// and access tokens, and through revocation.Store its replay records and
// cache entries. The token may be one that is no longer active — a
// refresh token already rotated, an access token already replaced: the app
// revokes what it holds, and that must still end the grant (the new pair
// may be one whose response it never received). Rules:
//   - token_type_hint only orders the lookups (§2.1);
//   - a token this server did not issue, or an unknown one, is 200 with
//     nothing revoked (§2.2: invalid tokens do not cause an error);
//   - a token issued to another client is refused with unauthorized_client
//     and stays active (§2.1: "the request is refused and the client is
//     informed of the error");
//   - a storage failure is 503 with Retry-After (§2.2.1), so the client
//     retries.
func (s *Server) revoke(ctx context.Context, client fosite.Client, token, hint string) error {
	p := s.provider
	lookups := []func() (fosite.Requester, error){
		func() (fosite.Requester, error) {
			if p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(token, "ory_rt_")) != nil || !strings.HasPrefix(token, "ory_rt_") {
				return nil, storage.ErrNotFound
			}
			return s.revoker.GetRefreshTokenSession(ctx, p.strategy.RefreshTokenSignature(ctx, token), newSession(""))
		},
		func() (fosite.Requester, error) {
			if p.strategy.Enigma.Validate(ctx, strings.TrimPrefix(token, "ory_at_")) != nil || !strings.HasPrefix(token, "ory_at_") {
				return nil, storage.ErrNotFound
			}
			return s.revoker.GetAccessTokenSession(ctx, p.strategy.AccessTokenSignature(ctx, token), newSession(""))
		},
	}
	if hint == "access_token" {
		lookups[0], lookups[1] = lookups[1], lookups[0]
	}
	var grant fosite.Requester
	for _, look := range lookups {
		req, err := look()
		if req != nil && (err == nil || errors.Is(err, storage.ErrInactiveToken)) {
			grant = req
			break
		}
		if err != nil && !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrInactiveToken) {
			return fosite.ErrTemporarilyUnavailable.WithHint("The token could not be looked up; retry the request.").WithWrap(err)
		}
	}
	if grant == nil {
		return nil
	}
	if grant.GetClient().GetID() != client.GetID() {
		return fosite.ErrUnauthorizedClient.WithHint("The token was not issued to this client; it was not revoked (RFC 7009 Section 2.1).")
	}
	id := grant.GetID()
	rctx := context.WithoutCancel(ctx) // a revocation is not abandoned halfway
	// One transaction for the grant's refresh and access tokens
	// (revocation.Store), then its replay cache entries; a retry of a
	// revocation interrupted anywhere finds the token (inactive or not)
	// and finishes the job.
	if err := s.revoker.RevokeRefreshToken(rctx, id); err != nil {
		return fosite.ErrTemporarilyUnavailable.WithHint("The token could not be revoked; retry the request.").WithWrap(err)
	}
	return nil
}

// metadata is the RFC 8414 §2 authorization server metadata, which is also
// the OpenID Provider metadata (OpenID Connect Discovery 1.0 §3): one
// document served at both well-known paths, so they cannot disagree on the
// issuer, endpoints or capabilities (RFC 8414 §3: an OpenID Provider's
// metadata may be published at either).
type metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	UserinfoEndpoint                  string   `json:"userinfo_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	EndSessionEndpoint                string   `json:"end_session_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	SubjectTypesSupported             []string `json:"subject_types_supported"`
	IDTokenSigningAlgValuesSupported  []string `json:"id_token_signing_alg_values_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	IntrospectionAuthMethodsSupported []string `json:"introspection_endpoint_auth_methods_supported"`
	ClaimsSupported                   []string `json:"claims_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
	PromptValuesSupported             []string `json:"prompt_values_supported,omitempty"`
	ClaimsParameterSupported          bool     `json:"claims_parameter_supported"`
	RequestParameterSupported         bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported      bool     `json:"request_uri_parameter_supported"`
	// DPoPSigningAlgValuesSupported are the DPoP proof algorithms (RFC
	// 9449 §5.1).
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported"`
	// PAR (RFC 9126 §5).
	PushedAuthorizationRequestEndpoint string `json:"pushed_authorization_request_endpoint"`
	RequirePushedAuthorizationRequests bool   `json:"require_pushed_authorization_requests"`
	// OpenID Connect Back-Channel Logout 1.0 §2.1: logout tokens are
	// POSTed to clients' backchannel_logout_uri, always with a sid.
	BackchannelLogoutSupported        bool `json:"backchannel_logout_supported"`
	BackchannelLogoutSessionSupported bool `json:"backchannel_logout_session_supported"`
}

// endSessionEndpoint is the RP-initiated logout endpoint (endsession.go).
func (s *Server) endSessionEndpoint() string { return s.cfg.Issuer + pathEndSession }

// claimsSupported are the claims authd can supply (OpenID Connect
// Discovery 1.0 §3 claims_supported): the ID token's and the profile and
// email scopes'.
var claimsSupported = []string{"iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "at_hash", "sid",
	"email", "email_verified", "name"}

// metadataDocument is the metadata of this server.
func (s *Server) metadataDocument() metadata {
	methods := []string{"S256"}
	if s.cfg.AllowPlainPKCE {
		methods = append(methods, "plain")
	}
	iss := s.cfg.Issuer
	return metadata{
		Issuer:                             iss,
		AuthorizationEndpoint:              iss + pathAuthorize,
		TokenEndpoint:                      iss + pathToken,
		UserinfoEndpoint:                   iss + pathUserinfo,
		JWKSURI:                            iss + pathJWKS,
		EndSessionEndpoint:                 s.endSessionEndpoint(),
		RevocationEndpoint:                 iss + pathRevoke,
		IntrospectionEndpoint:              iss + pathIntrospect,
		ScopesSupported:                    []string{"openid", "offline_access", "profile", "email"},
		ResponseTypesSupported:             []string{"code"},
		ResponseModesSupported:             []string{"query"},
		GrantTypesSupported:                []string{"authorization_code", "refresh_token", "client_credentials"},
		SubjectTypesSupported:              []string{"public"},
		IDTokenSigningAlgValuesSupported:   []string{"RS256", "ES256"},
		TokenEndpointAuthMethodsSupported:  []string{"client_secret_basic", "client_secret_post", "none"},
		RevocationAuthMethodsSupported:     []string{"client_secret_basic", "client_secret_post", "none"},
		IntrospectionAuthMethodsSupported:  []string{"client_secret_basic", "client_secret_post", "bearer"},
		ClaimsSupported:                    claimsSupported,
		CodeChallengeMethodsSupported:      methods,
		IssParameterSupported:              true,
		PromptValuesSupported:              []string{"none", "login", "consent", "select_account"},
		DPoPSigningAlgValuesSupported:      dpop.SigningAlgs(),
		PushedAuthorizationRequestEndpoint: iss + pathPAR,
		RequirePushedAuthorizationRequests: s.cfg.RequirePAR,
		BackchannelLogoutSupported:         true,
		BackchannelLogoutSessionSupported:  true,
	}
}

// handleMetadata serves the metadata at /.well-known/oauth-authorization-server
// (RFC 8414 §3) and /.well-known/openid-configuration (OpenID Connect
// Discovery 1.0 §4), cacheable for five minutes.
func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(s.metadataDocument())
}

func (s *Server) handleCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(templates.CSS)
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "error_description": "No such endpoint."})
}

func (s *Server) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{
		"error": "invalid_request", "error_description": "The HTTP method " + r.Method + " is not allowed on this endpoint."})
}
