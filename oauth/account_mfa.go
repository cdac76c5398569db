package oauth

import (
	"errors"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/totp"
	"github.com/authd/authd/web/templates"
)

// The account page's two-step sign-in (issue 27): set up an authenticator
// app (its QR code served as a PNG from this server, so the pages' CSP
// keeps img-src 'self'), confirm it with one code (the session is raised
// to two factors, the user's other sessions stay as they were), recovery
// codes shown once and regenerable, removal after a fresh second factor.

const (
	pathAccountMFA   = "/account/mfa"
	pathAccountMFAQR = "/account/mfa/qr.png"
)

// accountMFA is the account page's section; nil when the server has no
// set-up (Deps.MFA).
func (s *Server) accountMFA(w http.ResponseWriter, r *http.Request, cur signedIn) *templates.AccountMFA {
	if s.mfa == nil {
		return nil
	}
	ctx := r.Context()
	has, err := s.mfa.Has(ctx, cur.user.Subject)
	if err != nil {
		s.log.Error("read factor", "error", err)
		return nil
	}
	m := &templates.AccountMFA{Has: has, CSRFToken: s.cookies.csrfToken(w, r)}
	if has {
		m.CodesLeft, _ = s.mfa.RecoveryCodesLeft(ctx, cur.user.Subject)
	}
	return m
}

// handleAccountMFA is POST /account/mfa: step=setup (the set-up page),
// factor-setup (its code), regenerate (new recovery codes), remove (with
// a code in "otp").
func (s *Server) handleAccountMFA(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("Cache-Control", "no-store")
	cur, ok := s.currentSession(ctx, r)
	if !ok || s.mfa == nil {
		s.renderError(w, http.StatusUnauthorized, "You are not signed in.", "Sign in from one of your apps, then open your account page again.")
		return
	}
	if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
		s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
		return
	}
	page := setupPage{action: pathAccountMFA}
	switch r.PostForm.Get("step") {
	case "setup":
		page.fresh = true
		s.renderSetup(w, r, cur, page)
	case "factor-setup":
		if d := s.factorBlocked(ctx, cur); d > 0 {
			w.Header().Set("Retry-After", retryAfter(d))
			page.status, page.msg = http.StatusTooManyRequests, tooManyAttempts(d)
			s.renderSetup(w, r, cur, page)
			return
		}
		codes, err := s.mfa.Confirm(ctx, cur.user.Subject, r.PostForm.Get("otp"))
		switch {
		case errors.Is(err, totp.ErrInvalidCode):
			s.chargeFactor(ctx, cur)
			page.status, page.msg = http.StatusUnauthorized, msgSetupInvalid
			s.renderSetup(w, r, cur, page)
			return
		case errors.Is(err, totp.ErrNoSetup):
			s.renderError(w, http.StatusConflict, "There is no set-up to confirm.", "It was finished or restarted elsewhere. Open your account page again.")
			return
		case err != nil:
			s.log.Error("confirm mfa set-up", "error", err)
			s.renderUnavailable(w)
			return
		}
		// Setting up keeps this session and raises it to two factors.
		if _, err := s.people.RaiseSession(ctx, cur.session.ID, []string{"otp", mfaAMR}); err != nil && !errors.Is(err, identity.ErrNoSession) {
			s.log.Error("raise session", "error", err)
		}
		s.renderCodes(w, codes, pathAccount, "Back to your account")
	case "regenerate":
		if amrLevel(cur.session.AMR) < 2 {
			s.renderError(w, http.StatusForbidden, "This needs a sign-in with your second factor.",
				"Sign out, sign in again with a code from your authenticator app, then try again.")
			return
		}
		codes, err := s.mfa.RegenerateCodes(ctx, cur.user.Subject)
		if err != nil {
			if !errors.Is(err, totp.ErrNoSetup) {
				s.log.Error("regenerate recovery codes", "error", err)
			}
			s.renderError(w, http.StatusConflict, "New recovery codes could not be made.", "Open your account page again.")
			return
		}
		s.renderCodes(w, codes, pathAccount, "Back to your account")
	case "remove":
		s.removeFactor(w, r, cur)
	default:
		s.renderError(w, http.StatusBadRequest, "This form could not be read.", "Open your account page again.")
	}
}

// removeFactor removes the authenticator app after a fresh second-factor
// check (a code in "otp"), bounded as sign-in attempts are.
func (s *Server) removeFactor(w http.ResponseWriter, r *http.Request, cur signedIn) {
	ctx := r.Context()
	if d := s.factorBlocked(ctx, cur); d > 0 {
		w.Header().Set("Retry-After", retryAfter(d))
		s.renderError(w, http.StatusTooManyRequests, tooManyAttempts(d), "Nothing was removed.")
		return
	}
	if _, err := s.mfa.Check(ctx, cur.user.Subject, r.PostForm.Get("otp")); err != nil {
		if !errors.Is(err, totp.ErrInvalidCode) {
			s.log.Error("check factor", "error", err)
			s.renderUnavailable(w)
			return
		}
		s.chargeFactor(ctx, cur)
		s.renderError(w, http.StatusUnauthorized, "That code is not valid.", "Nothing was removed. Open your account page and try again with a current code.")
		return
	}
	if _, err := s.mfa.Remove(ctx, cur.user.Subject, "user"); err != nil {
		s.log.Error("remove factor", "error", err)
		s.renderUnavailable(w)
		return
	}
	s.renderAccount(w, r, cur, "Authenticator app removed.", "", http.StatusOK)
}

// handleAccountMFAQR is GET /account/mfa/qr.png: the signed-in user's
// set-up in progress as a QR code.
func (s *Server) handleAccountMFAQR(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	cur, ok := s.currentSession(r.Context(), r)
	if !ok || s.mfa == nil {
		http.Error(w, "not signed in", http.StatusUnauthorized)
		return
	}
	e, err := s.mfa.Pending(r.Context(), cur.user.Subject, cur.user.Username)
	if err != nil {
		http.Error(w, "no set-up in progress", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(e.QRPNG)
}
