package oauth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// authorizeErrorCodes are the error codes of RFC 6749 §4.1.2.1.
var authorizeErrorCodes = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true,
	"unsupported_response_type": true, "invalid_scope": true, "server_error": true,
	"temporarily_unavailable": true,
	// OpenID Connect Core §3.1.2.6, for prompt=none.
	"login_required": true, "consent_required": true, "interaction_required": true,
}

// maxStateLen bounds the state parameter (bytes); longer requests get an
// error page. Mobile SDKs send 22–64 characters.
const maxStateLen = 2048

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
		"sid": bs.ID, "auth_time": bs.AuthTime.Unix(),
	}}
}

// signedIn is the browser's current session and its user.
type signedIn struct {
	ref     string // the cookie's reference
	session identity.Session
	user    identity.User
	// consentOf is the client whose remembered consent was read with the
	// session ("" if none was); consent is that consent, nil if none.
	consentOf string
	consent   *identity.Consent
}

// currentSession returns the browser's valid session, if any. A cookie
// whose row was ended (sign-out, disable, password change) or expired is
// no session.
func (s *Server) currentSession(ctx context.Context, r *http.Request) (signedIn, bool) {
	return s.currentSessionFor(ctx, r, "")
}

// currentSessionFor is currentSession with the user's remembered consent
// for clientID, read in the same query (needsConsent uses it); "" reads
// none.
func (s *Server) currentSessionFor(ctx context.Context, r *http.Request, clientID string) (signedIn, bool) {
	ref := s.cookies.sessionRef(r)
	if ref == "" {
		return signedIn{}, false
	}
	bs, u, c, err := s.people.ResumeSessionFor(ctx, ref, clientID)
	if err != nil {
		if !errors.Is(err, identity.ErrNoSession) {
			s.log.Error("resume session", "error", err)
		}
		return signedIn{}, false
	}
	if u.Disabled {
		return signedIn{}, false
	}
	return signedIn{ref: ref, session: bs, user: u, consentOf: clientID, consent: c}, true
}

// handleAuthorize serves the authorization endpoint (RFC 6749 §3.1, §4.1.1)
// and the login, consent and one-tap forms, which post back to the same URL.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var post url.Values
	fr := r
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			s.renderError(w, http.StatusBadRequest, "The form could not be read.", "Go back to the app and start the sign-in again.")
			return
		}
		post = r.PostForm
		// fosite must see only the authorization request (the query), not
		// the login form's fields.
		fr = r.Clone(ctx)
		fr.Method = http.MethodGet
		fr.Body = http.NoBody
		fr.ContentLength = 0
		fr.Form, fr.PostForm = nil, nil
		fr.Header = r.Header.Clone()
		fr.Header.Del("Content-Type")
	}

	if s.refuseRequest(w, r, fr.URL.RawQuery) {
		return
	}
	if q, ok := parQuery(fr.URL.Query()); ok {
		// RFC 9126 §4: a pushed request is the request; nothing is added
		// from the front channel.
		fr = fr.Clone(ctx)
		u := *fr.URL
		u.RawQuery = q.Encode()
		fr.URL, fr.Form = &u, nil
	}
	ar, err := s.provider.NewAuthorizeRequest(ctx, fr)
	if err != nil {
		s.writeAuthorizeError(w, ar, err)
		return
	}
	if rm := ar.GetResponseMode(); rm != fosite.ResponseModeDefault && rm != fosite.ResponseModeQuery {
		// authd issues codes only, in the query (RFC 6749 §4.1.2).
		s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequest.WithHint("Only response_mode=query is supported."))
		return
	}
	// Refuse bad PKCE parameters before the user types a password
	// (RFC 9700 §2.1.1: PKCE is required for every client).
	if err := s.provider.pkce.ValidateAuthorizeRequest(ar); err != nil {
		s.writeAuthorizeError(w, ar, err)
		return
	}
	client, ok := ar.GetClient().(*storage.Client)
	if !ok {
		s.writeAuthorizeError(w, ar, fosite.ErrServerError)
		return
	}
	if _, pushed := isPAR(ar); !pushed && s.requiresPAR(client) {
		s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequest.WithHint("Authorization requests of this client must be pushed to the pushed_authorization_request_endpoint (RFC 9126 Section 6)."))
		return
	}

	cur, isSignedIn := s.currentSessionFor(ctx, r, client.ID)
	authn, err := s.authnParamsOf(r, ar)
	if err != nil {
		s.writeAuthorizeError(w, ar, err)
		return
	}

	if post != nil {
		if !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.",
				"Go back to the app and start the sign-in again.")
			return
		}
		switch post.Get("step") {
		case "login":
			s.handleLoginForm(w, r, ar, client, post)
			return
		case "consent", "continue":
			if !isSignedIn || !sameSession(post.Get("session"), cur.session.ID) {
				// The session ended, or another account signed in
				// meanwhile (another tab): never issue for a user the
				// page did not show.
				s.renderLogin(w, r, http.StatusOK, client, loginPage{msg: "Your session has ended. Please sign in again."})
				return
			}
			if post.Get("step") == "consent" {
				if post.Get("decision") != "allow" {
					// RFC 6749 §4.1.2.1: the resource owner denied the request.
					s.writeAuthorizeError(w, ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
					return
				}
				if err := s.people.GrantConsent(ctx, cur.user.Subject, client.ID, ar.GetRequestedScopes()); err != nil {
					s.log.Error("grant consent", "error", err)
					s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
					return
				}
			} else if s.needsConsent(ctx, client, cur, ar) {
				s.renderConsent(w, r, client, ar, cur)
				return
			}
			s.issueCode(ctx, w, ar, cur)
			return
		case "switch":
			// "Not you?": end this browser's session, then sign in afresh.
			if isSignedIn {
				if err := s.people.EndSession(ctx, cur.ref); err != nil {
					s.log.Error("end session", "error", err)
				}
			}
			s.cookies.clearSession(w)
			s.renderLogin(w, r, http.StatusOK, client, loginPage{})
			return
		}
	}

	if authn.prompt["none"] {
		s.silentAuthorize(w, r, ar, client, authn, cur, isSignedIn)
		return
	}
	if !isSignedIn {
		s.renderLogin(w, r, http.StatusOK, client, loginPage{username: authn.loginHint})
		return
	}
	if s.reauthenticate(authn, cur) {
		// prompt=login, max_age exceeded, or a hint for another user:
		// the password again; the new session carries a new auth_time.
		s.renderLogin(w, r, http.StatusOK, client, loginPage{username: cmp.Or(authn.loginHint, cur.user.Username),
			msg: "Please enter your password again to continue."})
		return
	}
	if s.needsConsent(ctx, client, cur, ar) {
		s.renderConsent(w, r, client, ar, cur)
		return
	}
	// An existing session and a standing consent: silent only where the
	// client's identity is assured (RFC 8252 §8.6). Otherwise any local app
	// could start its own request with this client_id and receive the code
	// at a private-use scheme or loopback port it claimed: one tap first.
	if s.cfg.SilentSSO == SilentSSOAssured && identityAssured(client.IsPublic(), ar.GetRedirectURI()) {
		s.issueCode(ctx, w, ar, cur)
		return
	}
	s.renderContinue(w, r, client, ar, cur)
}

// handleLoginForm checks a posted username and password; on success it
// starts a new server-side session (a new reference: no fixation) and
// continues to consent or the code.
func (s *Server) handleLoginForm(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, client *storage.Client, post url.Values) {
	ctx := r.Context()
	username := post.Get("username")
	limitKey := username
	if p, err := identity.PrepareUsername(username); err == nil {
		limitKey = p // Alice and alice share one back-off
	}
	ip := clientIP(r)
	if ok, wait := s.loginLimit.allow(limitKey, ip); !ok {
		// Back-off after repeated failures: 429 with Retry-After,
		// checked before the (slow) password hash.
		w.Header().Set("Retry-After", retryAfter(wait))
		s.renderLogin(w, r, http.StatusTooManyRequests, client, loginPage{username: username,
			msg: "Too many failed sign-in attempts. Try again in " + retryAfterWords(wait) + "."})
		return
	}
	u, err := s.people.Authenticate(ctx, username, post.Get("password"))
	if errors.Is(err, storage.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// Not a wrong password, and not charged to the back-off: the
		// database, or the request ended while it queued for a hashing
		// slot (password.Hasher).
		s.renderUnavailable(w)
		return
	}
	if err != nil {
		if !errors.Is(err, identity.ErrInvalidCredentials) {
			s.log.Error("authenticate", "error", err)
		}
		// One message for unknown user, wrong password and disabled user.
		s.loginLimit.failed(limitKey, ip)
		s.renderLogin(w, r, http.StatusUnauthorized, client, loginPage{username: username, msg: "Wrong username or password.", badPassword: true})
		return
	}
	s.loginLimit.succeeded(limitKey)
	if old := s.cookies.sessionRef(r); old != "" {
		// The previous session of this browser ends: a new sign-in is a
		// new session (no fixation).
		if err := s.people.EndSession(ctx, old); err != nil {
			s.log.Error("end previous session", "error", err)
		}
	}
	ref, bs, err := s.people.StartSession(ctx, u.Subject, []string{"pwd"})
	if err != nil {
		s.log.Error("start session", "error", err)
		s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	s.cookies.setSession(w, ref, s.cfg.SessionTTL)
	cur := signedIn{ref: ref, session: bs, user: u}
	if s.needsConsent(ctx, client, cur, ar) {
		s.renderConsent(w, r, client, ar, cur)
		return
	}
	// The user has just typed their password for this request: that is
	// the interaction RFC 8252 §8.6 asks for.
	s.issueCode(ctx, w, ar, cur)
}

// needsConsent reports whether the consent page must be shown: the client
// is not first-party (skip_consent) and the user's remembered consent does
// not cover every requested scope.
//
// prompt=consent (OpenID Connect Core §3.1.2.1) always asks, also a
// first-party client's users.
func (s *Server) needsConsent(ctx context.Context, c *storage.Client, cur signedIn, ar fosite.AuthorizeRequester) bool {
	if slices.Contains(strings.Fields(ar.GetRequestForm().Get("prompt")), "consent") {
		return true
	}
	if c.SkipConsent {
		return false
	}
	if cur.consentOf == c.ID {
		// Read with the session (currentSessionFor).
		return !cur.consent.Covers(ar.GetRequestedScopes())
	}
	ok, err := s.people.ConsentCovers(ctx, cur.user.Subject, c.ID, ar.GetRequestedScopes())
	if err != nil {
		s.log.Error("read consent", "error", err)
		return true
	}
	return !ok
}

func sameSession(posted, current string) bool {
	return posted != "" && subtle.ConstantTimeCompare([]byte(posted), []byte(current)) == 1
}

// issueCode grants the requested scopes (already checked against the
// client's by fosite) and redirects with the code, state and iss.
//
// The code is stored in one transaction with the use of the browser
// session (identity.UseSession): if a sign-out, disable or password change
// ended the session meanwhile, the transaction rolls back and no code
// exists. One commit per code, as before server-side sessions.
func (s *Server) issueCode(ctx context.Context, w http.ResponseWriter, ar fosite.AuthorizeRequester, cur signedIn) {
	for _, scope := range ar.GetRequestedScopes() {
		ar.GrantScope(scope)
	}
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
	sess := userSession(cur.user, cur.session)
	// OpenID Connect Core §3.1.2.1: the nonce is echoed in the ID token.
	if n := ar.GetRequestForm().Get("nonce"); n != "" {
		sess.Extra["nonce"] = n
	}
	// RFC 9449 §10: dpop_jkt binds the code to a DPoP key; the exchange
	// must then present a proof from it (bind, dpop.go).
	if jkt := ar.GetRequestForm().Get("dpop_jkt"); jkt != "" {
		if !jktRe.MatchString(jkt) {
			s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequest.WithHint("dpop_jkt must be a base64url SHA-256 JWK thumbprint (RFC 9449 Section 10, RFC 7638)."))
			return
		}
		sess.Extra[extraDPoPJKT] = jkt
	}
	resp, err := s.provider.NewAuthorizeResponse(tx, ar, sess)
	if err != nil {
		s.writeAuthorizeError(w, ar, err)
		return
	}
	if uri, pushed := isPAR(ar); pushed {
		// RFC 9126 §4: one code per pushed request, decided by a
		// conditional write in this transaction (par.go).
		if err := s.store.UsePARRequest(tx, s.provider.par.signature(uri)); err != nil {
			if errors.Is(err, storage.ErrInactiveToken) || errors.Is(err, storage.ErrNotFound) {
				s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequestURI.WithHint("The request_uri was already used (RFC 9126 Section 4)."))
				return
			}
			s.log.Error("use pushed request", "error", err)
			s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
			return
		}
	}
	if err := s.people.UseSession(tx, cur.session.ID); err != nil {
		if !errors.Is(err, identity.ErrNoSession) {
			s.log.Error("use session", "error", err)
			s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
			return
		}
		s.cookies.clearSession(w)
		s.renderError(w, http.StatusUnauthorized, "Your session has ended.", "Go back to the app and sign in again.")
		return
	}
	if err := s.store.Commit(tx); err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			// The session's use was queued (UseSession): it ended
			// meanwhile (or the client was deleted); no code exists.
			s.cookies.clearSession(w)
			s.renderError(w, http.StatusUnauthorized, "Your session has ended.", "Go back to the app and sign in again.")
			return
		}
		s.log.Error("commit code", "error", err)
		s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
		return
	}
	// RFC 9207 §2: the authorization response carries the issuer.
	resp.AddParameter("iss", s.cfg.Issuer)
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

// refuseRequest checks what fosite does not, before it parses the request,
// and answers with an error page (never a redirect, never a code) when:
//   - a parameter is sent twice (RFC 6749 §3.1);
//   - the state is too long to echo back;
//   - client_id is missing or unknown;
//   - redirect_uri is not registered for the client, compared exactly
//     (RFC 9700 §2.1), loopback ports aside (RFC 8252 §7.3);
//   - redirect_uri is missing while the client has several.
//
// Each refusal is logged with its reason.
func (s *Server) refuseRequest(w http.ResponseWriter, r *http.Request, rawQuery string) bool {
	q, err := url.ParseQuery(rawQuery)
	refuse := func(detail, reason string) bool {
		s.log.Info("authorization request refused", "reason", reason, "client_id", q.Get("client_id"), "request_id", w.Header().Get("X-Request-Id"))
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", detail)
		return true
	}
	if err != nil {
		return refuse("The sign-in link is malformed.", "query does not parse")
	}
	if k := duplicateParam(rawQuery); k != "" {
		return refuse("The app sent the parameter "+clip(k, 40)+" more than once.", "duplicate parameter "+clip(k, 40))
	}
	if len(q.Get("state")) > maxStateLen {
		return refuse("The state parameter is too long.", "state too long")
	}
	id := q.Get("client_id")
	if id == "" {
		return refuse("The client_id parameter is missing.", "missing client_id")
	}
	fc, err := s.store.GetClient(r.Context(), id)
	if errors.Is(err, storage.ErrUnavailable) {
		s.renderUnavailable(w)
		return true
	}
	if err != nil {
		if !errors.Is(err, storage.ErrNotFound) {
			s.log.Error("get client", "error", err)
		}
		return refuse("The app that sent you here is not registered with this server.", "unknown client_id")
	}
	if _, pushed := parQuery(q); pushed {
		// The redirect_uri was checked when the request was pushed (RFC
		// 9126 §2.1); the front channel carries only client_id and
		// request_uri.
		return false
	}
	registered := fc.GetRedirectURIs()
	ru, has := q["redirect_uri"]
	switch {
	case !has && len(registered) != 1:
		return refuse("The redirect_uri parameter is missing.", "missing redirect_uri")
	case !has && slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		// OpenID Connect Core §3.1.2.1: redirect_uri is REQUIRED (fosite
		// enforces it too).
		return refuse("The redirect_uri parameter is missing (it is required with the openid scope).", "missing redirect_uri with openid")
	case has && !redirectRegistered(registered, ru[0]):
		return refuse("The app asked to return to an address that is not registered for it.", "redirect_uri not registered")
	}
	return false
}

// writeAuthorizeError answers a failed authorization request. Per RFC 6749
// §4.1.2.1, when the client or redirect_uri is invalid the user agent is
// NOT redirected: a page explains the error. Otherwise the error is sent to
// the redirect_uri with state and iss (RFC 9207 §2).
//
// A storage outage (storage.ErrUnavailable) is temporarily_unavailable
// (RFC 6749 §4.1.2.1), so the app can offer to try again.
func (s *Server) writeAuthorizeError(w http.ResponseWriter, ar fosite.AuthorizeRequester, err error) {
	rfc := toRFC6749(err)
	if rfc == errUnavailable {
		s.log.Info("authorization request failed: storage unavailable", "error", err)
	} else if rfc.CodeField >= 500 {
		s.log.Error("authorization endpoint error", "error", err)
	} else {
		s.log.Info("authorization request failed", "error", rfc.ErrorField, "reason", rfc.HintField)
	}
	original := rfc.ErrorField
	if !authorizeErrorCodes[rfc.ErrorField] {
		// fosite also uses codes outside RFC 6749 §4.1.2.1 (invalid_state,
		// unsupported_response_mode); clients only know these.
		e := *rfc
		e.ErrorField = fosite.ErrInvalidRequest.ErrorField
		rfc = &e
	}
	if ar == nil || !ar.IsRedirectURIValid() {
		if rfc == errUnavailable {
			s.renderUnavailable(w)
			return
		}
		// refuseRequest has already named a missing or unknown client and
		// an unregistered redirect_uri; say what else fosite found.
		detail := "The app sent an invalid sign-in request."
		switch {
		case original == fosite.ErrInvalidClient.ErrorField:
			detail = "The app that sent you here is not registered with this server."
		case original == fosite.ErrUnsupportedResponseMode.ErrorField:
			detail = "The app asked for a response mode this server does not support (only response_mode=query)."
		case strings.Contains(rfc.HintField, "redirect"):
			detail = "The app asked to return to an address that is not registered for it."
		case rfc.HintField != "":
			detail = "The app sent an invalid sign-in request: " + clip(rfc.HintField, 200)
		}
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", detail)
		return
	}
	u := *ar.GetRedirectURI()
	u.Fragment = ""
	q := u.Query()
	for k, v := range rfc.ToValues() {
		q[k] = v
	}
	if st := ar.GetState(); st != "" {
		q.Set("state", st)
	}
	q.Set("iss", s.cfg.Issuer)
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

// loginPage is what the login page shows beyond the form.
type loginPage struct {
	username    string
	msg         string
	badPassword bool // focus the password field and mark the inputs invalid
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, c *storage.Client, p loginPage) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Login(w, templates.LoginData{
		ClientName: clientName(c), Action: r.URL.RequestURI(), CSRFToken: token, Username: p.username,
		Error: p.msg, Invalid: p.badPassword, Accounts: s.loginLinks(r),
	}); err != nil {
		s.log.Error("render login", "error", err)
	}
}

func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, c *storage.Client, ar fosite.AuthorizeRequester, cur signedIn) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Consent(w, templates.ConsentData{
		ClientName: clientName(c), Username: cur.user.Username, Scopes: s.scopes.describe(ar.GetRequestedScopes()),
		Action: r.URL.RequestURI(), CSRFToken: token, Session: cur.session.ID,
	}); err != nil {
		s.log.Error("render consent", "error", err)
	}
}

// renderContinue shows the one-tap page: "Continue as alice to <app>?",
// with a way to switch account (RFC 8252 §8.6).
func (s *Server) renderContinue(w http.ResponseWriter, r *http.Request, c *storage.Client, ar fosite.AuthorizeRequester, cur signedIn) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.pages.Continue(w, templates.ContinueData{
		ClientName: clientName(c), Username: cur.user.Username, Action: r.URL.RequestURI(),
		CSRFToken: token, Session: cur.session.ID,
	}); err != nil {
		s.log.Error("render continue", "error", err)
	}
}

// renderError shows the friendly error page (never a redirect).
func (s *Server) renderError(w http.ResponseWriter, status int, msg, detail string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Error(w, templates.ErrorData{Message: msg, Detail: detail}); err != nil {
		s.log.Error("render error page", "error", err)
	}
}

// renderUnavailable answers a page request that failed because the
// database could not be reached: 503 with Retry-After, and a page that
// says to try again (not "wrong password", not "unknown app").
func (s *Server) renderUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", retryAfter(time.Second))
	s.renderError(w, http.StatusServiceUnavailable, "Sign-in is unavailable for a moment.", "Please try again in a few seconds.")
}

func clientName(c *storage.Client) string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

// handleLogout ends the browser session. GET shows a confirmation form (or
// says there is nothing to sign out of); only a POST with the CSRF token
// signs out, so another site cannot sign the user out with a link or an
// image. Signing out deletes the server-side session row: a copy of the
// cookie is dead at once.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
			return
		}
		if ref := s.cookies.sessionRef(r); ref != "" {
			if err := s.people.EndSession(ctx, ref); err != nil {
				s.log.Error("end session", "error", err)
				s.renderError(w, http.StatusInternalServerError, "Signing out failed.", "Please try again in a moment.")
				return
			}
		}
		s.cookies.clearSession(w)
		if err := s.pages.Logout(w, templates.LogoutData{Done: true}); err != nil {
			s.log.Error("render logout", "error", err)
		}
		return
	}
	cur, ok := s.currentSession(ctx, r)
	if !ok {
		if err := s.pages.Logout(w, templates.LogoutData{NoSession: true}); err != nil {
			s.log.Error("render logout", "error", err)
		}
		return
	}
	token := s.cookies.csrfToken(w, r)
	if err := s.pages.Logout(w, templates.LogoutData{CSRFToken: token, Username: cur.user.Username}); err != nil {
		s.log.Error("render logout", "error", err)
	}
}
