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
		if r.PostForm.Get("action") == "unlink" {
			if notice = s.unlinkProvider(w, r, cur.user.Subject); notice == "" {
				return
			}
		} else if notice = s.withdraw(w, r, cur.user.Subject); notice == "" {
			return
		}
	}
	s.renderAccount(w, r, cur, notice, "", http.StatusOK) // passkeys.go
}

// withdraw withdraws the consent the form names and returns the notice
// to show; "" when it answered an error itself.
func (s *Server) withdraw(w http.ResponseWriter, r *http.Request, subject string) string {
	clientID := r.PostForm.Get("client_id")
	err := s.people.WithdrawConsent(r.Context(), subject, clientID)
	switch {
	case err == nil:
		return "Access withdrawn for " + s.clientLabel(r, clientID) + "."
	case errors.Is(err, identity.ErrConsentNotFound):
		return "That app had no access to withdraw."
	}
	s.log.Error("withdraw consent", "error", err)
	s.renderError(w, http.StatusInternalServerError, "Withdrawing access failed.", "Please try again in a moment.")
	return ""
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

// linkedProviders lists the provider identities linked to subject.
func (s *Server) linkedProviders(r *http.Request, subject string) ([]templates.AccountProvider, error) {
	links, err := s.store.ListFederatedIdentities(r.Context(), subject)
	if err != nil {
		return nil, err
	}
	out := make([]templates.AccountProvider, 0, len(links))
	for _, l := range links {
		out = append(out, templates.AccountProvider{Name: s.providerLabel(r, l.ProviderID), Issuer: l.Issuer, Sub: l.Sub, Email: l.Email})
	}
	return out, nil
}

// providerLabel is a provider's display name, or its id.
func (s *Server) providerLabel(r *http.Request, id string) string {
	if s.federation != nil {
		if p, err := s.federation.Get(r.Context(), id); err == nil {
			return p.DisplayName
		}
	}
	return id
}

// unlinkProvider removes the provider identity the form names, refused
// when it is the user's last way in; it returns the notice to show, ""
// when it answered an error itself.
func (s *Server) unlinkProvider(w http.ResponseWriter, r *http.Request, subject string) string {
	ctx := r.Context()
	issuer, sub := r.PostForm.Get("issuer"), r.PostForm.Get("sub")
	var label string
	if links, err := s.store.ListFederatedIdentities(ctx, subject); err == nil {
		for _, l := range links {
			if l.Issuer == issuer && l.Sub == sub {
				label = s.providerLabel(r, l.ProviderID)
			}
		}
	}
	err := s.store.UnlinkFederatedIdentity(ctx, subject, issuer, sub)
	switch {
	case err == nil:
		s.log.Info("federation audit", "what", "federation.unlinked", "subject", subject, "provider", label)
		return "Unlinked " + label + ": it no longer signs you in."
	case errors.Is(err, storage.ErrLastWayIn):
		return "This is your only way to sign in, so it cannot be unlinked. Add another way first."
	case errors.Is(err, storage.ErrNotFound):
		return "That sign-in provider was not linked."
	}
	s.log.Error("unlink provider", "error", err)
	s.renderError(w, http.StatusInternalServerError, "Unlinking failed.", "Please try again in a moment.")
	return ""
}
