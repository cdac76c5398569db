package oauth

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
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
	"github.com/ory/fosite"

	"github.com/authd/authd/storage"
)

// The admin API (docs/architecture.md, "Admin writes"):
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

const (
	// maxAdminBodyBytes bounds admin request bodies; larger ones get 413.
	maxAdminBodyBytes = 32 << 10
	// defaultListLimit and maxListLimit bound GET /admin/clients pages.
	defaultListLimit = 50
	maxListLimit     = 200
	// adminWriteTimeout bounds one admin write, which is not canceled when
	// the caller disconnects (see write).
	adminWriteTimeout = 15 * time.Second
)

// Admin API error codes beyond RFC 7591 §3.2.2's invalid_redirect_uri and
// invalid_client_metadata.
const (
	errCodeInvalidMetadata = "invalid_client_metadata"
	errCodeInvalidRequest  = "invalid_request"
	errCodeInvalidToken    = "invalid_token" // RFC 6750 §3.1
	errCodeNotFound        = "not_found"
	errCodeKeyInFlight     = "idempotency_key_in_flight"
	errCodeKeyReused       = "idempotency_key_reused"
	errCodeConflict        = "conflict"
	errCodeServerError     = "server_error"
)

// AdminResponse is the answer to one admin operation: exactly what the HTTP
// API sends and what "authd clients" prints.
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

	errCode string // the error code, for the audit log
}

// ClientList is the body of GET /admin/clients: one page of clients ordered
// by client_id, and the opaque cursor of the next page (absent on the last).
type ClientList struct {
	Clients    []*ClientInformation `json:"clients"`
	NextCursor string               `json:"next_cursor,omitempty"`
}

// AdminCaller identifies who makes an admin request by a keyed fingerprint
// of its credential, never the credential itself. It scopes Idempotency-Keys
// and names the caller ("who") in the audit log. Obtain one from
// Admin.AuthenticateToken or Admin.LocalCaller.
type AdminCaller struct {
	fingerprint []byte
	name        string
}

// String returns the caller's audit name: "token:" and 16 hex digits of the
// fingerprint of an admin token, or "local:" and the name of a local caller.
func (c AdminCaller) String() string { return c.name }

// Admin manages OAuth clients. It is the one code path behind the /admin/
// HTTP API and the "authd clients" commands. It is safe for concurrent use.
type Admin struct {
	store  storage.Store
	hasher fosite.Hasher
	keys   *idempotencyKeys
	tokens [][]byte // fingerprints of the configured admin tokens
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger
}

// NewAdmin returns the client administration service. From cfg it uses
// Secret (required, at least 32 bytes: client secrets are hashed, and
// Idempotency-Keys hashed and responses sealed, with keys derived from it),
// AdminTokens and IdempotencyKeyTTL (default 24h); from deps Store
// (required), Logger (the audit log) and Now.
func NewAdmin(cfg Config, deps Deps) (*Admin, error) {
	if len(cfg.Secret) < minSecretLen {
		return nil, fmt.Errorf("secret: must be at least %d bytes, got %d", minSecretLen, len(cfg.Secret))
	}
	if deps.Store == nil {
		return nil, errors.New("oauth: Deps.Store is required")
	}
	return newAdmin(cfg, deps), nil
}

// newAdmin builds an Admin from settings already checked.
func newAdmin(cfg Config, deps Deps) *Admin {
	a := &Admin{
		store:  deps.Store,
		hasher: NewSecretHasher(cfg.Secret),
		keys:   newIdempotencyKeys(cfg.Secret),
		ttl:    cfg.IdempotencyKeyTTL,
		now:    deps.Now,
		log:    deps.Logger,
	}
	if a.ttl <= 0 {
		a.ttl = 24 * time.Hour
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	for _, t := range cfg.AdminTokens {
		if t != "" {
			a.tokens = append(a.tokens, a.keys.credentialFingerprint("token", t))
		}
	}
	return a
}

// AuthenticateToken returns the caller presenting an admin bearer token and
// whether the token is one of the configured admin tokens. Fingerprints of
// equal length are compared, each in constant time, so neither the
// configured tokens nor their lengths leak through timing.
func (a *Admin) AuthenticateToken(token string) (AdminCaller, bool) {
	fp := a.keys.credentialFingerprint("token", token)
	ok := 0
	for _, t := range a.tokens {
		ok |= subtle.ConstantTimeCompare(fp, t)
	}
	return AdminCaller{fingerprint: fp, name: "token:" + hex.EncodeToString(fp[:8])}, ok == 1 && token != ""
}

// LocalCaller returns the caller for a local operator with direct access to
// the database and the system secret, such as the "authd clients" commands.
func (a *Admin) LocalCaller(name string) AdminCaller {
	return AdminCaller{fingerprint: a.keys.credentialFingerprint("local", name), name: "local:" + name}
}

// ---- operations ----

// CreateClient registers a client from RFC 7591 §2 metadata (JSON in body,
// plus skip_consent) with a generated client_id and, for a confidential
// client, a generated client_secret of 256 bits stored only as its keyed
// hash. It answers 201 with the RFC 7591 §3.2.1 client information, the only
// time the secret is shown; 400 with an RFC 7591 §3.2.2 error for invalid
// metadata.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (a *Admin) CreateClient(ctx context.Context, caller AdminCaller, idempotencyKey string, body []byte) AdminResponse {
	const action = "client.create"
	var meta ClientMetadata
	canonical, errResp := decodeAdminJSON(body, &meta)
	if errResp == nil {
		errResp = registrationErrorResponse(validateMetadata(&meta))
	}
	if errResp != nil {
		return a.finish(ctx, caller, action, "", idempotencyKey != "", *errResp)
	}
	return a.write(ctx, caller, writeOp{
		action:    action,
		endpoint:  http.MethodPost + " " + pathAdminClients,
		idemKey:   idempotencyKey,
		canonical: canonical,
		do: func(ctx context.Context) (int, any, string, error) {
			info, err := createClient(ctx, a.store, a.hasher, meta, a.now())
			if err != nil {
				return 0, nil, "", err
			}
			return http.StatusCreated, info, info.ClientID, nil
		},
	})
}

// UpdateClient replaces every metadata field of client id (RFC 7592 §2.2:
// omitted fields take their defaults). The body may repeat the client_id,
// which must then match. The secret is kept; a client that becomes public
// loses it, and a public client that becomes confidential gets a new one,
// shown in this response only. It answers 200 with the client information,
// 404 for an unknown client, 400 for invalid metadata.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (a *Admin) UpdateClient(ctx context.Context, caller AdminCaller, id, idempotencyKey string, body []byte) AdminResponse {
	const action = "client.update"
	var req struct {
		ClientID string `json:"client_id,omitempty"`
		ClientMetadata
	}
	canonical, errResp := decodeAdminJSON(body, &req)
	if errResp == nil && req.ClientID != "" && req.ClientID != id {
		// RFC 7592 §2.2: the client_id in the body must match.
		r := errorResponse(http.StatusBadRequest, errCodeInvalidMetadata, "The client_id in the body does not match the client being updated (RFC 7592 §2.2).")
		errResp = &r
	}
	meta := req.ClientMetadata
	if errResp == nil {
		errResp = registrationErrorResponse(validateMetadata(&meta))
	}
	if errResp != nil {
		return a.finish(ctx, caller, action, id, idempotencyKey != "", *errResp)
	}
	return a.write(ctx, caller, writeOp{
		action:    action,
		endpoint:  http.MethodPut + " " + pathAdminClients + "/" + id,
		clientID:  id,
		idemKey:   idempotencyKey,
		canonical: canonical,
		do: func(ctx context.Context) (int, any, string, error) {
			old, err := a.lockClient(ctx, id)
			if err != nil {
				return 0, nil, id, err
			}
			c := clientFromMetadata(id, meta, old.CreatedAt, a.now())
			var secret string
			switch {
			case c.IsPublic():
				// A public client has no secret (RFC 6749 §2.1).
			case len(old.SecretHash) > 0:
				c.SecretHash = old.SecretHash
			default:
				if secret, err = issueSecret(ctx, a.hasher, c); err != nil {
					return 0, nil, id, err
				}
			}
			if err := a.store.UpdateClient(ctx, c); err != nil {
				return 0, nil, id, err
			}
			info := clientInformation(c)
			info.ClientSecret = secret
			return http.StatusOK, info, id, nil
		},
	})
}

// RotateClientSecret replaces the client_secret of confidential client id
// with a new one of 256 bits; the old secret stops working at once. It
// answers 200 with the client information holding the new secret, the only
// time it is shown; 404 for an unknown client; 400 for a public client.
//
// idempotencyKey, if not empty, makes the request safe to retry: see write.
func (a *Admin) RotateClientSecret(ctx context.Context, caller AdminCaller, id, idempotencyKey string) AdminResponse {
	return a.write(ctx, caller, writeOp{
		action:    "client.rotate_secret",
		endpoint:  http.MethodPost + " " + pathAdminClients + "/" + id + "/secret",
		clientID:  id,
		idemKey:   idempotencyKey,
		canonical: []byte("{}"),
		do: func(ctx context.Context) (int, any, string, error) {
			c, err := a.lockClient(ctx, id)
			if err != nil {
				return 0, nil, id, err
			}
			if c.IsPublic() {
				return 0, nil, id, &adminError{http.StatusBadRequest, errCodeInvalidRequest,
					"The client is public (token_endpoint_auth_method none) and has no secret to rotate."}
			}
			secret, err := issueSecret(ctx, a.hasher, c)
			if err != nil {
				return 0, nil, id, err
			}
			c.UpdatedAt = a.now()
			if err := a.store.UpdateClient(ctx, c); err != nil {
				return 0, nil, id, err
			}
			info := clientInformation(c)
			info.ClientSecret = secret
			return http.StatusOK, info, id, nil
		},
	})
}

// GetClient answers 200 with the client information of client id (without
// secret), or 404.
func (a *Admin) GetClient(ctx context.Context, caller AdminCaller, id string) AdminResponse {
	const action = "client.get"
	c, err := a.getClient(ctx, id)
	if err != nil {
		return a.finish(ctx, caller, action, id, false, a.errorFor(ctx, action, err))
	}
	return a.finish(ctx, caller, action, id, false, a.jsonResponse(ctx, action, http.StatusOK, clientInformation(c)))
}

// ListClients answers 200 with a ClientList: up to limit clients (0 means
// 50; at most 200) after cursor ("" for the first page), ordered by
// client_id. The order is stable, so paging visits every client that exists
// throughout exactly once. A bad limit or cursor gets 400.
func (a *Admin) ListClients(ctx context.Context, caller AdminCaller, limit int, cursor string) AdminResponse {
	const action = "client.list"
	fail := func(desc string) AdminResponse {
		return a.finish(ctx, caller, action, "", false, errorResponse(http.StatusBadRequest, errCodeInvalidRequest, desc))
	}
	if limit == 0 {
		limit = defaultListLimit
	}
	if limit < 1 || limit > maxListLimit {
		return fail(fmt.Sprintf("limit must be between 1 and %d.", maxListLimit))
	}
	after, ok := decodeCursor(cursor)
	if !ok {
		return fail("The cursor is not valid; use next_cursor from the previous page.")
	}
	clients, err := a.store.ListClients(ctx, after, limit+1)
	if err != nil {
		return a.finish(ctx, caller, action, "", false, a.errorFor(ctx, action, err))
	}
	list := ClientList{Clients: make([]*ClientInformation, 0, len(clients))}
	if len(clients) > limit {
		clients = clients[:limit]
		list.NextCursor = encodeCursor(clients[limit-1].ID)
	}
	for _, c := range clients {
		list.Clients = append(list.Clients, clientInformation(c))
	}
	return a.finish(ctx, caller, action, "", false, a.jsonResponse(ctx, action, http.StatusOK, list))
}

// DeleteClient deletes client id together with every authorization code,
// access and refresh token and PKCE session issued to it, in one
// transaction: its tokens are inactive from then on (RFC 7662 §2.2). It
// answers 204, or 404 for an unknown client.
func (a *Admin) DeleteClient(ctx context.Context, caller AdminCaller, id string) AdminResponse {
	const action = "client.delete"
	if err := a.store.DeleteClient(ctx, id); err != nil {
		return a.finish(ctx, caller, action, id, false, a.errorFor(ctx, action, err))
	}
	return a.finish(ctx, caller, action, id, false, AdminResponse{Status: http.StatusNoContent, ClientID: id})
}

// lockClient locks client id for the rest of the write's transaction, then
// reads it, so concurrent read-modify-writes (an update and a rotation)
// apply one after the other and none is lost.
func (a *Admin) lockClient(ctx context.Context, id string) (*storage.Client, error) {
	if err := a.store.LockClient(ctx, id); err != nil {
		return nil, err
	}
	return a.getClient(ctx, id)
}

// getClient returns the stored client or an error matching
// storage.ErrNotFound.
func (a *Admin) getClient(ctx context.Context, id string) (*storage.Client, error) {
	fc, err := a.store.GetClient(ctx, id)
	if err != nil {
		return nil, err
	}
	c, ok := fc.(*storage.Client)
	if !ok {
		return nil, fmt.Errorf("oauth: store returned a %T for client %q", fc, id)
	}
	return c, nil
}

// ---- idempotent writes ----

// writeOp is one admin write.
type writeOp struct {
	action    string // audit name, e.g. "client.create"
	endpoint  string // Idempotency-Key scope, e.g. "POST /admin/clients"
	clientID  string // the client concerned, when known beforehand
	idemKey   string // the raw Idempotency-Key; "" for none
	canonical []byte // the canonical JSON of the request body
	// do performs the write with the transaction's context and returns the
	// status and the value to send as JSON, and the client concerned.
	do func(ctx context.Context) (status int, v any, clientID string, err error)
}

// write runs op in one transaction. With an Idempotency-Key (docs/architecture.md,
// "Admin writes"), in that same transaction: claim the key (scoped to the
// caller and the endpoint, with the hash of the canonical body), do the
// work, store the status and the sealed body, commit. Then:
//
//   - a retry with the same key and body gets the stored status and body,
//     byte for byte (the same client_secret);
//   - the same key with another body gets 422;
//   - the same key while the first request is in flight gets 409;
//   - a request that fails (validation, 404, any error) rolls back and
//     leaves no key: it can be retried with the same key.
//
// The write is not canceled when the caller goes away (it is bounded by
// adminWriteTimeout instead): a client that timed out and retries then
// finds the stored response rather than a half-done request.
func (a *Admin) write(ctx context.Context, caller AdminCaller, op writeOp) AdminResponse {
	hasKey := op.idemKey != ""
	finish := func(resp AdminResponse) AdminResponse {
		if resp.ClientID == "" {
			resp.ClientID = op.clientID
		}
		return a.finish(ctx, caller, op.action, resp.ClientID, hasKey, resp)
	}
	var rawKey string
	if hasKey {
		k, err := parseIdempotencyKey(op.idemKey)
		if err != nil {
			return finish(errorResponse(http.StatusBadRequest, errCodeInvalidRequest, upperFirst(err.Error())+"."))
		}
		rawKey = k
	}

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminWriteTimeout)
	defer cancel()
	tx, err := a.store.BeginTX(wctx)
	if err != nil {
		return finish(a.errorFor(ctx, op.action, err))
	}
	// After Commit this is a no-op; on every other path it discards the
	// claim and the work.
	defer func() { _ = a.store.Rollback(tx) }()

	var key storage.IdempotencyKey
	if hasKey {
		now := a.now()
		key = storage.IdempotencyKey{
			Credential: caller.fingerprint,
			Endpoint:   op.endpoint,
			KeyHash:    a.keys.keyHash(rawKey),
		}
		stored, claimed, err := a.store.ClaimIdempotencyKey(tx, storage.IdempotencyClaim{
			IdempotencyKey: key,
			RequestHash:    a.keys.requestHash(op.canonical),
			CreatedAt:      now,
			ExpiresAt:      now.Add(a.ttl),
		})
		switch {
		case errors.Is(err, storage.ErrIdempotencyInFlight):
			return finish(errorResponse(http.StatusConflict, errCodeKeyInFlight,
				"A request with this Idempotency-Key is still being processed; retry later."))
		case errors.Is(err, storage.ErrIdempotencyKeyReused):
			return finish(errorResponse(http.StatusUnprocessableEntity, errCodeKeyReused,
				"This Idempotency-Key was already used for a different request."))
		case err != nil:
			return finish(a.errorFor(ctx, op.action, err))
		case !claimed:
			body, err := a.keys.openResponse(rawKey, stored)
			if err != nil {
				return finish(a.errorFor(ctx, op.action, err))
			}
			var ref struct {
				ClientID string `json:"client_id"`
			}
			_ = json.Unmarshal(body, &ref)
			return finish(AdminResponse{Status: stored.Status, Body: body, Replayed: true, ClientID: ref.ClientID})
		}
	}

	status, v, clientID, err := op.do(tx)
	if err != nil {
		resp := a.errorFor(ctx, op.action, err)
		resp.ClientID = clientID
		return finish(resp)
	}
	resp := a.jsonResponse(ctx, op.action, status, v)
	resp.ClientID = clientID
	if resp.Status >= 300 {
		return finish(resp) // encoding failed: roll back
	}
	if hasKey {
		sealed, err := a.keys.sealResponse(rawKey, key, resp.Status, resp.Body)
		if err == nil {
			err = a.store.CompleteIdempotencyKey(tx, key, resp.Status, sealed)
		}
		if err != nil {
			return finish(a.errorFor(ctx, op.action, err))
		}
	}
	if err := a.store.Commit(tx); err != nil {
		return finish(a.errorFor(ctx, op.action, err))
	}
	return finish(resp)
}

// ---- responses, errors and the audit log ----

// adminError is an admin API error with its status and RFC 7591 §3.2.2
// style code.
type adminError struct {
	status            int
	code, description string
}

func (e *adminError) Error() string { return e.code + ": " + e.description }

// errorResponse returns an RFC 7591 §3.2.2 error response.
func errorResponse(status int, code, description string) AdminResponse {
	body, _ := json.Marshal(RegistrationError{Code: code, Description: description})
	return AdminResponse{Status: status, Body: append(body, '\n'), errCode: code}
}

// registrationErrorResponse turns a *RegistrationError (RFC 7591 §3.2.2)
// into a 400 response, and nil into nil.
func registrationErrorResponse(err error) *AdminResponse {
	if err == nil {
		return nil
	}
	var re *RegistrationError
	if !errors.As(err, &re) {
		re = &RegistrationError{Code: errCodeInvalidMetadata, Description: err.Error()}
	}
	resp := errorResponse(http.StatusBadRequest, re.Code, re.Description)
	return &resp
}

// errorFor maps an error of an operation to its response: RFC 7591 errors
// 400, unknown clients 404, serialization conflicts 409, and everything
// else 500, logged here once (never with secrets, which no error carries).
func (a *Admin) errorFor(ctx context.Context, action string, err error) AdminResponse {
	var (
		re *RegistrationError
		ae *adminError
	)
	switch {
	case errors.As(err, &re):
		return *registrationErrorResponse(re)
	case errors.As(err, &ae):
		return errorResponse(ae.status, ae.code, ae.description)
	case errors.Is(err, storage.ErrNotFound):
		return errorResponse(http.StatusNotFound, errCodeNotFound, "No client with this client_id.")
	case errors.Is(err, storage.ErrSerializationFailure):
		return errorResponse(http.StatusConflict, errCodeConflict, "The request conflicted with a concurrent one; retry it.")
	}
	a.log.LogAttrs(ctx, slog.LevelError, "admin request failed", slog.String("what", action), slog.Any("error", err))
	return errorResponse(http.StatusInternalServerError, errCodeServerError, "The request could not be completed.")
}

// jsonResponse encodes v as the body of a response with status.
func (a *Admin) jsonResponse(ctx context.Context, action string, status int, v any) AdminResponse {
	body, err := json.Marshal(v)
	if err != nil {
		return a.errorFor(ctx, action, fmt.Errorf("oauth: encode admin response: %w", err))
	}
	return AdminResponse{Status: status, Body: append(body, '\n')}
}

// finish writes the audit event of an admin request and returns resp. The
// event names who (the caller's credential fingerprint), what, the
// client_id and the outcome; never a secret, a token or an
// Idempotency-Key.
func (a *Admin) finish(ctx context.Context, caller AdminCaller, action, clientID string, idempotencyKey bool, resp AdminResponse) AdminResponse {
	if resp.ClientID == "" {
		resp.ClientID = clientID
	}
	attrs := make([]slog.Attr, 0, 8)
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		attrs = append(attrs, slog.String("request_id", id))
	}
	attrs = append(attrs,
		slog.String("who", caller.String()),
		slog.String("what", action),
		slog.String("client_id", resp.ClientID),
		slog.Int("status", resp.Status),
		slog.Bool("idempotency_key", idempotencyKey),
		slog.Bool("replayed", resp.Replayed),
	)
	if resp.errCode != "" {
		attrs = append(attrs, slog.String("error", resp.errCode))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "admin audit", attrs...)
	return resp
}

// decodeAdminJSON decodes body, which must be one JSON object with only
// known members, into v, and returns the canonical form of the decoded
// value (canonicalJSON). It returns a 400 invalid_client_metadata response
// otherwise.
func decodeAdminJSON(body []byte, v any) ([]byte, *AdminResponse) {
	fail := func(desc string) ([]byte, *AdminResponse) {
		r := errorResponse(http.StatusBadRequest, errCodeInvalidMetadata, desc)
		return nil, &r
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fail("The request body must be a JSON object of client metadata (RFC 7591 §2).")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			syn *json.SyntaxError
			typ *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
			return fail("The request body is not valid JSON.")
		case errors.As(err, &typ):
			return fail(fmt.Sprintf("The member %q has the wrong type.", typ.Field))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			// encoding/json has no typed error for unknown fields.
			return fail(fmt.Sprintf("Unknown client metadata %s (RFC 7591 §2).", strings.TrimPrefix(err.Error(), "json: unknown field ")))
		}
		return fail("The request body is not valid client metadata.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fail("The request body must hold exactly one JSON object.")
	}
	// The request hash is over what was decoded, not the raw members:
	// encoding/json matches member names case-insensitively (the last
	// wins), so two bodies that differ only there would otherwise hash
	// alike while meaning different things, or differ while meaning the
	// same. canonicalJSON then fixes the member order.
	decoded, err := json.Marshal(v)
	if err != nil {
		return fail("The request body is not valid client metadata.")
	}
	canonical, err := canonicalJSON(decoded)
	if err != nil {
		return fail("The request body is not valid JSON.")
	}
	return canonical, nil
}

// encodeCursor returns the opaque cursor of the page after client_id after.
func encodeCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{1}, after...))
}

// decodeCursor reverses encodeCursor; "" is the first page.
func decodeCursor(cursor string) (string, bool) {
	if cursor == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 2 || b[0] != 1 {
		return "", false
	}
	return string(b[1:]), true
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// ---- HTTP ----

// adminRoutes registers the admin API on r.
func (s *Server) adminRoutes(r *mux.Router) {
	a := s.admin
	r.Handle(pathAdminClients, a.authenticated(a.handleCreate)).Methods(http.MethodPost)
	r.Handle(pathAdminClients, a.authenticated(a.handleList)).Methods(http.MethodGet)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleGet)).Methods(http.MethodGet)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleUpdate)).Methods(http.MethodPut)
	r.Handle(pathAdminClients+"/{id}", a.authenticated(a.handleDelete)).Methods(http.MethodDelete)
	r.Handle(pathAdminClients+"/{id}/secret", a.authenticated(a.handleRotate)).Methods(http.MethodPost)
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
			resp := errorResponse(http.StatusUnauthorized, errCodeInvalidToken, "An admin bearer token is required.")
			a.finish(r.Context(), AdminCaller{name: "unauthenticated"}, "authenticate", mux.Vars(r)["id"], false, resp)
			writeAdminResponse(w, resp)
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
// or a 400 response for an empty or repeated header.
func idempotencyKeyHeader(r *http.Request) (string, *AdminResponse) {
	vs := r.Header.Values("Idempotency-Key")
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1 || strings.TrimSpace(vs[0]) == "":
		resp := errorResponse(http.StatusBadRequest, errCodeInvalidRequest, "Send exactly one non-empty Idempotency-Key header.")
		return "", &resp
	}
	return strings.TrimSpace(vs[0]), nil
}

// readAdminBody reads the request body: at most maxAdminBodyBytes (413
// otherwise), and, when there is one or it is required, of media type
// application/json in UTF-8 (415 otherwise). Errors are RFC 7591 §3.2.2
// responses.
func readAdminBody(w http.ResponseWriter, r *http.Request, required bool) ([]byte, *AdminResponse) {
	fail := func(status int, desc string) ([]byte, *AdminResponse) {
		resp := errorResponse(status, errCodeInvalidMetadata, desc)
		return nil, &resp
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", maxAdminBodyBytes))
		}
		return fail(http.StatusBadRequest, "The request body could not be read.")
	}
	if len(body) == 0 && !required {
		return nil, nil
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || (ok && !strings.EqualFold(cs, "utf-8")) {
		return fail(http.StatusUnsupportedMediaType, "The request body must be application/json (RFC 7591 §3.1).")
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
	if resp.Status == http.StatusCreated && resp.ClientID != "" {
		h.Set("Location", pathAdminClients+"/"+url.PathEscape(resp.ClientID))
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// limitAdminBody answers admin requests that declare a body larger than
// maxAdminBodyBytes with 413 and an RFC 7591 §3.2.2 error, before the
// generic body limit (whose error is an RFC 6749 one) sees them.
func limitAdminBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/admin/") && r.ContentLength > maxAdminBodyBytes {
			writeAdminResponse(w, errorResponse(http.StatusRequestEntityTooLarge, errCodeInvalidMetadata,
				fmt.Sprintf("The request body is larger than %d bytes.", maxAdminBodyBytes)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Admin) handleCreate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	key, errResp := idempotencyKeyHeader(r)
	var body []byte
	if errResp == nil {
		body, errResp = readAdminBody(w, r, true)
	}
	if errResp != nil {
		writeAdminResponse(w, a.finish(r.Context(), caller, "client.create", "", key != "", *errResp))
		return
	}
	writeAdminResponse(w, a.CreateClient(r.Context(), caller, key, body))
}

func (a *Admin) handleUpdate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	id := mux.Vars(r)["id"]
	key, errResp := idempotencyKeyHeader(r)
	var body []byte
	if errResp == nil {
		body, errResp = readAdminBody(w, r, true)
	}
	if errResp != nil {
		writeAdminResponse(w, a.finish(r.Context(), caller, "client.update", id, key != "", *errResp))
		return
	}
	writeAdminResponse(w, a.UpdateClient(r.Context(), caller, id, key, body))
}

func (a *Admin) handleRotate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	id := mux.Vars(r)["id"]
	key, errResp := idempotencyKeyHeader(r)
	var body []byte
	if errResp == nil {
		body, errResp = readAdminBody(w, r, false)
	}
	if errResp == nil && body != nil {
		// The request has no parameters; an empty object is accepted.
		var none struct{}
		_, errResp = decodeAdminJSON(body, &none)
	}
	if errResp != nil {
		writeAdminResponse(w, a.finish(r.Context(), caller, "client.rotate_secret", id, key != "", *errResp))
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
		writeAdminResponse(w, a.finish(r.Context(), caller, "client.list", "", false,
			errorResponse(http.StatusBadRequest, errCodeInvalidRequest, desc)))
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
			fail(fmt.Sprintf("limit must be between 1 and %d.", maxListLimit))
			return
		}
		limit = n
	}
	writeAdminResponse(w, a.ListClients(r.Context(), caller, limit, q.Get("cursor")))
}
