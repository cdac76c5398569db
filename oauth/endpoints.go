package oauth

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"

	"github.com/authd/authd/web/templates"
)

// isAdmin reports whether r carries one of the configured admin bearer
// tokens (the admin API's check, constant-time).
func (s *Server) isAdmin(r *http.Request) bool {
	token, _ := bearerToken(r)
	if token == "" {
		return false // the common case (client authentication): no HMAC
	}
	_, ok := s.admin.AuthenticateToken(token)
	return ok
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
			s.writeError(w, r, err)
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
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleRevoke implements RFC 7009 token revocation: parse, authenticate
// the client as at the token endpoint (RFC 7009 §2.1), revoke through
// fosite (the grant's tokens and, through revokingStore, its replay
// entries), write. A token issued to another client is refused with
// unauthorized_client and stays active (RFC 7009 §2.1: "If this
// validation fails, the request is refused and the client is informed of
// the error"); an unknown, invalid or already revoked token is 200
// (RFC 7009 §2.2).
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := parseTokenForm(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	client, err := s.clientAuth.authenticate(ctx, r, r.PostForm)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if r.PostForm.Get("token") == "" {
		// RFC 7009 §2.1: token is REQUIRED.
		s.writeError(w, r, fosite.ErrInvalidRequest.WithHint("The token parameter is missing (RFC 7009 Section 2.1)."))
		return
	}
	err = s.provider.NewRevocationRequest(withClient(ctx, client), r)
	switch {
	case err == nil:
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		w.WriteHeader(http.StatusOK)
	case errors.Is(err, fosite.ErrUnauthorizedClient):
		s.writeError(w, r, fosite.ErrUnauthorizedClient.WithHint("The token was not issued to this client; it was not revoked (RFC 7009 Section 2.1)."))
	default:
		s.writeError(w, r, err)
	}
}

// metadata is the RFC 8414 §2 authorization server metadata.
type metadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RevocationEndpoint                string   `json:"revocation_endpoint"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint"`
	ResponseTypesSupported            []string `json:"response_types_supported"`
	ResponseModesSupported            []string `json:"response_modes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	RevocationAuthMethodsSupported    []string `json:"revocation_endpoint_auth_methods_supported"`
	IntrospectionAuthMethodsSupported []string `json:"introspection_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
}

func (s *Server) handleMetadata(w http.ResponseWriter, r *http.Request) {
	methods := []string{"S256"}
	if s.cfg.AllowPlainPKCE {
		methods = append(methods, "plain")
	}
	iss := s.cfg.Issuer
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_ = json.NewEncoder(w).Encode(metadata{
		Issuer:                            iss,
		AuthorizationEndpoint:             iss + pathAuthorize,
		TokenEndpoint:                     iss + pathToken,
		RevocationEndpoint:                iss + pathRevoke,
		IntrospectionEndpoint:             iss + pathIntrospect,
		ResponseTypesSupported:            []string{"code"},
		ResponseModesSupported:            []string{"query"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token", "client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post", "none"},
		RevocationAuthMethodsSupported:    []string{"client_secret_basic", "client_secret_post", "none"},
		IntrospectionAuthMethodsSupported: []string{"client_secret_basic", "client_secret_post", "bearer"},
		CodeChallengeMethodsSupported:     methods,
		ScopesSupported:                   []string{"openid", "offline_access"},
		IssParameterSupported:             true,
	})
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
