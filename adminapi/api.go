package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/federation"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/passkey"
)

// The API's collections, which are also its route labels (Route).
const (
	pathClients = "/admin/clients"
	pathUsers   = "/admin/users"
)

// maxBodyBytes bounds request bodies; larger ones get 413.
const maxBodyBytes = 32 << 10

// Config configures the API. Secret, Store and People are required.
type Config struct {
	// Secret is the system secret: client secrets, Idempotency-Keys and
	// admin credentials are hashed, and stored answers sealed, with keys
	// derived from it.
	Secret []byte
	// AdminTokens are the bearer tokens the API accepts (constant time).
	AdminTokens []string
	// IdempotencyKeyTTL is how long a key and its answer are kept
	// (default 24h).
	IdempotencyKeyTTL time.Duration
	// Store keeps clients and Idempotency-Keys. Give the store every
	// revocation goes through (revocation.Store, over the client cache
	// when there is one), so that a deleted client's replay cache entries
	// and cached copy go with it.
	Store clientadmin.Store
	// People is the identity service, on the same store.
	People *identity.Service
	// Passkeys, when set, serves the passkey endpoints (passkeys.go).
	Passkeys *passkey.Service
	// Logger receives the audit events and the errors; nil is
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Issuer is authd's issuer, for the redirect_uri /admin/providers
	// shows. The providers are served when Store keeps them
	// (federation.AdminStore).
	Issuer string
}

// API is the admin HTTP API. It is safe for concurrent use.
type API struct {
	svc      *clientadmin.Service
	users    *identity.Admin
	people   *identity.Service
	passkeys *passkey.Admin // nil: passkeys are off
	log      *slog.Logger
	handler  http.Handler
	// providers are the upstream providers' operations; nil when the
	// store keeps none.
	providers *federation.Admin
}

// New returns the API over a clientadmin.Service and an identity.Admin
// that share one Idempotency-Key engine.
func New(cfg Config) (*API, error) {
	if cfg.Store == nil {
		return nil, errors.New("adminapi: Config.Store is required")
	}
	if cfg.People == nil {
		return nil, errors.New("adminapi: Config.People is required")
	}
	a := &API{people: cfg.People, log: cfg.Logger}
	if a.log == nil {
		a.log = slog.Default()
	}
	keys, err := idempotency.New(idempotency.Config{Secret: cfg.Secret, TTL: cfg.IdempotencyKeyTTL, Store: cfg.Store, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	svc, err := clientadmin.New(clientadmin.Config{
		Secret:      cfg.Secret,
		AdminTokens: cfg.AdminTokens,
		Idempotency: keys,
		Store:       cfg.Store,
		Audit:       a.audit,
		Now:         cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	a.svc = svc
	a.users = identity.NewAdmin(cfg.People, keys)
	if ps, ok := cfg.Store.(federation.AdminStore); ok {
		a.providers = federation.NewAdmin(cfg.Secret, cfg.Issuer, ps, keys, a.log)
	}
	if cfg.Passkeys != nil {
		a.passkeys = passkey.NewAdmin(cfg.Passkeys, keys)
	}
	a.handler = a.routes()
	return a, nil
}

// Caller identifies who makes an admin request (clientadmin.Caller).
type Caller = clientadmin.Caller

// AuthenticateToken returns the caller presenting an admin bearer token and
// whether it is one of the configured admin tokens (constant time).
func (a *API) AuthenticateToken(token string) (Caller, bool) { return a.svc.AuthenticateToken(token) }

// LocalCaller returns the caller for a local operator (the CLI).
func (a *API) LocalCaller(name string) Caller { return a.svc.LocalCaller(name) }

// ServeHTTP serves a request under /admin/.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Route returns the route label of path for request metrics and access
// logs: one of the API's two collections, or "" for any other path.
func (a *API) Route(path string) string {
	switch {
	case path == pathClients || strings.HasPrefix(path, pathClients+"/"):
		return pathClients
	case isUsersPath(path):
		return pathUsers
	case isProvidersPath(path):
		return pathProviders
	}
	return ""
}

// isUsersPath reports whether path is the user collection or below it.
func isUsersPath(path string) bool {
	return path == pathUsers || strings.HasPrefix(path, pathUsers+"/")
}

// Response is the HTTP answer to one admin operation.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Body is the JSON body: RFC 7591 §3.2.1 client information, a user,
	// a list, or an RFC 7591 §3.2.2 error; empty for 204.
	Body []byte
	// Replayed reports a response replayed from an Idempotency-Key record:
	// Status and Body are those of the original response, byte for byte.
	Replayed bool
	// ClientID is the client the operation concerned, when known.
	ClientID string
	// Location, when set, is the Location header of a 201 (the created
	// user's path); for a client it is derived from ClientID.
	Location string
}

// routes returns the router of /admin/…: the users' own router for
// /admin/users…, the clients' for everything else. The API bounds its own
// bodies, with RFC 7591 errors.
func (a *API) routes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(writeNotFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: the methods of this router's resource.
		writeMethodNotAllowed(w, req, allowedMethods(r, req))
	})
	r.Handle(pathClients, a.authenticated(a.handleCreate)).Methods(http.MethodPost)
	r.Handle(pathClients, a.authenticated(a.handleList)).Methods(http.MethodGet)
	r.Handle(pathClients+"/{id}", a.authenticated(a.handleGet)).Methods(http.MethodGet)
	r.Handle(pathClients+"/{id}", a.authenticated(a.handleUpdate)).Methods(http.MethodPut)
	r.Handle(pathClients+"/{id}", a.authenticated(a.handleDelete)).Methods(http.MethodDelete)
	r.Handle(pathClients+"/{id}/secret", a.authenticated(a.handleRotate)).Methods(http.MethodPost)
	users := a.userRoutes()
	var providers http.Handler
	if a.providers != nil {
		providers = a.providerRoutes()
	}
	return limitBody(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isUsersPath(req.URL.Path) {
			users.ServeHTTP(w, req)
			return
		}
		if providers != nil && isProvidersPath(req.URL.Path) {
			providers.ServeHTTP(w, req)
			return
		}
		r.ServeHTTP(w, req)
	}))
}

// writeNotFound and writeMethodNotAllowed answer a path or method the
// client router does not serve as authd's public listener answers any
// other (oauth's generic JSON answers, byte for byte).
func writeNotFound(w http.ResponseWriter, _ *http.Request) {
	writeGeneric(w, http.StatusNotFound, `{"error":"not_found","error_description":"No such endpoint."}`)
}

func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	// clientadmin.Error bounds the method echoed (any token, any length)
	// and keeps it in error_description's charset, as oauth's answer does.
	body, _ := json.Marshal(&clientadmin.Error{Code: "invalid_request",
		Description: "The HTTP method " + r.Method + " is not allowed on this endpoint."})
	writeGeneric(w, http.StatusMethodNotAllowed, string(body))
}

// writeGeneric sends one of those answers.
func writeGeneric(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body+"\n")
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
		}
	}
	return strings.Join(allowed, ", ")
}

// handler is an admin endpoint, called for an authenticated caller.
type handler func(w http.ResponseWriter, r *http.Request, caller Caller)

// requestIDKey carries the request ID (the X-Request-Id response header,
// set by the server's middleware before the API runs) into the audit log.
type requestIDKey struct{}

// authenticated admits requests carrying a configured admin token as an
// RFC 6750 §2.1 bearer token and answers every other one with 401 and a
// WWW-Authenticate challenge (RFC 6750 §3).
func (a *API) authenticated(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := w.Header().Get("X-Request-Id"); id != "" {
			r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		}
		token, presented := bearerToken(r)
		caller, ok := a.AuthenticateToken(token)
		if !ok {
			challenge := `Bearer realm="authd-admin"`
			if presented {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			err := newHTTPError(http.StatusUnauthorized, "invalid_token", "An admin bearer token is required.") // RFC 6750 §3.1
			writeResponse(w, a.refuse(r.Context(), clientadmin.Unauthenticated, "authenticate", mux.Vars(r)["id"], false, err))
			return
		}
		h(w, r, caller)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header (the
// scheme is case-insensitive, RFC 9110 §11.1) and whether one was present.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", h != ""
	}
	return strings.TrimSpace(token), true
}

// idempotencyKeyHeader returns the Idempotency-Key header ("" if absent),
// or an error for an empty or repeated header.
func idempotencyKeyHeader(r *http.Request) (string, error) {
	vs := r.Header.Values("Idempotency-Key")
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1 || strings.TrimSpace(vs[0]) == "":
		return "", &clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code, Description: "Send exactly one non-empty Idempotency-Key header."}
	}
	return strings.TrimSpace(vs[0]), nil
}

// readBody reads the request body: at most maxBodyBytes (413 otherwise),
// and, when there is one or it is required, of media type
// application/json in UTF-8 (415 otherwise). The errors carry the error
// code of the endpoint's bad bodies (bodyErrorCode).
func readBody(w http.ResponseWriter, r *http.Request, required bool) ([]byte, error) {
	code := bodyErrorCode(r.URL.Path)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, newHTTPError(http.StatusRequestEntityTooLarge, code, fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes))
		}
		return nil, newHTTPError(http.StatusBadRequest, code, "The request body could not be read.")
	}
	if len(body) == 0 && !required {
		return nil, nil
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || (ok && !strings.EqualFold(cs, "utf-8")) {
		return nil, newHTTPError(http.StatusUnsupportedMediaType, code, "The request body must be application/json (RFC 7591 §3.1).")
	}
	return body, nil
}

// writeResponse sends resp, never cached (it may hold a secret).
func writeResponse(w http.ResponseWriter, resp Response) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if len(resp.Body) > 0 {
		h.Set("Content-Type", "application/json")
	}
	if resp.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	switch {
	case resp.Status != http.StatusCreated:
	case resp.Location != "":
		h.Set("Location", resp.Location)
	case resp.ClientID != "":
		h.Set("Location", pathClients+"/"+url.PathEscape(resp.ClientID))
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// limitBody answers admin requests that declare a body larger than
// maxBodyBytes with 413 and an RFC 7591 §3.2.2 error.
func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBodyBytes {
			writeResponse(w, jsonResponse(http.StatusRequestEntityTooLarge, &clientadmin.Error{Code: bodyErrorCode(r.URL.Path),
				Description: fmt.Sprintf("The request body is larger than %d bytes.", maxBodyBytes)}, ""))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyErrorCode is the error code of a bad request body on path: RFC 7591
// §3.2.2's invalid_client_metadata for clients, invalid_request for users.
func bodyErrorCode(path string) string {
	if isUsersPath(path) || isProvidersPath(path) {
		return clientadmin.ErrInvalidRequest.Code
	}
	return clientadmin.ErrInvalidMetadata.Code
}

// listPage reads the page a list request asks for from its query: the
// limit (0 when absent) and the cursor, or a description of what is wrong
// (maxLimit is the largest limit).
func listPage(r *http.Request, maxLimit int) (limit int, cursor, problem string) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, "", "The query string is not valid."
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return 0, "", fmt.Sprintf("limit must be between 1 and %d.", maxLimit)
		}
	}
	return limit, q.Get("cursor"), ""
}
