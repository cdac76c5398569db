package oauth

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/authd/authd/passkey"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// Passkeys is what the account pages call of package passkey (issue 24):
// enrolment (by the signed-in user, or with an enrolment link), the list,
// rename and removal, removing the password, and the configuration that
// the association files come from. Sign-in with a passkey is a sign-in
// method (package passkey/passkeyweb), not part of this.
type Passkeys interface {
	BeginEnrol(ctx context.Context, subject, binding string) ([]byte, error)
	FinishEnrol(ctx context.Context, subject, binding, name string, answer []byte) (passkey.Passkey, error)
	BeginLinkEnrol(ctx context.Context, token string) ([]byte, error)
	FinishLinkEnrol(ctx context.Context, token, name string, answer []byte) (passkey.Passkey, error)
	List(ctx context.Context, subject string) ([]passkey.Passkey, error)
	Rename(ctx context.Context, subject, id, name string) error
	Remove(ctx context.Context, subject, id string) error
	RemovePassword(ctx context.Context, subject string) error
	RelyingParty() passkey.RelyingParty
}

// MountPasskeys turns on the passkey parts of the account page, the
// enrolment-link page and the association files. Call it before the
// server serves its first request; without it those routes are 404.
func (s *Server) MountPasskeys(p Passkeys) { s.passkeys = p }

// passkeyRoutes registers the passkey routes; each answers 404 until
// MountPasskeys.
func (s *Server) passkeyRoutes(r *mux.Router, html func(http.HandlerFunc) http.Handler) {
	on := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			if s.passkeys == nil {
				s.handleNotFound(w, req)
				return
			}
			h(w, req)
		}
	}
	// The script's endpoints: same-origin only, with the page's CSRF
	// token in X-CSRF-Token; errors are JSON the page shows in words.
	api := func(h http.HandlerFunc) http.Handler { return securityHeaders(sameOriginJSON(on(h))) }
	r.Handle("/account/passkeys/options", api(s.handleEnrolOptions)).Methods(http.MethodPost)
	r.Handle("/account/passkeys", api(s.handleEnrolFinish)).Methods(http.MethodPost)
	r.Handle("/account/passkey-link/options", api(s.handleLinkOptions)).Methods(http.MethodPost)
	r.Handle("/account/passkey-link/finish", api(s.handleLinkFinish)).Methods(http.MethodPost)
	r.Handle("/account/passkeys/manage", html(on(s.handlePasskeyManage))).Methods(http.MethodPost)
	r.Handle("/account/passkey-link", html(on(s.handleLinkPage))).Methods(http.MethodGet)
	r.HandleFunc("/static/passkey.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(templates.PasskeyJS)
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/.well-known/apple-app-site-association", on(s.association(passkey.RelyingParty.AppleAppSiteAssociation))).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/.well-known/assetlinks.json", on(s.association(passkey.RelyingParty.AssetLinks))).Methods(http.MethodGet, http.MethodHead)
}

// association serves an association file: application/json, cacheable
// (Apple's CDN and Google's verifier fetch them, without redirects), 404
// when no app is configured.
func (s *Server) association(body func(passkey.RelyingParty) []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b := body(s.passkeys.RelyingParty())
		if b == nil {
			s.handleNotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_, _ = w.Write(b)
	}
}

// sameOriginJSON refuses a cross-origin request (Sec-Fetch-Site, Origin:
// net/http.CrossOriginProtection, as for the forms) with a JSON error.
func sameOriginJSON(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		passkeyError(w, http.StatusForbidden, "cross_origin", "This request was not sent from this site.")
	}))
	return cop.Handler(next)
}

func passkeyError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": code, "message": msg})
}

// checkCSRFHeader reports whether X-CSRF-Token matches the CSRF cookie.
func (s *Server) checkCSRFHeader(r *http.Request) (string, bool) {
	ck, err := r.Cookie(csrfCookie)
	got := r.Header.Get("X-CSRF-Token")
	if err != nil || ck.Value == "" || got == "" {
		return "", false
	}
	return got, hmac.Equal([]byte(got), []byte(s.cookies.csrfMAC(ck.Value)))
}

// passkeyFailure answers err of package passkey as JSON in words.
func (s *Server) passkeyFailure(w http.ResponseWriter, op string, err error) {
	status := http.StatusBadRequest
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		passkeyError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "The server is busy. Please try again in a moment.")
		return
	case errors.Is(err, passkey.ErrExists), errors.Is(err, passkey.ErrLastMethod):
		status = http.StatusConflict
	case errors.Is(err, passkey.ErrLink), errors.Is(err, passkey.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, passkey.ErrCeremony), errors.Is(err, passkey.ErrOrigin), errors.Is(err, passkey.ErrRPID),
		errors.Is(err, passkey.ErrUserVerification), errors.Is(err, passkey.ErrVerification),
		errors.Is(err, passkey.ErrMalformed), errors.Is(err, passkey.ErrInvalidName), errors.Is(err, passkey.ErrUnknown):
	default:
		s.log.Error(op, "error", err)
		status = http.StatusInternalServerError
	}
	passkeyError(w, status, "passkey_refused", passkey.Message(err))
}

// enrolRequest is the body of an enrolment's finish: the
// PublicKeyCredential and the name the user gave it.
type enrolRequest struct {
	Credential json.RawMessage `json:"credential"`
	Name       string          `json:"name"`
}

func readEnrol(w http.ResponseWriter, r *http.Request) (enrolRequest, bool) {
	var in enrolRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Credential) == 0 {
		passkeyError(w, http.StatusBadRequest, "invalid_request", "The passkey could not be read. Please try again.")
		return in, false
	}
	return in, true
}

// signedInJSON is the session of a script's request, or a JSON 401/403.
func (s *Server) signedInJSON(w http.ResponseWriter, r *http.Request) (signedIn, bool) {
	if _, ok := s.checkCSRFHeader(r); !ok {
		passkeyError(w, http.StatusForbidden, "invalid_csrf", "This page has expired. Reload it and try again.")
		return signedIn{}, false
	}
	cur, ok := s.currentSession(r.Context(), r)
	if !ok {
		passkeyError(w, http.StatusUnauthorized, "login_required", "Your session has ended. Sign in again to add a passkey.")
		return signedIn{}, false
	}
	return cur, true
}

func (s *Server) handleEnrolOptions(w http.ResponseWriter, r *http.Request) {
	cur, ok := s.signedInJSON(w, r)
	if !ok {
		return
	}
	opts, err := s.passkeys.BeginEnrol(r.Context(), cur.user.Subject, cur.session.ID)
	if err != nil {
		s.passkeyFailure(w, "passkey enrol options", err)
		return
	}
	writeJSONBytes(w, http.StatusOK, opts)
}

func (s *Server) handleEnrolFinish(w http.ResponseWriter, r *http.Request) {
	cur, ok := s.signedInJSON(w, r)
	if !ok {
		return
	}
	in, ok := readEnrol(w, r)
	if !ok {
		return
	}
	p, err := s.passkeys.FinishEnrol(r.Context(), cur.user.Subject, cur.session.ID, in.Name, in.Credential)
	if err != nil {
		s.passkeyFailure(w, "passkey enrol", err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

// The enrolment link's token travels in X-Passkey-Link (the link carries
// it in its fragment), never in a URL the access log records.
func (s *Server) linkToken(w http.ResponseWriter, r *http.Request) (string, bool) {
	if _, ok := s.checkCSRFHeader(r); !ok {
		passkeyError(w, http.StatusForbidden, "invalid_csrf", "This page has expired. Reload it and try again.")
		return "", false
	}
	t := r.Header.Get("X-Passkey-Link")
	if t == "" || len(t) > 128 {
		s.passkeyFailure(w, "", passkey.ErrLink)
		return "", false
	}
	return t, true
}

func (s *Server) handleLinkOptions(w http.ResponseWriter, r *http.Request) {
	token, ok := s.linkToken(w, r)
	if !ok {
		return
	}
	opts, err := s.passkeys.BeginLinkEnrol(r.Context(), token)
	if err != nil {
		s.passkeyFailure(w, "passkey link options", err)
		return
	}
	writeJSONBytes(w, http.StatusOK, opts)
}

func (s *Server) handleLinkFinish(w http.ResponseWriter, r *http.Request) {
	token, ok := s.linkToken(w, r)
	if !ok {
		return
	}
	in, ok := readEnrol(w, r)
	if !ok {
		return
	}
	p, err := s.passkeys.FinishLinkEnrol(r.Context(), token, in.Name, in.Credential)
	if err != nil {
		s.passkeyFailure(w, "passkey link enrol", err)
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

// handleLinkPage is the page an enrolment link opens: it signs no one
// in; its script adds one passkey with the token in the link's fragment.
func (s *Server) handleLinkPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Enrol(w, templates.EnrolData{CSRFToken: s.cookies.csrfToken(w, r)}); err != nil {
		s.log.Error("render enrol", "error", err)
	}
}

// Notices of the account page after a passkey action (?passkey=…): a
// fixed set, so the query cannot put words on the page.
var passkeyNotices = map[string]string{
	"added":   "Passkey added. You can now sign in with it.",
	"renamed": "Passkey renamed.",
	"removed": "Passkey removed.",
}

// handlePasskeyManage renames or removes a passkey, or removes the
// password, from the account page's forms; then back to the page.
func (s *Server) handlePasskeyManage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
		s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
		return
	}
	cur, ok := s.currentSession(ctx, r)
	if !ok {
		http.Redirect(w, r, pathAccount, http.StatusSeeOther)
		return
	}
	var (
		err  error
		done string
	)
	switch r.PostForm.Get("action") {
	case "rename":
		done = "renamed"
		err = s.passkeys.Rename(ctx, cur.user.Subject, r.PostForm.Get("id"), strings.TrimSpace(r.PostForm.Get("name")))
	case "remove":
		done = "removed"
		err = s.passkeys.Remove(ctx, cur.user.Subject, r.PostForm.Get("id"))
	case "remove-password":
		if err = s.passkeys.RemovePassword(ctx, cur.user.Subject); err == nil {
			// Every session ended with the password, this one too.
			s.cookies.clearSession(w)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if err := s.pages.Account(w, templates.AccountData{NoSession: true,
				Notice: "Your password is removed and every browser is signed out. Sign in with your passkey."}); err != nil {
				s.log.Error("render account", "error", err)
			}
			return
		}
	default:
		s.renderError(w, http.StatusBadRequest, "This form could not be read.", "Reload the page and try again.")
		return
	}
	switch {
	case err == nil:
		http.Redirect(w, r, pathAccount+"?passkey="+done, http.StatusSeeOther)
	case errors.Is(err, storage.ErrUnavailable):
		s.renderUnavailable(w)
	default:
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, passkey.ErrNotFound):
			status = http.StatusNotFound // not one of this user's passkeys
		case errors.Is(err, passkey.ErrLastMethod):
			status = http.StatusConflict
		case errors.Is(err, passkey.ErrInvalidName):
			status = http.StatusBadRequest
		default:
			s.log.Error("passkey manage", "error", err)
		}
		s.renderAccount(w, r, cur, "", passkey.Message(err), status)
	}
}

// accountPasskeys adds the passkey section to the account page's data.
func (s *Server) accountPasskeys(ctx context.Context, r *http.Request, d *templates.AccountData, cur signedIn) error {
	if s.passkeys == nil {
		return nil
	}
	if d.Notice == "" {
		d.Notice = passkeyNotices[r.URL.Query().Get("passkey")]
	}
	list, err := s.passkeys.List(ctx, cur.user.Subject)
	if err != nil {
		return err
	}
	d.Passkeys = true
	for _, p := range list {
		ap := templates.AccountPasskey{ID: p.ID, Name: p.Name, Created: p.CreatedAt.UTC().Format("2 Jan 2006"), Disabled: p.DisabledAt != nil}
		if p.LastUsedAt != nil {
			ap.LastUsed = p.LastUsedAt.UTC().Format("2 Jan 2006 15:04 UTC")
		}
		d.PasskeyList = append(d.PasskeyList, ap)
	}
	u, err := s.store.GetUserBySubject(ctx, cur.user.Subject)
	if err != nil {
		return err
	}
	d.HasPassword = len(u.PasswordHash) > 0
	return nil
}

// renderAccount shows the account page of cur, answered with status, with
// a notice or an error.
func (s *Server) renderAccount(w http.ResponseWriter, r *http.Request, cur signedIn, notice, failure string, status int) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	consents, err := s.people.Consents(ctx, cur.user.Username)
	if err != nil {
		s.log.Error("list consents", "error", err)
		s.renderError(w, http.StatusInternalServerError, "Your apps could not be listed.", "Please try again in a moment.")
		return
	}
	d := templates.AccountData{Username: cur.user.Username, Notice: notice, Error: failure, CSRFToken: s.cookies.csrfToken(w, r),
		Accounts: s.accountLinks(), MFA: s.accountMFA(w, r, cur)} // accountpages.go, account_mfa.go
	for _, c := range consents {
		d.Apps = append(d.Apps, templates.AccountApp{ClientID: c.ClientID, Name: s.clientLabel(r, c.ClientID), Scopes: s.scopes.describe(openidFirst(c.Scopes))})
	}
	if d.Providers, err = s.linkedProviders(r, cur.user.Subject); err != nil {
		s.log.Error("list linked providers", "error", err)
		s.renderError(w, http.StatusInternalServerError, "Your sign-in providers could not be listed.", "Please try again in a moment.")
		return
	}
	if err := s.accountPasskeys(ctx, r, &d, cur); err != nil {
		s.log.Error("list passkeys", "error", err)
	}
	w.WriteHeader(status)
	if err := s.pages.Account(w, d); err != nil {
		s.log.Error("render account", "error", err)
	}
}
