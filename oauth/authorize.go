package oauth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"

	"github.com/ory/fosite"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
)

// This file is the authorization endpoint (RFC 6749 §3.1, §4.1.1) and its
// flow: parse and refuse the request, apply a posted step, decide the next
// step (next.go), answer it. The sign-in methods are in signin.go, the
// code's issue in code.go, the pages in pages.go.

// authorizeErrorCodes are the error codes of RFC 6749 §4.1.2.1.
var authorizeErrorCodes = map[string]bool{
	"invalid_request": true, "unauthorized_client": true, "access_denied": true,
	"unsupported_response_type": true, "invalid_scope": true, "server_error": true,
	"temporarily_unavailable": true,
	// OpenID Connect Core §3.1.2.6, for prompt=none and request objects.
	"login_required": true, "consent_required": true, "interaction_required": true,
	"request_not_supported": true, "request_uri_not_supported": true,
}

// maxStateLen bounds the state parameter (bytes); longer requests get an
// error page. Mobile SDKs send 22–64 characters.
const maxStateLen = 2048

// signedIn is the browser's current session and its user.
type signedIn struct {
	ref     string // the cookie's reference
	session identity.Session
	user    identity.User
	// consentOf is the client whose remembered consent was read with the
	// session ("" if none was); consent is that consent, nil if none.
	consentOf string
	consent   *identity.Consent
	// factors are the user's second factors, read with the session when
	// factorsRead (an authorization request's read, currentSessionFor):
	// factorRequired then asks no more.
	factors     identity.Factors
	factorsRead bool
}

// currentSession returns the browser's valid session, if any. A cookie
// whose row was ended (sign-out, disable, password change) or expired is
// no session.
func (s *Server) currentSession(ctx context.Context, r *http.Request) (signedIn, bool) {
	return s.currentSessionFor(ctx, r, "")
}

// currentSessionFor is currentSession with the user's remembered consent
// for clientID and second factors, read in the same query (consentCovers
// and factorRequired use them); "" reads neither.
func (s *Server) currentSessionFor(ctx context.Context, r *http.Request, clientID string) (signedIn, bool) {
	ref := s.cookies.sessionRef(r)
	if ref == "" {
		return signedIn{}, false
	}
	bs, u, c, f, err := s.people.ResumeSignIn(ctx, ref, clientID)
	if err != nil {
		if !errors.Is(err, identity.ErrNoSession) {
			s.log.Error("resume session", "error", err)
		}
		return signedIn{}, false
	}
	if u.Disabled {
		return signedIn{}, false
	}
	return signedIn{ref: ref, session: bs, user: u, consentOf: clientID, consent: c, factors: f, factorsRead: clientID != ""}, true
}

// authzRequest is one authorization request as the flow sees it.
type authzRequest struct {
	// r is the HTTP request; every page of the flow posts back to
	// r.URL.RequestURI().
	r      *http.Request
	ar     fosite.AuthorizeRequester
	client *storage.Client
	authn  authnParams
	// cur is the browser's session when isSignedIn.
	cur        signedIn
	isSignedIn bool
	// factors are the signed-in user's second factors (userFactors,
	// factor.go), read at most once per request.
	factors     []signin.Factor
	factorsErr  error
	factorsRead bool
}

// progress is what a posted step did in this request (stepInput's
// proven, interacted and consented), and how the login page, if it is
// next, is shown.
type progress struct {
	proven, interacted, consented bool
	// msg is shown on the login page; noHint leaves its username empty
	// ("Not you?").
	msg    string
	noHint bool
}

// handleAuthorize serves the authorization endpoint and the steps of its
// flow, which post back to the same URL (step=login, consent, continue,
// switch). It reads top to bottom: parse and refuse the request, apply a
// posted step, decide the next step, answer it.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	post, fr, ok := s.readStepForm(w, r)
	if !ok {
		return
	}
	a, ok := s.parseAuthorize(w, r, fr)
	if !ok {
		return
	}
	var done progress
	if post != nil {
		if done, ok = s.postedStep(w, a, post); !ok {
			return
		}
	}
	s.advance(w, a, done)
}

// readStepForm reads a posted step's form. fr is the request fosite
// parses: the authorization request alone (the query), never the form's
// fields.
func (s *Server) readStepForm(w http.ResponseWriter, r *http.Request) (post url.Values, fr *http.Request, ok bool) {
	if r.Method != http.MethodPost {
		return nil, r, true
	}
	if err := r.ParseForm(); err != nil {
		s.renderError(w, http.StatusBadRequest, "The form could not be read.", "Go back to the app and start the sign-in again.")
		return nil, nil, false
	}
	fr = r.Clone(r.Context())
	fr.Method = http.MethodGet
	fr.Body = http.NoBody
	fr.ContentLength = 0
	fr.Form, fr.PostForm = nil, nil
	fr.Header = r.Header.Clone()
	fr.Header.Del("Content-Type")
	return r.PostForm, fr, true
}

// parseAuthorize parses the authorization request of fr (r is the HTTP
// request it came in) and refuses what must not go on: what fosite does
// not check (refuseRequest), fosite's own checks, response_mode, PKCE
// before the user types a password, PAR where required, the OpenID
// Connect parameters. It also reads the browser's session. A refusal is
// answered here (ok false).
func (s *Server) parseAuthorize(w http.ResponseWriter, r, fr *http.Request) (*authzRequest, bool) {
	ctx := r.Context()
	if s.refuseRequest(w, r, fr.URL.RawQuery) {
		return nil, false
	}
	fr, unsupported := withoutRequestObject(fr)
	if q, ok := parQuery(fr.URL.Query()); ok {
		// RFC 9126 §4: a pushed request is the request; nothing is added
		// from the front channel.
		ctx = withPARClient(ctx, q.Get("client_id"))
		fr = fr.Clone(ctx)
		u := *fr.URL
		u.RawQuery = q.Encode()
		fr.URL, fr.Form = &u, nil
	}
	ar, err := s.provider.NewAuthorizeRequest(ctx, fr)
	if err != nil {
		s.writeAuthorizeError(w, ar, err)
		return nil, false
	}
	if unsupported != nil {
		// OpenID Connect Core §6.1, §6.2: request objects are not
		// supported (discovery says so); told to the app at its redirect.
		s.writeAuthorizeError(w, ar, unsupported)
		return nil, false
	}
	if err := requestBounds(ar.GetRequestForm()); err != nil {
		s.writeAuthorizeError(w, ar, err)
		return nil, false
	}
	if rm := ar.GetResponseMode(); rm != fosite.ResponseModeDefault && rm != fosite.ResponseModeQuery {
		// authd issues codes only, in the query (RFC 6749 §4.1.2).
		s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequest.WithHint("Only response_mode=query is supported."))
		return nil, false
	}
	// RFC 9700 §2.1.1: PKCE is required for every client.
	if err := s.provider.pkce.ValidateAuthorizeRequest(ar); err != nil {
		s.writeAuthorizeError(w, ar, err)
		return nil, false
	}
	client, ok := ar.GetClient().(*storage.Client)
	if !ok {
		s.writeAuthorizeError(w, ar, fosite.ErrServerError)
		return nil, false
	}
	if _, pushed := isPAR(ar); !pushed && s.requiresPAR(client) {
		s.writeAuthorizeError(w, ar, fosite.ErrInvalidRequest.WithHint("Authorization requests of this client must be pushed to the pushed_authorization_request_endpoint (RFC 9126 Section 6)."))
		return nil, false
	}
	a := &authzRequest{r: r, ar: ar, client: client}
	a.cur, a.isSignedIn = s.currentSessionFor(ctx, r, client.ID)
	if a.authn, err = s.authnParamsOf(r, ar); err != nil {
		s.writeAuthorizeError(w, ar, err)
		return nil, false
	}
	return a, true
}

// postedStep checks the form's CSRF token and applies its step: login
// (a sign-in method, signin.go), consent, continue (the one tap) or
// switch ("Not you?"). It answers what ends the request here (a refusal,
// a denial, a failed sign-in) with ok false; otherwise the request goes
// on to the decision with what the step did. A form with no known step
// is the request itself.
func (s *Server) postedStep(w http.ResponseWriter, a *authzRequest, post url.Values) (progress, bool) {
	ctx := a.r.Context()
	if !s.cookies.checkCSRF(a.r) {
		s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.",
			"Go back to the app and start the sign-in again.")
		return progress{}, false
	}
	switch post.Get("step") {
	case "login":
		return s.signInStep(w, a, post)
	case "consent", "continue":
		if !a.isSignedIn || !sameSession(post.Get("session"), a.cur.session.ID) {
			// The session ended, or another account signed in meanwhile
			// (another tab): never issue for a user the page did not
			// show. Sign in again.
			a.cur, a.isSignedIn = signedIn{}, false
			return progress{msg: "Your session has ended. Please sign in again.", noHint: true}, true
		}
		done := progress{proven: true, interacted: true}
		if post.Get("step") == "consent" {
			if post.Get("decision") != "allow" {
				// RFC 6749 §4.1.2.1: the resource owner denied the request.
				s.writeAuthorizeError(w, a.ar, fosite.ErrAccessDenied.WithHint("The user denied the request."))
				return progress{}, false
			}
			if err := s.people.GrantConsent(ctx, a.cur.user.Subject, a.client.ID, a.ar.GetRequestedScopes()); err != nil {
				s.log.Error("grant consent", "error", err)
				s.writeAuthorizeError(w, a.ar, fosite.ErrServerError.WithWrap(err))
				return progress{}, false
			}
			done.consented = true
		}
		return done, true
	case "factor":
		return s.factorStep(w, a, post)
	case "factor-setup":
		return s.setupStep(w, a, post)
	case "switch":
		// "Not you?": end this browser's session, then sign in afresh.
		if a.isSignedIn {
			if err := s.people.EndSession(ctx, a.cur.ref); err != nil {
				s.log.Error("end session", "error", err)
			}
		}
		s.cookies.clearSession(w)
		a.cur, a.isSignedIn = signedIn{}, false
		return progress{noHint: true}, true
	}
	return progress{}, true
}

// advance decides the next step (decide) and answers it: one switch.
// Under prompt=none every step but the code is its error (silentError).
func (s *Server) advance(w http.ResponseWriter, a *authzRequest, done progress) {
	st := decide(s.stepInputOf(a, done))
	if a.authn.prompt["none"] {
		if err := silentError(st); err != nil {
			s.writeAuthorizeError(w, a.ar, err)
			return
		}
	}
	switch st {
	case stepSignIn:
		hint := a.authn.loginHint
		if done.noHint {
			hint = ""
		}
		s.renderLogin(w, a.r, http.StatusOK, a.client, loginPage{username: hint, msg: done.msg})
	case stepReauth:
		// The new session carries a new auth_time.
		s.renderLogin(w, a.r, http.StatusOK, a.client, loginPage{username: cmp.Or(a.authn.loginHint, a.cur.user.Username),
			msg: "Please enter your password again to continue.", reauth: true})
	case stepFactor:
		s.renderFactorStep(w, a, http.StatusOK, "") // factor.go
	case stepConsent:
		s.renderConsent(w, a.r, a.client, a.ar, a.cur)
	case stepConfirm:
		s.renderContinue(w, a.r, a.client, a.cur)
	case stepIssue:
		s.issueCode(a.r.Context(), w, a.ar, a.cur)
	}
}

// stepInputOf reads what decide needs. The remembered consent is read
// only when it can matter (a session, not first-party, no prompt=consent,
// not allowed just now), and usually came with the session
// (currentSessionFor).
func (s *Server) stepInputOf(a *authzRequest, done progress) stepInput {
	in := stepInput{
		now: s.now(), promptLogin: a.authn.prompt["login"], promptConsent: a.authn.prompt["consent"],
		promptSelectAccount: a.authn.prompt["select_account"],
		maxAge:              a.authn.maxAge, public: a.client.IsPublic(), skipConsent: a.client.SkipConsent,
		redirectURI: a.ar.GetRedirectURI(), silentSSO: s.cfg.SilentSSO,
		proven: done.proven, interacted: done.interacted, consented: done.consented,
	}
	if a.authn.hint != nil {
		in.hintSubject = a.authn.hint.Subject
	}
	if !a.isSignedIn {
		return in
	}
	in.session = &stepSession{subject: a.cur.user.Subject, authTime: a.cur.session.AuthTime}
	in.factorRequired, in.session.factor = s.factorRequired(a)
	if !in.skipConsent && !in.promptConsent && !in.consented {
		in.consentCovers = s.consentCovers(a.r.Context(), a.client, a.cur, a.ar)
	}
	return in
}

// consentCovers reports whether the user's remembered consent for the
// client covers every requested scope. A failed read is no consent (the
// page asks).
func (s *Server) consentCovers(ctx context.Context, c *storage.Client, cur signedIn, ar fosite.AuthorizeRequester) bool {
	if cur.consentOf == c.ID {
		// Read with the session (currentSessionFor).
		return cur.consent.Covers(ar.GetRequestedScopes())
	}
	ok, err := s.people.ConsentCovers(ctx, cur.user.Subject, c.ID, ar.GetRequestedScopes())
	if err != nil {
		s.log.Error("read consent", "error", err)
		return false
	}
	return ok
}

func sameSession(posted, current string) bool {
	return posted != "" && subtle.ConstantTimeCompare([]byte(posted), []byte(current)) == 1
}
