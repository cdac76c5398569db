package oauth

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

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
)

// The admin API: a thin HTTP adapter over clientadmin.Service, which holds
// the operations, the metadata rules and the Idempotency-Key engine
// (docs/architecture.md, "Admin writes"). This file only maps HTTP onto the service
// and its typed errors onto RFC 7591 §3.2.2 answers.
//
//	POST   /admin/clients              register (RFC 7591 §3.1) → 201, RFC 7591 §3.2.1
//	GET    /admin/clients?limit&cursor list, ordered by client_id
//	GET    /admin/clients/{id}         read (RFC 7592 §2.1, without secret)
//	PUT    /admin/clients/{id}         full replace (RFC 7592 §2.2)
//	DELETE /admin/clients/{id}         delete, with every code and token → 204
//	POST   /admin/clients/{id}/secret  rotate the client_secret (shown once)
//
// Every request carries "Authorization: Bearer <admin token>" (RFC 6750
// §2.1). POST, PUT and rotation honour Idempotency-Key
// (draft-ietf-httpapi-idempotency-key-header). Errors are RFC 7591 §3.2.2
// JSON objects, {"error": …, "error_description": …}.

// pathAdminClients is the admin API's client collection.
const pathAdminClients = "/admin/clients"

// maxAdminBodyBytes bounds admin request bodies; larger ones get 413.
const maxAdminBodyBytes = 32 << 10

// AdminResponse is the HTTP answer to one admin operation.
type AdminResponse struct {
	// Status is the HTTP status code.
	Status int
	// Body is the JSON body: RFC 7591 §3.2.1 client information, a
	// ClientList, or an RFC 7591 §3.2.2 error; empty for 204.
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

// ClientList is the body of GET /admin/clients.
type ClientList = clientadmin.ClientList

// AdminCaller identifies who makes an admin request (clientadmin.Caller).
type AdminCaller = clientadmin.Caller

// Admin is the HTTP adapter of the client administration service and, for
// /admin/users (admin_users.go), of the identity service. It is safe for
// concurrent use.
type Admin struct {
	svc    *clientadmin.Service
	idem   *idempotency.Engine
	people *identity.Service
	log    *slog.Logger
}

// NewAdmin returns the admin API over a clientadmin.Service built from cfg
// (Secret, required; AdminTokens; IdempotencyKeyTTL) and deps (Store,
// required; Logger, the audit log; Now), and an identity.Service on the
// same store for the user endpoints.
func NewAdmin(cfg Config, deps Deps) (*Admin, error) {
	if deps.Store == nil {
		return nil, errors.New("oauth: Deps.Store is required")
	}
	people := identity.New(deps.Store, identity.Options{SessionTTL: cfg.SessionTTL, SessionIdleTTL: cfg.SessionIdleTTL, Now: deps.Now,
		Passwords: deps.Passwords, Logger: deps.Logger})
	return newAdmin(cfg, deps, people)
}

// newAdmin builds the admin API; people is the server's identity service,
// so the user endpoints revoke through the same store as every other path
// (revocation.Store: the replay cache forgets what they revoke).
func newAdmin(cfg Config, deps Deps, people *identity.Service) (*Admin, error) {
	a := &Admin{log: deps.Logger, people: people}
	if a.log == nil {
		a.log = slog.Default()
	}
	idem, err := idempotency.New(idempotency.Config{Secret: cfg.Secret, TTL: cfg.IdempotencyKeyTTL, Store: deps.Store, Now: deps.Now})
	if err != nil {
		return nil, err
	}
	a.idem = idem
	svc, err := clientadmin.New(clientadmin.Config{
		Secret:      cfg.Secret,
		AdminTokens: cfg.AdminTokens,
		Idempotency: idem,
		Store:       deps.Store,
		Audit:       a.audit,
		Now:         deps.Now,
	})
	if err != nil {
		return nil, err
	}
	a.svc = svc
	return a, nil
}

// Service returns the client administration service behind the API.
func (a *Admin) Service() *clientadmin.Service { return a.svc }

// AuthenticateToken returns the caller presenting an admin bearer token and
// whether it is one of the configured admin tokens (constant time).
func (a *Admin) AuthenticateToken(token string) (AdminCaller, bool) {
	return a.svc.AuthenticateToken(token)
}

// LocalCaller returns the caller for a local operator (the CLI).
func (a *Admin) LocalCaller(name string) AdminCaller { return a.svc.LocalCaller(name) }

// ---- operations, as HTTP answers ----

// CreateClient registers a client from RFC 7591 metadata JSON: 201 with the
// client information (the only time a secret is shown).
func (a *Admin) CreateClient(ctx context.Context, caller AdminCaller, idempotencyKey string, body []byte) AdminResponse {
	meta, err := clientadmin.DecodeMetadata(body)
	if err != nil {
		return a.refuse(ctx, caller, clientadmin.ActionCreate, "", idempotencyKey != "", err)
	}
	res, err := a.svc.Create(ctx, caller, idempotencyKey, meta)
	return a.result(ctx, http.StatusCreated, res, err, "")
}

// UpdateClient replaces client id's metadata (RFC 7592 §2.2): 200.
func (a *Admin) UpdateClient(ctx context.Context, caller AdminCaller, id, idempotencyKey string, body []byte) AdminResponse {
	req, err := clientadmin.DecodeUpdate(body)
	if err != nil {
		return a.refuse(ctx, caller, clientadmin.ActionUpdate, id, idempotencyKey != "", err)
	}
	res, err := a.svc.Update(ctx, caller, id, idempotencyKey, req)
	return a.result(ctx, http.StatusOK, res, err, id)
}

// RotateClientSecret issues a new secret for client id: 200.
func (a *Admin) RotateClientSecret(ctx context.Context, caller AdminCaller, id, idempotencyKey string) AdminResponse {
	res, err := a.svc.RotateSecret(ctx, caller, id, idempotencyKey)
	return a.result(ctx, http.StatusOK, res, err, id)
}

// GetClient answers 200 with client id's information, or 404.
func (a *Admin) GetClient(ctx context.Context, caller AdminCaller, id string) AdminResponse {
	info, err := a.svc.Get(ctx, caller, id)
	if err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return jsonResponse(http.StatusOK, info, id)
}

// ListClients answers 200 with a ClientList page.
func (a *Admin) ListClients(ctx context.Context, caller AdminCaller, limit int, cursor string) AdminResponse {
	list, err := a.svc.List(ctx, caller, limit, cursor)
	if err != nil {
		return a.errorResponse(ctx, err, "")
	}
	return jsonResponse(http.StatusOK, list, "")
}

// DeleteClient answers 204, or 404.
func (a *Admin) DeleteClient(ctx context.Context, caller AdminCaller, id string) AdminResponse {
	if err := a.svc.Delete(ctx, caller, id); err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return AdminResponse{Status: http.StatusNoContent, ClientID: id}
}

// result turns a write's result into its answer: status, and the stored
// JSON byte for byte.
func (a *Admin) result(ctx context.Context, status int, res *clientadmin.Result, err error, id string) AdminResponse {
	if err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return AdminResponse{Status: status, Body: res.JSON, Replayed: res.Replayed, ClientID: res.Client.ClientID}
}

// refuse audits a request refused before the service ran, and answers it.
func (a *Admin) refuse(ctx context.Context, caller AdminCaller, action, id string, idempotencyKey bool, err error) AdminResponse {
	a.svc.Audit(ctx, clientadmin.AuditEvent{Who: caller.String(), What: action, ClientID: id, IdempotencyKey: idempotencyKey, Err: err})
	return a.errorResponse(ctx, err, id)
}

// ---- errors ----

// httpError is an error of the HTTP layer itself (401, 413, 415), with the
// RFC 7591 §3.2.2 body it answers.
type httpError struct {
	status int
	err    *clientadmin.Error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func newHTTPError(status int, code, description string) *httpError {
	return &httpError{status: status, err: &clientadmin.Error{Code: code, Description: description}}
}

// statusOf maps an operation's error to its HTTP status: the RFC 7591
// errors 400, unknown clients 404, Idempotency-Key conflicts 409 and 422,
// serialization conflicts 409, anything else 500.
func statusOf(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.Is(err, clientadmin.ErrInvalidRedirectURI), errors.Is(err, clientadmin.ErrInvalidMetadata),
		errors.Is(err, clientadmin.ErrInvalidRequest):
		return http.StatusBadRequest
	case errors.Is(err, clientadmin.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, clientadmin.ErrKeyInFlight), errors.Is(err, clientadmin.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, clientadmin.ErrKeyReused):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// successStatus is the status of a successful operation.
func successStatus(action string) int {
	switch action {
	case clientadmin.ActionCreate:
		return http.StatusCreated
	case clientadmin.ActionDelete:
		return http.StatusNoContent
	}
	return http.StatusOK
}

// errorResponse answers err: its RFC 7591 §3.2.2 body, or for an error that
// is not the service's (a storage failure), 500 server_error, logged here
// once (never with secrets, which no error carries).
func (a *Admin) errorResponse(ctx context.Context, err error, id string) AdminResponse {
	status := statusOf(err)
	var e *clientadmin.Error
	if status == http.StatusInternalServerError || !errors.As(err, &e) {
		a.log.LogAttrs(ctx, slog.LevelError, "admin request failed", slog.Any("error", err))
		e = &clientadmin.Error{Code: "server_error", Description: "The request could not be completed."}
		status = http.StatusInternalServerError
	}
	body, _ := json.Marshal(e)
	return AdminResponse{Status: status, Body: append(body, '\n'), ClientID: id}
}

// jsonResponse encodes v as the body of a response with status.
func jsonResponse(status int, v any, id string) AdminResponse {
	body, _ := json.Marshal(v) // client information always encodes
	return AdminResponse{Status: status, Body: append(body, '\n'), ClientID: id}
}

// audit writes the audit event of an admin request to the server log: who
// (the caller's credential fingerprint), what, the client_id, the HTTP
// status and the outcome; never a secret, a token or an Idempotency-Key.
func (a *Admin) audit(ctx context.Context, e clientadmin.AuditEvent) {
	attrs := make([]slog.Attr, 0, 8)
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		attrs = append(attrs, slog.String("request_id", id))
	}
	status := successStatus(e.What)
	if e.Err != nil {
		status = statusOf(e.Err)
	}
	attrs = append(attrs,
		slog.String("who", e.Who),
		slog.String("what", e.What),
		slog.String("client_id", e.ClientID),
		slog.Int("status", status),
		slog.Bool("idempotency_key", e.IdempotencyKey),
		slog.Bool("replayed", e.Replayed),
	)
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", clientadmin.ErrorCode(e.Err)))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "admin audit", attrs...)
}

// ---- HTTP ----

// handler returns the admin API's router for /admin/…, with the server's
// not-found and method-not-allowed answers. It is mounted outside the
// public body limit: it bounds bodies itself, with RFC 7591 errors.
func (a *Admin) handler(notFound http.Handler, notAllowed func(w http.ResponseWriter, r *http.Request, allow string)) http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = notFound
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: the methods of this router's resource.
		notAllowed(w, req, allowedMethods(r, req))
	})
	r.Handle(pathAdminClients, a.authenticated(a.handleCreate)).Methods(http.MethodPost)
	r.Handle(pathAdminClients, a.authenticated(a.handleList)).Methods(http.MethodGet)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleGet)).Methods(http.MethodGet)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleUpdate)).Methods(http.MethodPut)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleDelete)).Methods(http.MethodDelete)
	r.Handle(pathAdminClients+"/{id}/secret", a.authenticated(a.handleRotate)).Methods(http.MethodPost)
	users := a.userHandler()
	return limitAdminBody(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isUsersPath(req.URL.Path) {
			users.ServeHTTP(w, req)
			return
		}
		r.ServeHTTP(w, req)
	}))
}

// adminHandler is an admin endpoint, called for an authenticated caller.
type adminHandler func(w http.ResponseWriter, r *http.Request, caller AdminCaller)

// requestIDKey carries the request ID (set by logRequests as the
// X-Request-Id response header) into the audit log.
type requestIDKey struct{}

// authenticated admits requests carrying a configured admin token as an
// RFC 6750 §2.1 bearer token and answers every other one with 401 and a
// WWW-Authenticate challenge (RFC 6750 §3).
func (a *Admin) authenticated(h adminHandler) http.Handler {
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
			writeAdminResponse(w, a.refuse(r.Context(), clientadmin.Unauthenticated, "authenticate", mux.Vars(r)["id"], false, err))
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

// readAdminBody reads the request body: at most maxAdminBodyBytes (413
// otherwise), and, when there is one or it is required, of media type
// application/json in UTF-8 (415 otherwise). The errors carry the error
// code of the endpoint's bad bodies (bodyErrorCode).
func readAdminBody(w http.ResponseWriter, r *http.Request, required bool) ([]byte, error) {
	code := bodyErrorCode(r.URL.Path)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, newHTTPError(http.StatusRequestEntityTooLarge, code, fmt.Sprintf("The request body is larger than %d bytes.", maxAdminBodyBytes))
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

// writeAdminResponse sends resp, never cached (it may hold a secret).
func writeAdminResponse(w http.ResponseWriter, resp AdminResponse) {
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
		h.Set("Location", pathAdminClients+"/"+url.PathEscape(resp.ClientID))
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// limitAdminBody answers admin requests that declare a body larger than
// maxAdminBodyBytes with 413 and an RFC 7591 §3.2.2 error.
func limitAdminBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxAdminBodyBytes {
			writeAdminResponse(w, jsonResponse(http.StatusRequestEntityTooLarge, &clientadmin.Error{Code: bodyErrorCode(r.URL.Path),
				Description: fmt.Sprintf("The request body is larger than %d bytes.", maxAdminBodyBytes)}, ""))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyErrorCode is the error code of a bad request body on path: RFC 7591
// §3.2.2's invalid_client_metadata for clients, invalid_request for users.
func bodyErrorCode(path string) string {
	if isUsersPath(path) {
		return clientadmin.ErrInvalidRequest.Code
	}
	return clientadmin.ErrInvalidMetadata.Code
}

// readWrite reads the Idempotency-Key and the body of a write, or audits
// and answers the refusal.
func (a *Admin) readWrite(w http.ResponseWriter, r *http.Request, caller AdminCaller, action, id string, required bool) (key string, body []byte, ok bool) {
	key, err := idempotencyKeyHeader(r)
	if err == nil {
		body, err = readAdminBody(w, r, required)
	}
	if err != nil {
		writeAdminResponse(w, a.refuse(r.Context(), caller, action, id, key != "", err))
		return "", nil, false
	}
	return key, body, true
}

func (a *Admin) handleCreate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	if key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionCreate, "", true); ok {
		writeAdminResponse(w, a.CreateClient(r.Context(), caller, key, body))
	}
}

func (a *Admin) handleUpdate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	id := mux.Vars(r)["id"]
	if key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionUpdate, id, true); ok {
		writeAdminResponse(w, a.UpdateClient(r.Context(), caller, id, key, body))
	}
}

func (a *Admin) handleRotate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	id := mux.Vars(r)["id"]
	key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionRotateSecret, id, false)
	if !ok {
		return
	}
	// The request has no parameters; an empty object is accepted.
	if err := clientadmin.DecodeEmpty(body); err != nil {
		writeAdminResponse(w, a.refuse(r.Context(), caller, clientadmin.ActionRotateSecret, id, key != "", err))
		return
	}
	writeAdminResponse(w, a.RotateClientSecret(r.Context(), caller, id, key))
}

func (a *Admin) handleGet(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	writeAdminResponse(w, a.GetClient(r.Context(), caller, mux.Vars(r)["id"]))
}

func (a *Admin) handleDelete(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	writeAdminResponse(w, a.DeleteClient(r.Context(), caller, mux.Vars(r)["id"]))
}

func (a *Admin) handleList(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	fail := func(desc string) {
		writeAdminResponse(w, a.refuse(r.Context(), caller, clientadmin.ActionList, "", false,
			&clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code, Description: desc}))
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail("The query string is not valid.")
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fail(fmt.Sprintf("limit must be between 1 and %d.", clientadmin.MaxListLimit))
			return
		}
		limit = n
	}
	writeAdminResponse(w, a.ListClients(r.Context(), caller, limit, q.Get("cursor")))
}
