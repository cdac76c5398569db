package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/ory/fosite"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

// newSession returns the fosite session stored with codes and tokens
// (token and introspection requests pass newSession("") to decode into).
func newSession(subject string) *fosite.DefaultSession {
	return &fosite.DefaultSession{Subject: subject, Username: subject}
}

// userSession is the fosite session of a code issued to a signed-in user:
// the subject, the username at the time, and (in Extra) the browser session
// it came from ("sid") and when the user authenticated ("auth_time"), for
// OpenID Connect and for revocation by session.
func userSession(u identity.User, bs identity.Session) *fosite.DefaultSession {
	return &fosite.DefaultSession{Subject: u.Subject, Username: u.Username, Extra: map[string]any{
		"sid": bs.ID, "auth_time": bs.AuthTime.Unix(), "amr": bs.AMR,
	}}
}

// errSessionEnded: the browser session a code was to come from ended
// meanwhile (a sign-out, disable or password change); no code exists.
var errSessionEnded = errors.New("oauth: the session ended")

// issueCode grants the requested scopes (already checked against the
// client's by fosite) and redirects with the code, state and iss.
//
// The code is stored in one transaction with the use of the browser
// session (identity.UseSession): if a sign-out, disable or password change
// ended the session meanwhile, the transaction rolls back and no code
// exists. One commit per code, as before server-side sessions.
func (s *Server) issueCode(ctx context.Context, w http.ResponseWriter, ar fosite.AuthorizeRequester, cur signedIn) {
	// One transaction; the code (its row is also its PKCE session) and
	// the session's use are queued and go to PostgreSQL with COMMIT
	// (storage.Batcher).
	tx, err := s.store.BeginDeferredTX(ctx)
	if err != nil {
		s.log.Error("begin", "error", err)
		s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	defer func() { _ = s.store.Rollback(tx) }() // a no-op after Commit
	resp, err := s.prepareCode(tx, ar, cur)
	if err == nil {
		err = s.store.Commit(tx)
		if errors.Is(err, storage.ErrNotFound) {
			// The session's use was queued (UseSession): it ended
			// meanwhile (or the client was deleted); no code exists.
			err = errSessionEnded
		}
	}
	switch {
	case errors.Is(err, errSessionEnded):
		s.cookies.clearSession(w)
		s.renderError(w, http.StatusUnauthorized, "Your session has ended.", "Go back to the app and sign in again.")
		return
	case err != nil:
		if toRFC6749(err).CodeField >= 500 {
			s.log.Error("issue code", "error", err)
		}
		s.writeAuthorizeError(w, ar, err)
		return
	}
	// RFC 9207 §2: the authorization response carries the issuer.
	resp.AddParameter("iss", s.cfg.Issuer)
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

// prepareCode is a code's issue without its answer, the part the
// authorization endpoint (issueCode) and the challenge endpoint
// (challenge_step.go) share: in tx, the code with the session's acr, amr,
// auth_time, nonce and DPoP binding, the pushed request used, the
// browser session's use and (with openid) the note of the client on it.
// The caller commits; a session that ended meanwhile is errSessionEnded
// (or storage.ErrNotFound from the commit: the use is a queued, checked
// write).
func (s *Server) prepareCode(tx context.Context, ar fosite.AuthorizeRequester, cur signedIn) (fosite.AuthorizeResponder, error) {
	for _, scope := range ar.GetRequestedScopes() {
		ar.GrantScope(scope)
	}
	sess := userSession(cur.user, cur.session)
	// OpenID Connect Core §2 acr and amr (RFC 8176), of the session as it
	// is now (raised by a second factor, factor.go).
	acrReq, _ := parseACR(ar.GetRequestForm()) // parsed and checked at the request (authnParamsOf)
	sess.Extra["acr"] = acrOf(cur.session.AMR, acrReq.values)
	// OpenID Connect Core §3.1.2.1: the nonce is echoed in the ID token.
	if n := ar.GetRequestForm().Get("nonce"); n != "" {
		sess.Extra["nonce"] = n
	}
	// RFC 9449 §10: dpop_jkt binds the code to a DPoP key; the exchange
	// must then present a proof from it (bind, dpop.go).
	if jkt := ar.GetRequestForm().Get("dpop_jkt"); jkt != "" {
		if !jktRe.MatchString(jkt) {
			return nil, fosite.ErrInvalidRequest.WithHint("dpop_jkt must be a base64url SHA-256 JWK thumbprint (RFC 9449 Section 10, RFC 7638).")
		}
		sess.Extra[extraDPoPJKT] = jkt
	}
	resp, err := s.provider.NewAuthorizeResponse(tx, ar, sess)
	if err != nil {
		return nil, err
	}
	if uri, pushed := isPAR(ar); pushed {
		// RFC 9126 §4: one code per pushed request, decided by a
		// conditional write in this transaction (par.go).
		if err := s.store.UsePARRequest(tx, s.provider.par.signature(uri)); err != nil {
			if errors.Is(err, storage.ErrInactiveToken) || errors.Is(err, storage.ErrNotFound) {
				return nil, fosite.ErrInvalidRequestURI.WithHint("The request_uri was already used (RFC 9126 Section 4).")
			}
			return nil, fosite.ErrServerError.WithWrap(err)
		}
	}
	if err := s.people.UseSession(tx, cur.session.ID, sessionClient(ar)); err != nil {
		if errors.Is(err, identity.ErrNoSession) {
			return nil, errSessionEnded
		}
		return nil, fosite.ErrServerError.WithWrap(err)
	}
	return resp, nil
}

// sessionClient is the client the browser session must record with the
// code's use of it: one issued a code with openid, whose ID tokens carry
// the session's sid, so that the session's end sends it a back-channel
// logout (OpenID Connect Back-Channel Logout 1.0 §2.3; package
// backchannel). "" for a code without openid.
func sessionClient(ar fosite.AuthorizeRequester) string {
	if !ar.GetGrantedScopes().Has("openid") {
		return ""
	}
	return ar.GetClient().GetID()
}
