package oauth

import (
	"errors"
	"net/http"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
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
		if sess.Username != "" && sess.Subject != "" {
			// The current name of the token's subject, never the name at
			// issuance: a renamed user's tokens must not introspect as the
			// name someone else holds now. A deleted user has none.
			u, err := s.people.GetBySubject(ctx, sess.Subject)
			switch {
			case err == nil:
				resp["username"] = u.Username
			case errors.Is(err, storage.ErrUnavailable):
				s.writeError(w, r, err)
				return
			case !errors.Is(err, identity.ErrUserNotFound):
				s.log.Error("introspect: read user", "error", err)
			}
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
