package oauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/limits"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/totp"
	"github.com/authd/authd/web/templates"
)

// This file is the second-factor step of the authorization flow (decide's
// stepFactor): when it is asked (factorRequired), the second-factor page
// (each factor's part, signin.Factor), its POST (step=factor) with the
// attempts bounded per user and per session, and the set-up of an
// authenticator app when the user must have a factor and has none
// (step=factor-setup). A factor proven raises the browser's session
// (identity.RaiseSession: amr gains the factor's values and "mfa").

// MFA is the authenticator app's set-up and the operator's requirement
// (package totp), what the flow and the account page call.
type MFA interface {
	Begin(ctx context.Context, subject, account string) (totp.Enrolment, error)
	Pending(ctx context.Context, subject, account string) (totp.Enrolment, error)
	Confirm(ctx context.Context, subject, code string) ([]string, error)
	Has(ctx context.Context, subject string) (bool, error)
	Check(ctx context.Context, subject, code string) (totp.Kind, error)
	Required(ctx context.Context, subject string) (bool, error)
	// State is Has and Required in one read.
	State(ctx context.Context, subject string) (has, required bool, err error)
	RegenerateCodes(ctx context.Context, subject string) ([]string, error)
	RecoveryCodesLeft(ctx context.Context, subject string) (int, error)
	Remove(ctx context.Context, subject, reason string) (bool, error)
}

// FactorLimits bound second-factor attempts (issue 27: 5 in 10 minutes),
// shared by every replica through Deps.Limits. Only failures are charged.
type FactorLimits struct {
	PerUser    limits.Rate // default 5 per 10 minutes
	PerSession limits.Rate // default 5 per 10 minutes
}

func (l *FactorLimits) applyDefaults() {
	def := limits.Rate{PerSecond: 5.0 / 600, Burst: 5}
	if l.PerUser.PerSecond == 0 {
		l.PerUser = def
	}
	if l.PerSession.PerSecond == 0 {
		l.PerSession = def
	}
}

const (
	budgetFactorUser    = "factor-user"
	budgetFactorSession = "factor-session"
)

// mfaAMR is RFC 8176 §2's "mfa": more than one factor.
const mfaAMR = "mfa"

// mfaFactor is the name of the factor over Deps.MFA (signin/otp.Name):
// the decision reads it with the requirement in one query (MFA.State)
// instead of asking its Has.
const mfaFactor = "otp"

// factorRequired reports whether the user must be asked a second factor,
// and whether the session already meets the level the request needs
// (acr.go): the request asks for two factors (acr_values, claims), the
// client requires them (require_mfa), the user has a factor, or an
// operator requires one. The user's factors matter only when the session
// is below two factors; they usually came with the session
// (currentSessionFor: signin.ReadFactor), else they are read here. A read
// that fails asks (fail closed).
func (s *Server) factorRequired(a *authzRequest) (required, sessionMeets bool) {
	var known *identity.Factors
	if a.cur.factorsRead {
		known = &a.cur.factors
	}
	return s.factorRequiredFor(a.r.Context(), a.authn.acr, a.client.RequireMFA, a.cur.user, a.cur.session.AMR, known)
}

// factorRequiredFor is factorRequired's rule for a request asking acr, of
// a client that may require two factors, and a user whose proof so far is
// amr and whose factors are known (read with the session) or nil (read
// here): the authorization endpoint's and the challenge endpoint's.
func (s *Server) factorRequiredFor(ctx context.Context, acr acrRequest, clientRequires bool, u identity.User, amr []string, known *identity.Factors) (required, sessionMeets bool) {
	need := max(2, acr.need())
	if need > 2 {
		// phr alone: two factors are asked (the page offers the user's
		// passkey, which gives phr, beside the other factors);
		// acr_values is voluntary (Core §3.1.2.1) and the ID token's
		// acr says what was done.
		need = 2
	}
	level := amrLevel(amr)
	if level >= need {
		return false, true
	}
	if acr.need() >= 2 || clientRequires {
		return true, false
	}
	if s.mfa != nil {
		has, req := false, false
		if known != nil {
			has, req = known.TOTP, known.Required
		} else {
			var err error
			if has, req, err = s.mfa.State(ctx, u.Subject); err != nil {
				s.log.Error("read second factor", "error", err)
				return true, false
			}
		}
		if has || req {
			return true, false
		}
	}
	// The other factors (a passkey's), each asked unless read already.
	for _, f := range s.factors {
		if s.mfa != nil && f.Name() == mfaFactor {
			continue
		}
		if rf, ok := f.(signin.ReadFactor); ok && known != nil {
			if rf.HasIn(*known) {
				return true, false
			}
			continue
		}
		ok, err := f.Has(ctx, u)
		if err != nil {
			s.log.Error("read factor", "factor", f.Name(), "error", err)
			return true, false
		}
		if ok {
			return true, false
		}
	}
	return false, false
}

// userFactors are the factors the signed-in user has, read once per
// request.
func (s *Server) userFactors(ctx context.Context, a *authzRequest) ([]signin.Factor, error) {
	if a.factorsRead {
		return a.factors, a.factorsErr
	}
	a.factorsRead = true
	for _, f := range s.factors {
		ok, err := f.Has(ctx, a.cur.user)
		if err != nil {
			s.log.Error("read factor", "factor", f.Name(), "error", err)
			a.factorsErr = err
			continue
		}
		if ok {
			a.factors = append(a.factors, f)
		}
	}
	return a.factors, a.factorsErr
}

// renderFactorStep answers stepFactor: the second-factor page when the
// user has a factor, else the set-up of an authenticator app.
func (s *Server) renderFactorStep(w http.ResponseWriter, a *authzRequest, status int, msg string) {
	has, err := s.userFactors(a.r.Context(), a)
	if err != nil && len(has) == 0 {
		s.renderUnavailable(w)
		return
	}
	if len(has) > 0 {
		s.renderFactorPage(w, a, status, msg, has)
		return
	}
	if s.mfa == nil {
		s.log.Error("a second factor is required and this server has none to set up", "client_id", a.client.ID)
		s.renderError(w, http.StatusForbidden, "This account needs a second factor to sign in.",
			"This server cannot set one up. Contact the administrator.")
		return
	}
	s.renderSetup(w, a.r, a.cur, setupPage{action: a.r.URL.RequestURI(), status: status, msg: msg, required: true})
}

func (s *Server) renderFactorPage(w http.ResponseWriter, a *authzRequest, status int, msg string, has []signin.Factor) {
	token := s.cookies.csrfToken(w, a.r)
	page := signin.Page{Action: a.r.URL.RequestURI(), CSRFToken: token, ClientID: a.client.ID, Username: a.cur.user.Username}
	if msg != "" {
		page.ErrorID, page.Invalid = templates.LoginErrorID, true
	}
	d := templates.FactorData{Username: a.cur.user.Username, ClientName: clientName(a.client), Error: msg}
	for _, f := range has {
		if h := f.Render(a.r.Context(), page); h != "" {
			d.Factors = append(d.Factors, h)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Factor(w, d); err != nil {
		s.log.Error("render factor page", "error", err)
	}
}

// setupPage is how the set-up page is shown.
type setupPage struct {
	action   string // where the code is posted
	status   int
	msg      string
	required bool // the user must set it up to go on signing in
	fresh    bool // start a new set-up (a new secret)
}

// renderSetup shows the set-up of an authenticator app: the one in
// progress (a reload, a wrong code: the secret the user may have scanned
// stays), or a new one.
func (s *Server) renderSetup(w http.ResponseWriter, r *http.Request, cur signedIn, p setupPage) {
	ctx := r.Context()
	var (
		e   totp.Enrolment
		err = totp.ErrNoSetup
	)
	if !p.fresh {
		e, err = s.mfa.Pending(ctx, cur.user.Subject, cur.user.Username)
	}
	if errors.Is(err, totp.ErrNoSetup) {
		e, err = s.mfa.Begin(ctx, cur.user.Subject, cur.user.Username)
	}
	if errors.Is(err, totp.ErrAlreadySet) {
		s.renderError(w, http.StatusConflict, "An authenticator app is already set up.", "Go back and sign in with a code from it.")
		return
	}
	if err != nil {
		s.log.Error("begin mfa set-up", "error", err)
		s.renderError(w, http.StatusInternalServerError, "The set-up could not start.", "Please try again in a moment.")
		return
	}
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(cmp.Or(p.status, http.StatusOK))
	if err := s.pages.MFASetup(w, templates.MFASetupData{QR: pathAccountMFAQR, URI: e.URI, Secret: e.Secret,
		Action: p.action, CSRFToken: token, Error: p.msg, Required: p.required}); err != nil {
		s.log.Error("render mfa set-up", "error", err)
	}
}

// factorBlocked reports how long the user's or the session's attempts must
// wait (0: they may try).
func (s *Server) factorBlocked(ctx context.Context, cur signedIn) time.Duration {
	return max(s.limits.Wait(ctx, budgetFactorUser, cur.user.Subject, s.cfg.FactorLimits.PerUser),
		s.limits.Wait(ctx, budgetFactorSession, cur.session.ID, s.cfg.FactorLimits.PerSession))
}

// chargeFactor spends a failed attempt of the user and the session.
func (s *Server) chargeFactor(ctx context.Context, cur signedIn) {
	s.limits.Charge(ctx, budgetFactorUser, cur.user.Subject, s.cfg.FactorLimits.PerUser)
	s.limits.Charge(ctx, budgetFactorSession, cur.session.ID, s.cfg.FactorLimits.PerSession)
}

// tooManyAttempts is the message of a blocked attempt, in words.
func tooManyAttempts(d time.Duration) string {
	return fmt.Sprintf("Too many wrong codes. Try again in %s.", roundWait(d))
}

func roundWait(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", max(1, int(d.Round(time.Second)/time.Second)))
	}
	m := int((d + time.Minute - 1) / time.Minute)
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// factorStep is a posted second factor (step=factor). A session that
// already has its second factor skips the check: the same form posted
// twice (a flaky network, a double tap) is answered as the first was,
// neither charged nor refused. A failure that a concurrent post of the
// same session won is the same case.
func (s *Server) factorStep(w http.ResponseWriter, a *authzRequest, post url.Values) (progress, bool) {
	if !a.isSignedIn {
		return progress{msg: "Your session has ended. Please sign in again.", noHint: true}, true
	}
	done := progress{proven: true, interacted: true}
	if amrLevel(a.cur.session.AMR) >= 2 {
		return done, true
	}
	ctx := a.r.Context()
	if d := s.factorBlocked(ctx, a.cur); d > 0 {
		w.Header().Set("Retry-After", retryAfter(d))
		s.renderFactorStep(w, a, http.StatusTooManyRequests, tooManyAttempts(d))
		return progress{}, false
	}
	name := cmp.Or(post.Get("factor"), "otp")
	has, _ := s.userFactors(ctx, a)
	i := slices.IndexFunc(has, func(f signin.Factor) bool { return f.Name() == name })
	if i < 0 {
		s.renderFactorStep(w, a, http.StatusBadRequest, "This second factor is not available. Choose another.")
		return progress{}, false
	}
	res, err := has[i].Verify(ctx, a.cur.user, signin.Input{Fields: post, RemoteIP: clientIP(a.r), Action: a.r.URL.RequestURI()})
	if err != nil {
		var f *signin.Failure
		if !errors.As(err, &f) {
			s.log.Error("second factor", "factor", name, "error", err)
			s.renderUnavailable(w)
			return progress{}, false
		}
		if s.sessionRaised(ctx, a) {
			return done, true
		}
		s.chargeFactor(ctx, a.cur)
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", retryAfter(f.RetryAfter))
		}
		s.renderFactorStep(w, a, cmp.Or(f.Status, http.StatusUnauthorized), f.Message)
		return progress{}, false
	}
	if !s.raiseSession(w, a, res.AMR) {
		return progress{}, false
	}
	return done, true
}

// sessionRaised re-reads the session: a concurrent post of the same
// browser may have proven the factor (then its code was used by it).
func (s *Server) sessionRaised(ctx context.Context, a *authzRequest) bool {
	bs, err := s.people.ResumeSession(ctx, a.cur.ref)
	if err != nil || amrLevel(bs.AMR) < 2 {
		return false
	}
	a.cur.session = bs
	return true
}

// raiseSession records the factor on the browser's session; it answers a
// failure itself (false).
func (s *Server) raiseSession(w http.ResponseWriter, a *authzRequest, amr []string) bool {
	bs, err := s.people.RaiseSession(a.r.Context(), a.cur.session.ID, append(slices.Clone(amr), mfaAMR))
	if errors.Is(err, identity.ErrNoSession) {
		s.cookies.clearSession(w)
		s.renderError(w, http.StatusUnauthorized, "Your session has ended.", "Go back to the app and sign in again.")
		return false
	}
	if err != nil {
		s.log.Error("raise session", "error", err)
		s.writeAuthorizeError(w, a.ar, fosite.ErrServerError.WithWrap(err))
		return false
	}
	a.cur.session = bs
	return true
}

// setupStep confirms an authenticator app set up during sign-in
// (step=factor-setup): the session is raised and the recovery codes are
// shown once, with a link that continues the authorization request.
func (s *Server) setupStep(w http.ResponseWriter, a *authzRequest, post url.Values) (progress, bool) {
	if !a.isSignedIn {
		return progress{msg: "Your session has ended. Please sign in again.", noHint: true}, true
	}
	if s.mfa == nil || amrLevel(a.cur.session.AMR) >= 2 {
		return progress{proven: true, interacted: true}, true
	}
	ctx := a.r.Context()
	if d := s.factorBlocked(ctx, a.cur); d > 0 {
		w.Header().Set("Retry-After", retryAfter(d))
		s.renderSetup(w, a.r, a.cur, setupPage{action: a.r.URL.RequestURI(), status: http.StatusTooManyRequests, msg: tooManyAttempts(d), required: true})
		return progress{}, false
	}
	codes, err := s.mfa.Confirm(ctx, a.cur.user.Subject, post.Get("otp"))
	switch {
	case errors.Is(err, totp.ErrInvalidCode):
		s.chargeFactor(ctx, a.cur)
		s.renderSetup(w, a.r, a.cur, setupPage{action: a.r.URL.RequestURI(), status: http.StatusUnauthorized,
			msg: msgSetupInvalid, required: true})
		return progress{}, false
	case errors.Is(err, totp.ErrNoSetup):
		// Confirmed meanwhile (another tab), or never begun: decide again.
		if s.sessionRaised(ctx, a) {
			return progress{proven: true, interacted: true}, true
		}
		a.factorsRead = false
		s.renderFactorStep(w, a, http.StatusConflict, "The set-up was finished or restarted elsewhere. Please try again.")
		return progress{}, false
	case err != nil:
		s.log.Error("confirm mfa set-up", "error", err)
		s.renderUnavailable(w)
		return progress{}, false
	}
	if !s.raiseSession(w, a, []string{"otp"}) {
		return progress{}, false
	}
	s.renderCodes(w, codes, a.r.URL.RequestURI(), "Continue")
	return progress{}, false
}

const msgSetupInvalid = "That code is not valid. Type the six digits the app shows now."

func (s *Server) renderCodes(w http.ResponseWriter, codes []string, next, label string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.pages.MFACodes(w, templates.MFACodesData{Codes: codes, Next: next, NextLabel: label}); err != nil {
		s.log.Error("render recovery codes", "error", err)
	}
}
