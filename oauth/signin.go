package oauth

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/ory/fosite"

	"github.com/authd/authd/signin"
	"github.com/authd/authd/storage"
	"github.com/authd/authd/web/templates"
)

// This file is the sign-in step of the authorization flow: the login page
// (each method's part, in order), the login POST (the method named by the
// form's "method" field), the routes a method mounts under /signin/NAME/,
// and signin.Flow, through which such a route hands its result back. The
// flow names no method: cmd/authd lists them in Deps.Methods.

// defaultMethod is the method of a login form that names none (the
// password form before methods had names).
const defaultMethod = "password"

// pathSignIn is the prefix of the methods' own routes.
const pathSignIn = "/signin/"

// methodNameRe is what a method's name may be: it is a path segment and a
// form value.
var methodNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// methodSet is the server's sign-in methods, in the login page's order.
type methodSet struct {
	list   []signin.Method
	byName map[string]signin.Method
	// routes are the mounted routes' paths (the request log's route
	// label).
	routes map[string]bool
}

func newMethodSet(ms []signin.Method) (methodSet, error) {
	set := methodSet{byName: map[string]signin.Method{}, routes: map[string]bool{}}
	if len(ms) == 0 {
		return set, errors.New("oauth: Deps.Methods needs at least one sign-in method (package signin/pwd)")
	}
	for _, m := range ms {
		if m == nil {
			return set, errors.New("oauth: Deps.Methods holds a nil method")
		}
		name := m.Name()
		if !methodNameRe.MatchString(name) {
			return set, fmt.Errorf("oauth: sign-in method name %q is not a lower-case identifier", name)
		}
		if set.byName[name] != nil {
			return set, fmt.Errorf("oauth: two sign-in methods are named %q", name)
		}
		set.byName[name] = m
		set.list = append(set.list, m)
	}
	return set, nil
}

// mountMethods adds the routes of the methods that have some (signin.Mounter)
// under /signin/NAME/; handle puts each behind the pages' middleware.
func (s *Server) mountMethods(handle func(method, path string, h http.Handler, crossSite bool)) {
	for _, m := range s.methods.list {
		mt, ok := m.(signin.Mounter)
		if !ok {
			continue
		}
		for _, rt := range mt.Routes(methodFlow{s: s, method: m.Name()}) {
			p := pathSignIn + m.Name() + "/" + strings.TrimPrefix(rt.Path, "/")
			s.methods.routes[p] = true
			h := rt.Handler
			if rt.CSRF {
				h = s.requireCSRF(h)
			}
			handle(rt.Method, p, h, rt.CrossSite)
		}
	}
}

// signInStep is a login POST: the method the form names checks what was
// posted; on success a new session starts (startSession) and the request
// goes on as signed in just now. A failure is answered here: the login
// page with the method's message, or 503 when a dependency is down.
func (s *Server) signInStep(w http.ResponseWriter, a *authzRequest, post url.Values) (progress, bool) {
	name := cmp.Or(post.Get("method"), defaultMethod)
	m := s.methods.byName[name]
	if m == nil {
		s.renderLogin(w, a.r, http.StatusBadRequest, a.client, loginPage{msg: "This way of signing in is not available. Choose another."})
		return progress{}, false
	}
	res, err := m.Verify(a.r.Context(), signin.Input{Fields: post, RemoteIP: clientIP(a.r), Action: a.r.URL.RequestURI(),
		KnownDevice: s.devices.known(a.r)})
	if err != nil {
		s.failSignIn(w, a.r, a.ar, a.client, name, err)
		return progress{}, false
	}
	if !s.startSession(w, a, res) {
		return progress{}, false
	}
	// The user has just signed in for this request: that is the
	// interaction RFC 8252 §8.6 asks for.
	return progress{proven: true, interacted: true}, true
}

// failSignIn answers a method's error: a *signin.Failure is the login
// page with its message and status; signin.ErrUnavailable is 503;
// anything else a server error.
func (s *Server) failSignIn(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, c *storage.Client, method string, err error) {
	var f *signin.Failure
	switch {
	case errors.As(err, &f):
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", retryAfter(f.RetryAfter))
		}
		p := loginPage{username: f.Username, msg: f.Message}
		if f.Invalid {
			p.invalid = method
		}
		s.renderLogin(w, r, cmp.Or(f.Status, http.StatusBadRequest), c, p)
	case errors.Is(err, signin.ErrUnavailable):
		// Not the person's failure, and not charged to any back-off.
		s.renderUnavailable(w)
	default:
		s.log.Error("sign-in method", "method", method, "error", err)
		s.writeAuthorizeError(w, ar, fosite.ErrServerError.WithWrap(err))
	}
}

// startSession starts the session of a sign-in in the browser: the
// browser's previous session ends (a new sign-in is a new session, with a
// new reference: no fixation), and the new one records the method's amr
// (RFC 8176) and auth_time. It answers a failure itself (false).
func (s *Server) startSession(w http.ResponseWriter, a *authzRequest, res signin.Result) bool {
	ctx := a.r.Context()
	if old := s.cookies.sessionRef(a.r); old != "" {
		if err := s.people.EndSession(ctx, old); err != nil {
			s.log.Error("end previous session", "error", err)
		}
	}
	ref, bs, err := s.people.StartSessionAt(ctx, res.User.Subject, res.AMR, res.AuthTime)
	if err != nil {
		s.log.Error("start session", "error", err)
		s.writeAuthorizeError(w, a.ar, fosite.ErrServerError.WithWrap(err))
		return false
	}
	s.cookies.setSession(w, ref, s.cfg.SessionTTL)
	s.devices.remember(w, a.r, res.User.Username)
	a.cur, a.isSignedIn = signedIn{ref: ref, session: bs, user: res.User}, true
	return true
}

// loginPage is what the login page shows beyond the methods' forms.
type loginPage struct {
	username string
	msg      string
	// reauth: the signed-in user must prove it again.
	reauth bool
	// invalid is the method whose attempt failed (its inputs are marked
	// invalid and focused).
	invalid string
}

// renderLogin shows the login page: the message, then each method's part
// in order (signin.Method.Render).
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, c *storage.Client, p loginPage) {
	token := s.cookies.csrfToken(w, r)
	page := signin.Page{Action: r.URL.RequestURI(), CSRFToken: token, ClientID: c.ID, Username: p.username, Reauth: p.reauth}
	if p.msg != "" {
		page.ErrorID = templates.LoginErrorID
	}
	d := templates.LoginData{ClientName: clientName(c), Error: p.msg, Accounts: s.loginLinks(r)}
	for _, m := range s.methods.list {
		mp := page
		mp.Invalid = p.invalid == m.Name()
		if h := m.Render(r.Context(), mp); h != "" {
			d.Methods = append(d.Methods, h)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := s.pages.Login(w, d); err != nil {
		s.log.Error("render login", "error", err)
	}
}

// methodFlow is signin.Flow for one method's routes: its result continues
// the authorization request it came from, as a login POST would.
type methodFlow struct {
	s      *Server
	method string
}

var _ signin.Flow = methodFlow{}

// Complete implements signin.Flow. returnTo must be this server's
// authorization endpoint (a path and a query, as signin.Page.Action is):
// anything else is refused with a page, never followed (no open
// redirect). The method's route has checked its own proof (its state,
// its CSRF); the request is then parsed and refused as any, the session
// starts, and the flow decides the next step.
func (f methodFlow) Complete(w http.ResponseWriter, r *http.Request, returnTo string, res signin.Result) {
	s := f.s
	fr, ok := s.returnRequest(w, r, returnTo)
	if !ok {
		return
	}
	a, ok := s.parseAuthorize(w, fr, fr)
	if !ok {
		return
	}
	if !s.startSession(w, a, res) {
		return
	}
	s.advance(w, a, progress{proven: true, interacted: true})
}

// Fail implements signin.Flow: the login page of returnTo's request with
// the failure, as after a failed login POST of this method.
func (f methodFlow) Fail(w http.ResponseWriter, r *http.Request, returnTo string, fail *signin.Failure) {
	s := f.s
	fr, ok := s.returnRequest(w, r, returnTo)
	if !ok {
		return
	}
	a, ok := s.parseAuthorize(w, fr, fr)
	if !ok {
		return
	}
	if fail == nil {
		fail = &signin.Failure{Status: http.StatusBadRequest, Message: "Signing in did not work. Please try again."}
	}
	s.failSignIn(w, fr, a.ar, a.client, f.method, fail)
}

// returnRequest is r made a GET of returnTo, once returnTo is known to be
// this server's authorization endpoint: a path and a query, no scheme,
// host, user or fragment.
func (s *Server) returnRequest(w http.ResponseWriter, r *http.Request, returnTo string) (*http.Request, bool) {
	u, err := url.Parse(returnTo)
	if err != nil || !strings.HasPrefix(returnTo, pathAuthorize) || u.Scheme != "" || u.Host != "" || u.User != nil ||
		u.Opaque != "" || u.Fragment != "" || u.RawPath != "" || u.Path != pathAuthorize {
		s.log.Info("sign-in method returned to a URL that is not the authorization endpoint")
		s.renderError(w, http.StatusBadRequest, "This sign-in link is not valid.", "Go back to the app and start the sign-in again.")
		return nil, false
	}
	fr := r.Clone(r.Context())
	fr.Method = http.MethodGet
	fr.URL = &url.URL{Path: u.Path, RawQuery: u.RawQuery}
	fr.RequestURI = fr.URL.RequestURI()
	fr.Body = http.NoBody
	fr.ContentLength = 0
	fr.Form, fr.PostForm = nil, nil
	fr.Header = r.Header.Clone()
	fr.Header.Del("Content-Type")
	return fr, true
}

// requireCSRF refuses a POST to a method's route (signin.Route.CSRF) that
// does not carry this browser's CSRF token, with a page in words.
func (s *Server) requireCSRF(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || !s.cookies.checkCSRF(r) {
			s.renderError(w, http.StatusForbidden, "This page has expired.",
				"Go back to the app and start the sign-in again.")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// limitMethodRoute spends one request of the source address's budget for
// the methods' own routes (Config.MethodRouteLimits) before h runs: each
// may write a row (a passkey ceremony, a provider's state), so a flood
// from one address is refused early. The answer is 429 with Retry-After,
// JSON for a script (the passkey button asks for JSON), else a page.
func (s *Server) limitMethodRoute(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, wait := s.limits.Take(r.Context(), "signin-route", clientIP(r), s.cfg.MethodRouteLimits.rate()); !ok {
			w.Header().Set("Retry-After", retryAfter(wait))
			const msg = "Too many sign-in attempts from this address. Please wait a moment and try again."
			if strings.Contains(r.Header.Get("Content-Type"), "json") || strings.Contains(r.Header.Get("Accept"), "json") {
				w.Header().Set("Content-Type", "application/json;charset=UTF-8")
				w.Header().Set("Cache-Control", "no-store")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":"slow_down","message":"` + msg + `"}` + "\n"))
				return
			}
			s.renderError(w, http.StatusTooManyRequests, msg, "")
			return
		}
		h.ServeHTTP(w, r)
	})
}
