// Package signin is the seam between the authorization flow and the ways a
// person proves who they are. The flow (package oauth) owns the order of the
// steps (sign in, second factor, consent, one tap, code); a method owns one
// way to sign in: its part of the login page and the check of what the
// browser posts. Adding a method is a new package that implements Method
// and is listed in oauth.Deps.Methods by cmd/authd; the flow is not edited.
//
// A method answers with a Result (who signed in and how, RFC 8176 amr
// values) or an error: a *Failure for the person (shown on the login page
// with its status), ErrUnavailable when a dependency is down (a 503 page,
// not charged to any back-off), anything else is a server error.
package signin

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/authd/authd/identity"
)

// Method is one way to sign in on the login page.
type Method interface {
	// Name is the method's stable identifier: the value of the login
	// form's "method" field, the path segment of its routes
	// (/signin/NAME/...) and the label of its metrics. "password" is the
	// default when a form names none.
	Name() string
	// Render returns the method's part of the login page. It is called
	// for every login page; a method with nothing to offer for this page
	// returns "". The HTML must carry no inline script or style (the
	// pages' CSP forbids them).
	Render(ctx context.Context, p Page) template.HTML
	// Verify checks what the browser posted for this method. It is
	// called once per POST with the flow's CSRF check already passed.
	Verify(ctx context.Context, in Input) (Result, error)
}

// Factor is a second step after a first method (TOTP, a passkey after a
// password). The flow (oauth/factor.go) asks for one when the user has
// one, the client or an operator requires one, or the request asks for
// two factors; it shows the Render of each factor the user Has on the
// second-factor page, whose forms post step=factor and factor=NAME, and
// records the Result's AMR (with "mfa") on the session. signin/otp is
// one; a passkey factor answers AMR "hwk" and "user", which makes the
// session phishing resistant (acr "phr"). cmd/authd lists them in
// oauth.Deps.Factors.
type Factor interface {
	Name() string
	// Has reports whether the user has this factor set up.
	Has(ctx context.Context, u identity.User) (bool, error)
	Render(ctx context.Context, p Page) template.HTML
	Verify(ctx context.Context, u identity.User, in Input) (Result, error)
}

// ReadFactor is implemented by a factor whose Has identity.Factors
// answers. The flow reads those with the browser's session, in the same
// query (identity.Service.ResumeSignIn), so its decision asks such a
// factor nothing more; a factor without ReadFactor is asked Has. Pages
// that list the user's factors still ask Has.
type ReadFactor interface {
	HasIn(f identity.Factors) bool
}

// Mounter is implemented by a method that needs routes of its own, such
// as a passkey's options endpoint or an upstream provider's callback.
// The flow mounts each route under /signin/NAME/ with the pages'
// middleware (CSP, no-store, CSRF cookie available).
type Mounter interface {
	Routes(f Flow) []Route
}

// Route is one route of a Mounter, relative to /signin/NAME/.
type Route struct {
	Method  string // "GET", "POST"
	Path    string // e.g. "options", "callback"
	Handler http.Handler
	// CrossSite lets a cross-site POST through the pages' cross-origin
	// protection for this route only: a provider's response_mode=form_post
	// callback (Sign in with Apple). Its handler must bind the request to
	// the browser itself (its state and cookie).
	CrossSite bool
	// CSRF has the flow check, before Handler runs, that the POST carries
	// the login page's token (form field csrf_token, Page.CSRFToken) for
	// this browser: a form the method rendered on the login page.
	CSRF bool
}

// Flow is what the authorization flow offers a method's own routes: a
// method whose proof arrives on its own route (an upstream provider's
// callback) hands the result back so the flow continues the authorization
// request it came from (returnTo is that request's URL, which the method
// kept, e.g. in its state).
//
// The flow trusts res: the method has checked its proof and that it
// belongs to this browser (its own state or CSRF token). returnTo must be
// this server's authorization endpoint as Page.Action gave it (a path and
// a query); any other URL is refused with an error page, never followed.
type Flow interface {
	// Complete starts the session of res (its AMR and AuthTime recorded)
	// and continues returnTo's request as after a login POST: consent,
	// one tap or the code, as the flow decides.
	Complete(w http.ResponseWriter, r *http.Request, returnTo string, res Result)
	// Fail shows the login page of returnTo's request with the failure.
	Fail(w http.ResponseWriter, r *http.Request, returnTo string, f *Failure)
}

// Page is what a method may show on the login page.
type Page struct {
	// Action is the URL the login form posts to (the authorization
	// request); a method's own form posts there with step=login and
	// method=NAME.
	Action    string
	CSRFToken string
	ClientID  string
	// Username is the name to prefill: login_hint, the signed-in user on
	// re-authentication, or the name typed in a failed attempt.
	Username string
	// Reauth is set when the user is signed in and must prove it again
	// (prompt=login, max_age): a method may offer only that user.
	Reauth bool
	// Invalid marks a failed attempt of this method (focus and
	// aria-invalid on its inputs).
	Invalid bool
	// ErrorID is the id of the page's message when it shows one (a
	// failure, "please sign in again"), for aria-describedby; "" when
	// there is none.
	ErrorID string
}

// Input is one POST of the login form for a method.
type Input struct {
	Fields   url.Values
	RemoteIP string
	// Action is the URL the form was posted to.
	Action string
	// KnownDevice reports whether this browser has signed in as username
	// before (the flow's device cookie): a method's per-username back-off,
	// which anyone's failures feed, need not hold back the person on their
	// own browser. Nil means no.
	KnownDevice func(username string) bool
}

// Result is a successful sign-in.
type Result struct {
	User identity.User
	// AMR are the RFC 8176 §2 values that describe the proof ("pwd",
	// "hwk", "user", "fed", ...). The session records them.
	AMR []string
	// AuthTime is when the user authenticated; zero means now.
	AuthTime time.Time
}

// Failure is a refusal to show the person on the login page.
type Failure struct {
	Status     int           // HTTP status of the page: 401, 429, 400
	Message    string        // in words, never telling whether an account exists
	RetryAfter time.Duration // > 0 sets Retry-After
	Username   string        // echoed into the form
	Invalid    bool          // mark the method's inputs invalid
}

func (f *Failure) Error() string { return f.Message }

// ErrUnavailable means a dependency (database, hashing slots) could not
// answer: the flow shows a 503 page and charges nothing.
var ErrUnavailable = errors.New("signin: temporarily unavailable")
