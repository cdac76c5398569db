package oauth

import (
	"errors"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

const pathAccount = "/account"

// handleAccount is the signed-in user's own page: the apps they have let
// in, each with a button to withdraw the consent (which revokes the tokens
// issued under it, storage.ConsentStore.RevokeConsent). GET shows it; a POST
// with the CSRF token withdraws.
func (s *Server) handleAccount(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	cur, ok := s.currentSession(ctx, r)
	if !ok {
		if err := s.pages.Account(w, templates.AccountData{NoSession: true}); err != nil {
			s.log.Error("render account", "error", err)
		}
		return
	}
	var notice string
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This form has expired or was not sent from this site.", "Reload the page and try again.")
			return
		}
		clientID := r.PostForm.Get("client_id")
		err := s.people.WithdrawConsent(ctx, cur.user.Subject, clientID)
		switch {
		case err == nil:
			notice = "Access withdrawn for " + s.clientLabel(r, clientID) + "."
		case errors.Is(err, identity.ErrConsentNotFound):
			notice = "That app had no access to withdraw."
		default:
			s.log.Error("withdraw consent", "error", err)
			s.renderError(w, http.StatusInternalServerError, "Withdrawing access failed.", "Please try again in a moment.")
			return
		}
	}
	consents, err := s.people.Consents(ctx, cur.user.Username)
	if err != nil {
		s.log.Error("list consents", "error", err)
		s.renderError(w, http.StatusInternalServerError, "Your apps could not be listed.", "Please try again in a moment.")
		return
	}
	d := templates.AccountData{Username: cur.user.Username, Notice: notice, CSRFToken: s.cookies.csrfToken(w, r), Accounts: s.accountLinks()}
	for _, c := range consents {
		d.Apps = append(d.Apps, templates.AccountApp{ClientID: c.ClientID, Name: s.clientLabel(r, c.ClientID), Scopes: s.scopes.describe(openidFirst(c.Scopes))})
	}
	if err := s.accountPasskeys(ctx, r, &d, cur); err != nil { // passkeys.go
		s.log.Error("list passkeys", "error", err)
	}
	if err := s.pages.Account(w, d); err != nil {
		s.log.Error("render account", "error", err)
	}
}

// clientLabel is a client's name for a page, or its ID.
func (s *Server) clientLabel(r *http.Request, id string) string {
	if fc, err := s.store.GetClient(r.Context(), id); err == nil {
		if c, ok := fc.(*storage.Client); ok {
			return clientName(c)
		}
	}
	return id
}

// openidFirst returns scopes with openid (who you are) first, as the app
// asked for them, the rest in their stored order.
func openidFirst(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		if sc == "openid" {
			out = append(out, sc)
		}
	}
	for _, sc := range scopes {
		if sc != "openid" {
			out = append(out, sc)
		}
	}
	return out
}
