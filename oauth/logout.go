package oauth

import (
	"net/http"

	"github.com/authd/authd/web/templates"
)

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
