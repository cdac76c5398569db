package oauth

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/authd/authd/web/templates"
)

// Endpoint paths, advertised in the RFC 8414 metadata.
const (
	pathAuthorize  = "/oauth2/authorize"
	pathToken      = "/oauth2/token"
	pathRevoke     = "/oauth2/revoke"
	pathIntrospect = "/oauth2/introspect"
	pathLogout     = "/logout"
	pathMetadata   = "/.well-known/oauth-authorization-server"
	pathJWKS       = "/oauth2/jwks"
	pathUserinfo   = "/oauth2/userinfo"
	pathDiscovery  = "/.well-known/openid-configuration"
	pathEndSession = "/oauth2/logout"
	pathPAR        = "/oauth2/par"
)

// routes registers every route of the public listener in one place: the
// protocol, the pages and, when mounted, the admin API. /metrics, /healthz
// and /readyz are on the operations listener (package ops), never here.
func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(s.handleNotFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.handleMethodNotAllowed(w, req, allowedMethods(r, req))
	})

	// HTML pages: cross-origin POSTs are refused (Sec-Fetch-Site / Origin,
	// net/http.CrossOriginProtection) in addition to the CSRF token.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, http.StatusForbidden, "This form was not sent from this site.",
			"For your safety the request was refused. Go back to the app and start the sign-in again.")
	}))
	html := func(h http.HandlerFunc) http.Handler { return securityHeaders(cop.Handler(h)) }

	// mux tries the routes in order (a regular expression each): the
	// busiest first. No two paths overlap, so the order decides nothing
	// else.
	r.HandleFunc(pathToken, s.handleToken).Methods(http.MethodPost)
	r.Handle(pathAuthorize, authorizeByPost(html(s.handleAuthorize))).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathLogout, html(s.handleLogout)).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathEndSession, endSessionByPost(html(s.handleEndSession), securityHeaders(http.HandlerFunc(s.handleEndSession)))).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathAccount, html(s.handleAccount)).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathAccountMFA, html(s.handleAccountMFA)).Methods(http.MethodPost)
	r.Handle(pathAccountMFAQR, html(s.handleAccountMFAQR)).Methods(http.MethodGet)
	r.HandleFunc(pathRevoke, s.handleRevoke).Methods(http.MethodPost)
	r.HandleFunc(pathPAR, s.handlePAR).Methods(http.MethodPost)
	r.HandleFunc(pathChallenge, s.handleChallenge).Methods(http.MethodPost)
	r.HandleFunc(pathIntrospect, s.handleIntrospect).Methods(http.MethodPost)
	// Documents that caches, CDNs and monitors fetch name HEAD too; every
	// other GET route answers it as well (see below).
	r.HandleFunc(pathMetadata, s.handleMetadata).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(pathJWKS, s.handleJWKS).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(pathDiscovery, s.handleMetadata).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc(pathUserinfo, s.handleUserinfo).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc("/static/authd.css", s.handleCSS).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).Methods(http.MethodGet, http.MethodHead)
	// The sign-in methods' own routes, under /signin/NAME/ (signin.go).
	s.mountMethods(func(method, path string, h http.Handler, crossSite bool) {
		if crossSite {
			// A provider's form_post callback (signin.Route.CrossSite):
			// the method binds it to the browser by its state and cookie.
			cop.AddInsecureBypassPattern(method + " " + path)
		}
		r.Handle(path, securityHeaders(cop.Handler(s.limitMethodRoute(h)))).Methods(method)
	})
	s.passkeyRoutes(r, html) // passkeys.go
	if s.cfg.DemoVerifier != "" {
		r.Handle("/demo/callback", html(s.handleDemoCallback)).Methods(http.MethodGet)
	}
	public := limitBody(r, s.bodyTooLarge)
	// POST /oauth2/token, the busiest route by far, goes straight to its
	// handler: the route mux would choose, without its regular
	// expression and the two request copies it makes for the route and
	// its variables (every other method and path still goes through mux,
	// which answers 405 with Allow, 404 and unclean paths).
	token := limitBody(http.HandlerFunc(s.handleToken), s.bodyTooLarge)
	return s.logRequests(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == pathToken {
			token.ServeHTTP(w, req)
			return
		}
		// /admin/…: the admin API (MountAdmin), which bounds its own
		// bodies, so it is served beside the public body limit rather
		// than under it.
		if s.admin != nil && strings.HasPrefix(req.URL.Path, "/admin/") {
			s.admin.ServeHTTP(w, req)
			return
		}
		if req.Method == http.MethodHead {
			// Every GET route of the protocol and the pages answers HEAD
			// (RFC 9110 §9.1: a general-purpose server supports GET and
			// HEAD; §9.3.2: with the same header fields). The handler sees
			// GET; net/http, which still sees HEAD, writes no body.
			req = req.Clone(req.Context())
			req.Method = http.MethodGet
		}
		if s.accounts != nil && s.accounts.Route(req.URL.Path) != "" {
			limitBody(s.accounts, s.pageTooLarge).ServeHTTP(w, req)
			return
		}
		public.ServeHTTP(w, req)
	}))
}

// allowedMethods lists the methods router serves for req's path, for the
// Allow header every 405 carries (RFC 9110 §15.5.6).
func allowedMethods(router *mux.Router, req *http.Request) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		probe := req.Clone(req.Context())
		probe.Method = m
		var match mux.RouteMatch
		if router.Match(probe, &match) && match.MatchErr == nil {
			allowed = append(allowed, m)
			if m == http.MethodGet {
				allowed = append(allowed, http.MethodHead) // served as GET (routes)
			}
		}
	}
	return strings.Join(slices.Compact(allowed), ", ")
}

// authorizeByPost accepts an authorization request sent by POST as a form
// (OpenID Connect Core §3.1.2.1: the server MUST support GET and POST) by
// redirecting it to the same request by GET, which is how every page of the
// flow then sees it. It applies to a POST with no query and no "step"
// field (the login and consent forms have one) that names a response_type;
// it changes nothing, so it runs before the cross-origin check (a relying
// party's auto-submitted form is cross-site by design).
func authorizeByPost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.RawQuery == "" {
			if err := r.ParseForm(); err == nil && !r.PostForm.Has("step") && r.PostForm.Has("response_type") {
				w.Header().Set("Cache-Control", "no-store")
				http.Redirect(w, r, pathAuthorize+"?"+r.PostForm.Encode(), http.StatusSeeOther)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// endSessionByPost accepts a logout request a relying party sends by POST
// (RP-Initiated Logout 1.0 §2: the OP MUST support GET and POST): a POST
// without the confirmation form's csrf_token goes to rpPost, the handler
// without the cross-origin check (a relying party's auto-submitted form is
// cross-site by design), which answers it like a GET. It is never
// redirected to a GET: that URL would carry the id_token_hint into
// histories and logs.
func endSessionByPost(page, rpPost http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.RawQuery == "" {
			if err := r.ParseForm(); err == nil && !r.PostForm.Has("csrf_token") {
				rpPost.ServeHTTP(w, r)
				return
			}
		}
		page.ServeHTTP(w, r)
	})
}

func (s *Server) handleCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(templates.CSS)
}

func (s *Server) handleNotFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found", "error_description": "No such endpoint."})
}

func (s *Server) handleMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{
		"error": "invalid_request", "error_description": errorDescription("The HTTP method " + r.Method + " is not allowed on this endpoint.")})
}
