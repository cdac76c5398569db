package oauth

import (
	"context"
	"errors"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/signin"
	"github.com/authd/authd/web/templates"
)

// AccountPages are the self-service pages (authd's are package
// accountweb, which cmd/authd builds and mounts): sign-up, password
// recovery, email change, account deletion. They run behind the server's
// middleware (request ID, access log, metrics, body limit) and set their
// own page headers and CSRF protection.
type AccountPages interface {
	http.Handler
	// Route returns the route label of path for the request metrics, or
	// "" for a path that is none of the pages' (it is then not theirs).
	Route(path string) string
	// LoginLinks returns the links the login page of the authorization
	// request returnTo (a local URL) shows.
	LoginLinks(returnTo string) templates.AccountLinks
	// AccountLinks returns the links the account page shows.
	AccountLinks() templates.AccountLinks
}

// MountAccounts serves p's routes. Call it before the server serves its
// first request; without it the login and account pages show no links.
func (s *Server) MountAccounts(p AccountPages) { s.accounts = p }

// SessionUser returns the browser's signed-in user and session, for the
// account pages: false when there is none (no cookie, ended, expired,
// disabled user).
func (s *Server) SessionUser(r *http.Request) (identity.User, identity.Session, bool) {
	cur, ok := s.currentSession(r.Context(), r)
	return cur.user, cur.session, ok
}

// SignIn starts a browser session for u (who proved who they are on an
// account page: amr as RFC 8176) and sets its cookie, ending this
// browser's previous session, as the login form does. The caller then
// continues the authorization request the person came from.
func (s *Server) SignIn(ctx context.Context, w http.ResponseWriter, r *http.Request, u identity.User, amr []string) error {
	if u.Subject == "" {
		return errors.New("oauth: sign in: no user")
	}
	if old := s.cookies.sessionRef(r); old != "" {
		if err := s.people.EndSession(ctx, old); err != nil {
			s.log.Error("end previous session", "error", err)
		}
	}
	ref, _, err := s.people.StartSession(ctx, u.Subject, amr)
	if err != nil {
		return err
	}
	s.cookies.setSession(w, ref, s.cfg.SessionTTL)
	return nil
}

// AccountFlow is the sign-in flow as the account pages see it: a person
// who proved who they are (a sign-up's code) continues the authorization
// request they started from, signed in, as after the login form
// (signin.Flow.Complete: returnTo must be this server's authorization
// endpoint).
func (s *Server) AccountFlow() signin.Flow { return methodFlow{s: s, method: "signup"} }

// loginLinks are the self-service links of the login page of r's
// authorization request.
func (s *Server) loginLinks(r *http.Request) templates.AccountLinks {
	if s.accounts == nil {
		return templates.AccountLinks{}
	}
	return s.accounts.LoginLinks(r.URL.RequestURI())
}

// accountLinks are the self-service links of the account page.
func (s *Server) accountLinks() templates.AccountLinks {
	if s.accounts == nil {
		return templates.AccountLinks{}
	}
	return s.accounts.AccountLinks()
}
