package oauth

import (
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Endpoint paths, advertised in the RFC 8414 metadata.
const (
	pathAuthorize  = "/oauth2/authorize"
	pathToken      = "/oauth2/token"
	pathRevoke     = "/oauth2/revoke"
	pathIntrospect = "/oauth2/introspect"
	pathLogout     = "/logout"
	pathMetadata   = "/.well-known/oauth-authorization-server"
)

// routes registers every route in one place.
func (s *Server) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(s.handleNotFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(s.handleMethodNotAllowed)

	// HTML pages: cross-origin POSTs are refused (Sec-Fetch-Site / Origin,
	// net/http.CrossOriginProtection) in addition to the CSRF token.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderError(w, http.StatusForbidden, "This form was not sent from this site.",
			"For your safety the request was refused. Go back to the app and start the sign-in again.")
	}))
	html := func(h http.HandlerFunc) http.Handler { return securityHeaders(cop.Handler(h)) }

	r.Handle(pathAuthorize, html(s.handleAuthorize)).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathLogout, html(s.handleLogout)).Methods(http.MethodGet, http.MethodPost)
	r.Handle(pathAccount, html(s.handleAccount)).Methods(http.MethodGet, http.MethodPost)
	r.HandleFunc(pathToken, s.handleToken).Methods(http.MethodPost)
	r.HandleFunc(pathRevoke, s.handleRevoke).Methods(http.MethodPost)
	r.HandleFunc(pathIntrospect, s.handleIntrospect).Methods(http.MethodPost)
	r.HandleFunc(pathMetadata, s.handleMetadata).Methods(http.MethodGet)
	r.HandleFunc("/static/authd.css", s.handleCSS).Methods(http.MethodGet)
	r.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).Methods(http.MethodGet)
	r.HandleFunc("/healthz", s.handleHealthz).Methods(http.MethodGet)
	r.HandleFunc("/readyz", s.handleReadyz).Methods(http.MethodGet)
	if s.cfg.DemoVerifier != "" {
		r.Handle("/demo/callback", html(s.handleDemoCallback)).Methods(http.MethodGet)
	}
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	s.adminRoutes(r) // /admin/clients…, admin.go

	return s.logRequests(limitAdminBody(limitBody(r)))
}
