package oauth

import (
	"net/http"
	"time"

	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// The pages of the authorization flow other than the login page
// (signin.go): consent, one tap, errors.

func (s *Server) renderConsent(w http.ResponseWriter, r *http.Request, c *storage.Client, ar fosite.AuthorizeRequester, cur signedIn) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.Consent(w, templates.ConsentData{
		ClientName: clientName(c), Username: cur.user.Username, Scopes: s.scopes.describe(ar.GetRequestedScopes()),
		Action: r.URL.RequestURI(), CSRFToken: token, Session: cur.session.ID,
	}); err != nil {
		s.log.Error("render consent", "error", err)
	}
}

// renderContinue shows the one-tap page: "Continue as alice to <app>?",
// with a way to switch account (RFC 8252 §8.6).
func (s *Server) renderContinue(w http.ResponseWriter, r *http.Request, c *storage.Client, cur signedIn) {
	token := s.cookies.csrfToken(w, r)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.pages.Continue(w, templates.ContinueData{
		ClientName: clientName(c), Username: cur.user.Username, Action: r.URL.RequestURI(),
		CSRFToken: token, Session: cur.session.ID,
	}); err != nil {
		s.log.Error("render continue", "error", err)
	}
}

// renderError shows the friendly error page (never a redirect). The detail
// may name what the request sent: it is shown in RFC 6749 §5.2's charset
// and bounded, as every error_description is (errorDescription).
func (s *Server) renderError(w http.ResponseWriter, status int, msg, detail string) {
	detail = errorDescription(detail)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Error(w, templates.ErrorData{Message: msg, Detail: detail}); err != nil {
		s.log.Error("render error page", "error", err)
	}
}

// renderUnavailable answers a page request that failed because the
// database could not be reached: 503 with Retry-After, and a page that
// says to try again (not "wrong password", not "unknown app").
func (s *Server) renderUnavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", retryAfter(time.Second))
	s.renderError(w, http.StatusServiceUnavailable, "Sign-in is unavailable for a moment.", "Please try again in a few seconds.")
}

func clientName(c *storage.Client) string {
	if c.Name != "" {
		return c.Name
	}
	return c.ID
}
