package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/ory/fosite"
	"golang.org/x/crypto/bcrypt"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// authorizeErrorCodes are the error codes of RFC 6749 §4.1.2.1.
var authorizeErrorCodes = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true,
	"unsupported_response_type": true, "invalid_scope": true, "server_error": true,
	"temporarily_unavailable": true,
}

// maxStateLen bounds the state parameter (bytes); longer requests get an
// error page. Mobile SDKs send 22–64 characters.
const maxStateLen = 2048

// dummyHash is compared against when the username is unknown, so a wrong
// username and a wrong password take the same time.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("authd-timing-equaliser"), bcrypt.DefaultCost)

// newSession returns the fosite session stored with codes and tokens.
func newSession(subject string) *fosite.DefaultSession {
	return &fosite.DefaultSession{Subject: subject, Username: subject}
}

// handleAuthorize serves the authorization endpoint (RFC 6749 §3.1, §4.1.1)
// and the login and consent forms, which post back to the same URL.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var post url.Values
	fr := r
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			s.renderError(w, http.StatusBadRequest, "The form could not be read.", "")
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

	if len(fr.URL.Query().Get("state")) > maxStateLen {
		// Too long to echo back safely in a redirect: refuse on a page.
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", "The state parameter is too long.")
		return
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

	sess, sessErr := s.cookies.session(r)
	signedIn := sessErr == nil

	if post != nil {
		if !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.",
				"Go back to the app and start the sign-in again.")
			return
		}
		switch post.Get("step") {
		case "login":
			username := post.Get("username")
			ip := clientIP(r)
			if ok, wait := s.loginLimit.allow(username, ip); !ok {
				// Back-off after repeated failures: 429 with Retry-After,
				// checked before the (slow) password hash.
				w.Header().Set("Retry-After", retryAfter(wait))
				s.renderLogin(w, r, http.StatusTooManyRequests, client, username,
					"Too many failed sign-in attempts. Try again in "+retryAfter(wait)+" seconds.")
				return
			}
			if !s.checkPassword(ctx, username, post.Get("password")) {
				s.loginLimit.failed(username, ip)
				s.renderLogin(w, r, http.StatusUnauthorized, client, username, "Wrong username or password.")
				return
			}
			s.loginLimit.succeeded(username)
			// A new sign-in always gets a new session id.
			s.cookies.setSession(w, username, s.cfg.SessionTTL)
			sess, signedIn = browserSession{Subject: username}, true
			if !client.SkipConsent {
				s.renderConsent(w, r, client, ar, username)
				return
			}
			s.issueCode(ctx, w, ar, sess.Subject)
			return
		case "consent":
			if !signedIn {
				s.renderLogin(w, r, http.StatusOK, client, "", "Your session has expired. Please sign in again.")
				return
			}
			if post.Get("decision") != "allow" {
				// RFC 6749 §4.1.2.1: the resource owner denied the request.
				s.writeAuthorizeError(w, ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
				return
			}
			s.issueCode(ctx, w, ar, sess.Subject)
			return
		}
	}

	if !signedIn {
		s.renderLogin(w, r, http.StatusOK, client, "", "")
		return
	}
	if !client.SkipConsent {
		s.renderConsent(w, r, client, ar, sess.Subject)
		return
	}
	s.issueCode(ctx, w, ar, sess.Subject)
}

// issueCode grants the requested scopes (already checked against the
// client's by fosite) and redirects with the code, state and iss.
func (s *Server) issueCode(ctx context.Context, w http.ResponseWriter, ar fosite.AuthorizeRequester, subject string) {
	for _, scope := range ar.GetRequestedScopes() {
		ar.GrantScope(scope)
	}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, newSession(subject))
	if err != nil {
		s.writeAuthorizeError(w, ar, err)
		return
	}
	// RFC 9207 §2: the authorization response carries the issuer.
	resp.AddParameter("iss", s.cfg.Issuer)
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

// writeAuthorizeError answers a failed authorization request. Per RFC 6749
// §4.1.2.1, when the client or redirect_uri is invalid the user agent is
// NOT redirected: a page explains the error. Otherwise the error is sent to
// the redirect_uri with state and iss (RFC 9207 §2).
func (s *Server) writeAuthorizeError(w http.ResponseWriter, ar fosite.AuthorizeRequester, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	if rfc.CodeField >= 500 {
		s.log.Error("authorization endpoint error", "error", err)
	}
	if !authorizeErrorCodes[rfc.ErrorField] {
		// fosite also uses codes outside RFC 6749 §4.1.2.1 (invalid_state,
		// unsupported_response_mode); clients only know these.
		e := *rfc
		e.ErrorField = fosite.ErrInvalidRequest.ErrorField
		rfc = &e
	}
	if ar == nil || !ar.IsRedirectURIValid() {
		detail := "The app sent an invalid sign-in request."
		switch rfc.ErrorField {
		case fosite.ErrInvalidClient.ErrorField:
			detail = "The app that sent you here is not registered with this server."
		case fosite.ErrInvalidRequest.ErrorField:
			if ar != nil && ar.GetClient() != nil {
				detail = "The app asked to return to an address that is not registered for it."
			}
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

// checkPassword verifies a user's password in roughly constant time.
func (s *Server) checkPassword(ctx context.Context, username, password string) bool {
	hash := dummyHash
	u, err := s.store.GetUser(ctx, username)
	known := err == nil
	if known {
		hash = u.PasswordHash
	} else if !errors.Is(err, storage.ErrNotFound) {
		s.log.Error("get user", "error", err)
	}
	ok := bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
	return known && ok
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, c *storage.Client, username, msg string) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Login(w, templates.LoginData{
		ClientName: clientName(c), Action: r.URL.RequestURI(), CSRFToken: token, Username: username, Error: msg,
	}); err != nil {
		s.log.Error("render login", "error", err)
	}
}

func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, c *storage.Client, ar fosite.AuthorizeRequester, username string) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Consent(w, templates.ConsentData{
		ClientName: clientName(c), Username: username, Scopes: ar.GetRequestedScopes(),
		Action: r.URL.RequestURI(), CSRFToken: token,
	}); err != nil {
		s.log.Error("render consent", "error", err)
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

func clientName(c *storage.Client) string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}

// handleLogout ends the browser session. GET shows a confirmation form;
// only a POST with the CSRF token signs out, so another site cannot sign
// the user out with a link or an image.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
			return
		}
		s.cookies.clearSession(w)
		if err := s.pages.Logout(w, templates.LogoutData{Done: true}); err != nil {
			s.log.Error("render logout", "error", err)
		}
		return
	}
	token := s.cookies.csrfToken(w, r)
	if err := s.pages.Logout(w, templates.LogoutData{CSRFToken: token}); err != nil {
		s.log.Error("render logout", "error", err)
	}
}
