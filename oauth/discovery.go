package oauth

import (
	"encoding/json"
	"net/http"

	"github.com/authd/authd/dpop"
)

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
	AcrValuesSupported                []string `json:"acr_values_supported"`
	ClaimsParameterSupported          bool     `json:"claims_parameter_supported"`
	RequestParameterSupported         bool     `json:"request_parameter_supported"`
	RequestURIParameterSupported      bool     `json:"request_uri_parameter_supported"`
	// DPoPSigningAlgValuesSupported are the DPoP proof algorithms (RFC
	// 9449 §5.1).
	DPoPSigningAlgValuesSupported []string `json:"dpop_signing_alg_values_supported"`
	// PAR (RFC 9126 §5).
	PushedAuthorizationRequestEndpoint string `json:"pushed_authorization_request_endpoint"`
	// draft-ietf-oauth-first-party-apps-04 §4.1: the authorization
	// challenge endpoint (for first_party clients).
	AuthorizationChallengeEndpoint     string `json:"authorization_challenge_endpoint"`
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
var claimsSupported = []string{"iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "acr", "amr", "nonce", "at_hash", "sid",
	"email", "email_verified", "name"}

// metadataDocument is the metadata of this server.
func (s *Server) metadataDocument() metadata {
	methods := []string{"S256"}
	if s.cfg.AllowPlainPKCE {
		methods = append(methods, "plain")
	}
	iss := s.cfg.Issuer
	return metadata{
		Issuer:                            iss,
		AuthorizationEndpoint:             iss + pathAuthorize,
		TokenEndpoint:                     iss + pathToken,
		UserinfoEndpoint:                  iss + pathUserinfo,
		JWKSURI:                           iss + pathJWKS,
		EndSessionEndpoint:                s.endSessionEndpoint(),
		RevocationEndpoint:                iss + pathRevoke,
		IntrospectionEndpoint:             iss + pathIntrospect,
		ScopesSupported:                   []string{"openid", "offline_access", "profile", "email"},
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               s.grantTypesSupported(),
		SubjectTypesSupported:             []string{"public"},
		IDTokenSigningAlgValuesSupported:  []string{"RS256", "ES256"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post", "none"},
		RevocationAuthMethodsSupported:    []string{"client_secret_basic", "client_secret_post", "none"},
		IntrospectionAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post", "bearer"},
		ClaimsSupported:                   claimsSupported,
		CodeChallengeMethodsSupported:     methods,
		IssParameterSupported:             true,
		PromptValuesSupported:             []string{"none", "login", "consent", "select_account"},
		AcrValuesSupported:                acrValuesSupported,
		// The claims parameter's id_token acr is honoured (acr.go,
		// OpenID Connect Core §5.5.1.1); its other members are voluntary
		// claims, which §5.5 lets the OP leave out.
		ClaimsParameterSupported:           true,
		DPoPSigningAlgValuesSupported:      dpop.SigningAlgs(),
		PushedAuthorizationRequestEndpoint: iss + pathPAR,
		AuthorizationChallengeEndpoint:     iss + pathChallenge,
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
