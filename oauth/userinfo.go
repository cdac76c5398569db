package oauth

import (
	"crypto/subtle"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/dpop"
	"github.com/authd/authd/secevent"
	"github.com/authd/authd/storage"
)

// handleUserinfo serves the UserInfo endpoint (OpenID Connect Core §5.3),
// GET and POST: the access token as a Bearer token in the Authorization
// header (RFC 6750 §2.1) or, on POST, as the access_token form parameter
// (RFC 6750 §2.2), never both. The answer is sub (equal to the ID token's,
// Core §5.3.2) and the claims of the email and profile scopes (§5.4). An
// invalid, expired or revoked token, or one issued to a user who no longer
// exists, is 401 with WWW-Authenticate: Bearer error="invalid_token"; a
// token without the openid scope is 403 insufficient_scope (RFC 6750 §3.1).
//
// A DPoP-bound access token (RFC 9449 §7) comes as Authorization: DPoP
// with a proof whose ath is the token's hash, from the key the token is
// bound to; its errors are DPoP challenges. A DPoP-bound token presented
// as a Bearer token is refused (§7.2). No server nonce is asked for here.
func (s *Server) handleUserinfo(w http.ResponseWriter, r *http.Request) {
	if hasScheme(r.Header.Get("Authorization"), "DPoP") {
		s.userinfoDPoP(w, r)
		return
	}
	token, err := userinfoToken(r)
	if err != nil {
		s.writeBearerError(w, r, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if token == "" {
		// RFC 6750 §3.1: a request without credentials gets the
		// challenge without an error code.
		s.writeBearerError(w, r, http.StatusUnauthorized, "", "")
		return
	}
	use, ar, err := s.provider.IntrospectToken(r.Context(), token, fosite.AccessToken, newSession(""))
	if err != nil || use != fosite.AccessToken {
		s.writeBearerError(w, r, http.StatusUnauthorized, "invalid_token", "The access token is invalid, expired or revoked.")
		return
	}
	if sessionJKT(ar.GetSession(), extraCnfJKT) != "" {
		// RFC 9449 §7.2: a DPoP-bound token is not a bearer token.
		s.writeDPoPError(w, http.StatusUnauthorized, "invalid_token", "The access token is DPoP-bound; present it with Authorization: DPoP and a proof (RFC 9449 Section 7).")
		return
	}
	s.userinfoClaims(w, r, ar)
}

// userinfoDPoP serves a UserInfo request with a DPoP-bound access token
// (RFC 9449 §7.1): one DPoP header, a proof for this method and URL with
// ath, and the token bound to the proof's key.
func (s *Server) userinfoDPoP(w http.ResponseWriter, r *http.Request) {
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if token == "" || r.URL.Query().Has("access_token") {
		s.writeDPoPError(w, http.StatusBadRequest, "invalid_request", "The DPoP Authorization header carries no access token, or the token was also sent another way.")
		return
	}
	proofs := r.Header.Values("DPoP")
	if len(proofs) != 1 {
		s.writeDPoPError(w, http.StatusUnauthorized, "invalid_dpop_proof", "Send exactly one DPoP proof (RFC 9449 Section 7.1).")
		return
	}
	p, err := s.dpopResource.Verify(r.Context(), proofs[0], dpop.Request{Method: r.Method, URL: s.cfg.Issuer + pathUserinfo, AccessToken: token})
	if err != nil {
		if errors.Is(err, dpop.ErrProofReplayed) {
			s.security.Record(r.Context(), secevent.Event{Kind: secevent.DPoPProofReplay, Source: clientIP(r)})
		}
		s.writeDPoPError(w, http.StatusUnauthorized, "invalid_dpop_proof", err.Error())
		return
	}
	use, ar, err := s.provider.IntrospectToken(r.Context(), token, fosite.AccessToken, newSession(""))
	if err != nil || use != fosite.AccessToken {
		s.writeDPoPError(w, http.StatusUnauthorized, "invalid_token", "The access token is invalid, expired or revoked.")
		return
	}
	jkt := sessionJKT(ar.GetSession(), extraCnfJKT)
	if jkt == "" || subtle.ConstantTimeCompare([]byte(jkt), []byte(p.JKT)) != 1 {
		// RFC 9449 §7.1: the key of the proof must be the token's.
		s.writeDPoPError(w, http.StatusUnauthorized, "invalid_token", "The access token is not bound to the key of the DPoP proof.")
		return
	}
	s.userinfoClaims(w, r, ar)
}

// userinfoClaims answers the claims of an accepted access token.
func (s *Server) userinfoClaims(w http.ResponseWriter, r *http.Request, ar fosite.AccessRequester) {
	if !ar.GetGrantedScopes().Has("openid") {
		s.writeBearerError(w, r, http.StatusForbidden, "insufficient_scope", "The access token was not granted the openid scope.")
		return
	}
	sess, _ := ar.GetSession().(*fosite.DefaultSession)
	if sess == nil || sess.Subject == "" {
		s.writeBearerError(w, r, http.StatusUnauthorized, "invalid_token", "The access token has no end-user.")
		return
	}
	u, err := s.store.GetUserBySubject(r.Context(), sess.Subject)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			s.writeBearerError(w, r, http.StatusUnauthorized, "invalid_token", "The user of this access token no longer exists.")
			return
		}
		s.writeError(w, r, fosite.ErrServerError.WithWrap(err))
		return
	}
	claims := map[string]any{"sub": u.Subject}
	var c idTokenClaims
	addProfileClaims(&c, u, ar.GetGrantedScopes())
	if c.Email != "" {
		claims["email"], claims["email_verified"] = c.Email, *c.EmailVerified
	}
	if c.Name != "" {
		claims["name"] = c.Name
	}
	writeJSON(w, http.StatusOK, claims)
}

// userinfoToken returns the access token of a UserInfo request: from the
// Authorization header (Bearer), or on POST from an
// application/x-www-form-urlencoded body. Sending it both ways is an error
// (RFC 6750 §2: clients MUST NOT use more than one method).
func userinfoToken(r *http.Request) (string, error) {
	header, _ := bearerToken(r)
	hasHeader := header != ""
	if !hasHeader && r.Header.Get("Authorization") != "" {
		return "", errors.New("The Authorization header is not a Bearer token.")
	}
	var form string
	if r.Method == http.MethodPost {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
			if err := r.ParseForm(); err != nil {
				return "", errors.New("The request body could not be parsed as a form.")
			}
			if v := r.PostForm["access_token"]; len(v) > 1 {
				return "", errors.New("The access_token parameter was sent more than once.")
			} else if len(v) == 1 {
				form = v[0]
			}
		}
	}
	if r.URL.Query().Has("access_token") {
		// RFC 6750 §2.3 (URI query) is not supported: tokens in URLs leak.
		return "", errors.New("The access token must not be sent in the URL query.")
	}
	switch {
	case hasHeader && form != "":
		return "", errors.New("The access token was sent more than one way (RFC 6750 Section 2).")
	case hasHeader:
		return header, nil
	default:
		return form, nil
	}
}
