package oauth

import (
	"net/url"
	"time"

	"github.com/ory/fosite"
)

// step is what the authorization endpoint does next for a request.
type step int

const (
	// stepSignIn: no session; the login page (the sign-in methods).
	stepSignIn step = iota + 1
	// stepReauth: signed in, but the request asks for a fresh proof
	// (prompt=login, max_age, an id_token_hint for another user): the
	// login page for that user; the new session has a new auth_time.
	stepReauth
	// stepFactor: the session lacks a second factor the request, the
	// client or the user requires (factor.go: the second-factor page, or
	// the set-up of one).
	stepFactor
	// stepConsent: the consent page.
	stepConsent
	// stepConfirm: the one-tap page "Continue as alice?" (RFC 8252 §8.6).
	stepConfirm
	// stepIssue: issue the code.
	stepIssue
)

var stepNames = [...]string{stepSignIn: "sign-in", stepReauth: "re-authenticate", stepFactor: "second-factor",
	stepConsent: "consent", stepConfirm: "confirm", stepIssue: "issue"}

func (s step) String() string {
	if s > 0 && int(s) < len(stepNames) {
		return stepNames[s]
	}
	return "step?"
}

// stepInput is everything the next step depends on, read before the
// decision (decide does no I/O).
type stepInput struct {
	now time.Time

	// The request (OpenID Connect Core §3.1.2.1). login_hint is not an
	// input: it only prefills the login page.
	promptLogin, promptConsent bool
	// promptSelectAccount: the user chooses the account (Core §3.1.2.1):
	// the one-tap page, which offers "Not you?", even where a code could
	// go silently.
	promptSelectAccount bool
	maxAge              int64  // seconds; -1 when absent
	hintSubject         string // the id_token_hint's sub; "" when absent

	// The client and where the code goes.
	public      bool     // no client authentication at the token endpoint
	skipConsent bool     // first-party: no consent page unless prompt=consent
	redirectURI *url.URL // the request's redirect_uri
	silentSSO   string   // Config.SilentSSO

	// The browser's session; nil when there is none.
	session *stepSession
	// consentCovers: the user's remembered consent for this client covers
	// every requested scope (read only when it can matter).
	consentCovers bool
	// factorRequired: a second factor is required (the slot of stepFactor).
	factorRequired bool

	// What this request has done already (a posted step).
	//
	// proven: the session passed the sign-in checks for this request:
	// the user signed in on it just now (a login POST, a method's own
	// route), or posted a consent or one-tap form bound to it, which the
	// flow shows only after those checks.
	proven bool
	// interacted: the user acted in this request (signed in, tapped
	// Continue, allowed): the interaction RFC 8252 §8.6 asks for before a
	// code goes to a client whose identity is not assured.
	interacted bool
	// consented: the user allowed the request in this request.
	consented bool
}

// stepSession is the browser's session as the decision sees it.
type stepSession struct {
	subject  string
	authTime time.Time
	// factor: the session has proven a second factor.
	factor bool
}

// decide is the one place the authorization endpoint decides what comes
// next, in one order (node-oidc-provider's interaction policy, dex's
// authflow dispatch): sign in, re-authenticate, second factor, consent,
// one-tap confirmation, issue. Every request (a GET, every posted step, a
// method's completion, and each step of the authorization challenge
// endpoint, challenge_step.go) ends here; prompt=none maps the answer to an
// error (silentError) instead of deciding again, and the challenge endpoint
// to its JSON answers (nextReply).
func decide(in stepInput) step {
	s := in.session
	switch {
	case s == nil:
		return stepSignIn
	case !in.proven && (in.promptLogin || // Core §3.1.2.1 prompt=login
		(in.maxAge >= 0 && in.now.Sub(s.authTime).Seconds() > float64(in.maxAge)) || // Core §3.1.2.1 max_age
		(in.hintSubject != "" && in.hintSubject != s.subject)): // Core §3.1.2.1 id_token_hint
		return stepReauth
	case in.factorRequired && !s.factor:
		return stepFactor
	case !in.consented && (in.promptConsent || (!in.skipConsent && !in.consentCovers)):
		// prompt=consent (Core §3.1.2.1) asks also a first-party
		// client's users.
		return stepConsent
	case !in.interacted && (in.promptSelectAccount || !(in.silentSSO == SilentSSOAssured && identityAssured(in.public, in.redirectURI))):
		// An existing session and a standing consent: silent only where
		// the client's identity is assured (RFC 8252 §8.6). Otherwise any
		// local app could start its own request with this client_id and
		// receive the code at a private-use scheme or loopback port it
		// claimed: one tap first.
		return stepConfirm
	default:
		return stepIssue
	}
}

// silentError is decide's answer under prompt=none (OpenID Connect Core
// §3.1.2.1, the errors of §3.1.2.6): no page is ever shown, so a step that
// needs one is its error, redirected to the client; nil for stepIssue.
func silentError(st step) error {
	switch st {
	case stepIssue:
		return nil
	case stepSignIn, stepReauth:
		return fosite.ErrLoginRequired.WithHint("The user is not signed in, or must sign in again.")
	case stepFactor:
		// A signed-in user who must prove a second factor (a requested
		// acr, require_mfa): an interaction, not a sign-in.
		return fosite.ErrInteractionRequired.WithHint("The user must prove a second factor (the requested acr is not met).")
	case stepConsent:
		return fosite.ErrConsentRequired.WithHint("The user has not consented to this app's request.")
	default: // stepConfirm
		return fosite.ErrInteractionRequired.WithHint("This app's identity is not assured: the user must confirm with a tap (RFC 8252 Section 8.6).")
	}
}
