package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

// The admin API's user endpoints: a thin HTTP adapter over identity.Service
// (the operations, PRECIS, the revocations) and clientadmin.Service.Write
// (the Idempotency-Key engine the client endpoints use, docs/architecture.md,
// "Admin writes"). This file only maps HTTP onto them and their typed
// errors onto status codes.
//
//	POST   /admin/users                          create → 201, the user with its sub
//	GET    /admin/users?limit&cursor             list, ordered by username
//	GET    /admin/users/{username}               read
//	PUT    /admin/users/{username}               profile (full replace) and, with "username", rename
//	POST   /admin/users/{username}/password      new password; ends sessions, revokes tokens
//	POST   /admin/users/{username}/disable       no more sign-ins; ends sessions, revokes tokens
//	POST   /admin/users/{username}/enable        sign-ins again
//	DELETE /admin/users/{username}               delete; ends sessions, revokes tokens → 204
//	GET    /admin/users/{username}/sessions      the valid browser sessions
//	POST   /admin/users/{username}/sign-out      end every session (tokens stay)
//	GET    /admin/users/{username}/consents      the remembered consents
//	DELETE /admin/users/{username}/consents/{client_id}
//	                                             withdraw; revokes that client's tokens → 204
//
// Every write honours Idempotency-Key with the client endpoints' rules. The
// {username} of a path is percent-decoded and compared after PRECIS
// UsernameCaseMapped (RFC 8265 §3.3) by the identity service, so
// /admin/users/Alice is alice. Errors are {"error", "error_description"}
// objects as for clients (RFC 7591 §3.2.2's shape):
//
//	400 invalid_request   a body, parameter or Idempotency-Key that is not valid
//	400 invalid_username  refused by PRECIS UsernameCaseMapped, empty or too long
//	400 invalid_password  refused by PRECIS OpaqueString (RFC 8265 §4.2), or not 8–256 bytes
//	400 invalid_profile   email or name not acceptable
//	404 not_found         no such user, or no consent of the user for the client
//	409 user_exists       the username is taken (create, rename): a conflict with
//	                      the current state of the resource (RFC 9110 §15.5.10)
//	409 idempotency_key_in_flight, 422 idempotency_key_reused, 409 conflict
//
// A password is never logged, never in an answer and, in the Idempotency-Key
// table, only inside a request fingerprint keyed with the raw key
// (clientadmin.Write.Confidential).

// pathAdminUsers is the admin API's user collection.
const pathAdminUsers = "/admin/users"

// isUsersPath reports whether path is the user collection or below it.
func isUsersPath(path string) bool {
	return path == pathAdminUsers || strings.HasPrefix(path, pathAdminUsers+"/")
}

// The audit names of the user operations.
const (
	ActionUserCreate        = "user.create"
	ActionUserList          = "user.list"
	ActionUserGet           = "user.get"
	ActionUserUpdate        = "user.update"
	ActionUserSetPassword   = "user.set_password"
	ActionUserDisable       = "user.disable"
	ActionUserEnable        = "user.enable"
	ActionUserDelete        = "user.delete"
	ActionUserSessions      = "user.sessions"
	ActionUserSignOut       = "user.sign_out"
	ActionUserConsents      = "user.consents"
	ActionUserRevokeConsent = "user.revoke_consent"
)

// User list bounds.
const (
	defaultUserListLimit = 50
	maxUserListLimit     = 200
)

// UserList is the body of GET /admin/users: one page of users ordered by
// username, and the opaque cursor of the next page (absent on the last).
type UserList struct {
	Users      []identity.User `json:"users"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// CreateUserRequest is the body of POST /admin/users.
type CreateUserRequest struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`
}

// UpdateUserRequest is the body of PUT /admin/users/{username}: the profile
// (full replace: an omitted field is cleared) and optionally a new
// username. Disabling and passwords have their own endpoints, because
// they end sessions and revoke tokens.
type UpdateUserRequest struct {
	// Username, when set and different (after PRECIS) from the path's,
	// renames the user; the sub, tokens, sessions and consents stay.
	Username      string `json:"username,omitempty"`
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified,omitempty"`
	Name          string `json:"name,omitempty"`
}

// passwordRequest is the body of POST /admin/users/{username}/password.
type passwordRequest struct {
	Password string `json:"password"`
}

// signOutResult is the answer of POST /admin/users/{username}/sign-out.
type signOutResult struct {
	Subject       string `json:"sub"`
	SessionsEnded int    `json:"sessions_ended"`
}

// userAudit is the audit event of one user operation: who (the caller's
// credential fingerprint), what, the user's (prepared) username and sub
// when known, the client of a consent; never a password, a token or an
// Idempotency-Key.
type userAudit struct {
	who, what, username, sub, clientID string
	idempotencyKey, replayed           bool
}

// auditUser writes ev, with the answer's status and error, to the server
// log as an "admin audit" event (the client events' shape).
func (a *Admin) auditUser(ctx context.Context, ev userAudit, status int, err error) {
	attrs := make([]slog.Attr, 0, 10)
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		attrs = append(attrs, slog.String("request_id", id))
	}
	attrs = append(attrs, slog.String("who", ev.who), slog.String("what", ev.what), slog.String("username", ev.username))
	if ev.sub != "" {
		attrs = append(attrs, slog.String("sub", ev.sub))
	}
	if ev.clientID != "" {
		attrs = append(attrs, slog.String("client_id", ev.clientID))
	}
	attrs = append(attrs, slog.Int("status", status), slog.Bool("idempotency_key", ev.idempotencyKey), slog.Bool("replayed", ev.replayed))
	if err != nil {
		attrs = append(attrs, slog.String("error", clientadmin.ErrorCode(err)))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "admin audit", attrs...)
}

// userFailure maps an error of the identity service (or of the engine, or
// storage) onto the answer it gets; anything unknown stays as it is and
// becomes a logged 500.
func userFailure(err error) error {
	var (
		he      *httpError
		refused *idempotency.Error
	)
	switch {
	case errors.As(err, &he):
		return err
	case errors.As(err, &refused):
		code := clientadmin.ErrInvalidRequest.Code
		switch {
		case errors.Is(refused, idempotency.ErrInFlight):
			code = clientadmin.ErrKeyInFlight.Code
		case errors.Is(refused, idempotency.ErrKeyReused):
			code = clientadmin.ErrKeyReused.Code
		}
		return &clientadmin.Error{Code: code, Description: refused.Description}
	case errors.Is(err, identity.ErrInvalidUsername):
		return newHTTPError(http.StatusBadRequest, "invalid_username", fmt.Sprintf(
			"The username is not acceptable: 1 to %d bytes after PRECIS UsernameCaseMapped (RFC 8265 §3.3), letters, digits and symbols such as . _ - @, no spaces or invisible characters.", identity.MaxUsernameLen))
	case errors.Is(err, identity.ErrInvalidPassword):
		return newHTTPError(http.StatusBadRequest, "invalid_password", fmt.Sprintf(
			"The password must be %d to %d bytes after PRECIS OpaqueString (RFC 8265 §4.2), without control characters.", identity.MinPasswordLen, identity.MaxPasswordLen))
	case errors.Is(err, identity.ErrInvalidProfile):
		return newHTTPError(http.StatusBadRequest, "invalid_profile",
			"email must be one address and name plain text, each at most 256 bytes of UTF-8 without control characters.")
	case errors.Is(err, identity.ErrUserNotFound):
		return newHTTPError(http.StatusNotFound, clientadmin.ErrNotFound.Code, "No user has this username.")
	case errors.Is(err, identity.ErrConsentNotFound):
		return newHTTPError(http.StatusNotFound, clientadmin.ErrNotFound.Code, "The user has no remembered consent for this client; its tokens for the client are revoked all the same.")
	case errors.Is(err, identity.ErrUserExists):
		return newHTTPError(http.StatusConflict, "user_exists", "The username is taken.")
	case errors.Is(err, storage.ErrSerializationFailure):
		return newHTTPError(http.StatusConflict, clientadmin.ErrConflict.Code, "The request conflicted with a concurrent one; retry it.")
	}
	return err
}

// userRefuse audits and answers a failed user operation.
func (a *Admin) userRefuse(ctx context.Context, ev userAudit, err error) AdminResponse {
	err = userFailure(err)
	resp := a.errorResponse(ctx, err, "")
	a.auditUser(ctx, ev, resp.Status, err)
	return resp
}

// invalidRequest is a 400 invalid_request with description.
func invalidRequest(description string) error {
	return newHTTPError(http.StatusBadRequest, clientadmin.ErrInvalidRequest.Code, description)
}

// userWrite is one write of the user API, run by the Idempotency-Key engine.
type userWrite struct {
	action   string
	endpoint string // the key's scope: method and path, {username} as "*"
	username string // the prepared username of the path; "" for create
	clientID string // revoke consent only
	status   int    // of the answer on success
	// request is the decoded body (nil for none), for its canonical form.
	request any
	// confidential marks a request with a password.
	confidential bool
	// do runs the operation in the write's transaction and returns the
	// answer's body (nil for 204) and the user's sub.
	do func(ctx context.Context) (body any, sub string, err error)
}

// runUserWrite runs op under caller's Idempotency-Key, audits it and
// answers it.
func (a *Admin) runUserWrite(ctx context.Context, caller AdminCaller, key string, op userWrite) AdminResponse {
	ev := userAudit{who: caller.String(), what: op.action, username: op.username, clientID: op.clientID, idempotencyKey: key != ""}
	canonical := []byte("{}")
	if op.request != nil {
		c, err := idempotency.Canonical(op.request)
		if err != nil {
			return a.userRefuse(ctx, ev, err)
		}
		canonical = c
	}
	// The username is part of the key's scope, stored only as a keyed hash;
	// PRECIS refuses NUL in usernames, so the join is unambiguous.
	resource := op.username
	if op.clientID != "" {
		resource += "\x00" + op.clientID
	}
	res, err := a.idem.Run(ctx, idempotency.Write{
		Caller: caller, Endpoint: op.endpoint, Resource: resource, Outcome: op.status,
		Key: key, Request: canonical, Confidential: op.confidential,
		Do: func(ctx context.Context) ([]byte, error) {
			v, sub, err := op.do(ctx)
			ev.sub = sub
			if err != nil || v == nil {
				return nil, err
			}
			return encodeAdminJSON(v)
		},
	})
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	resp := AdminResponse{Status: res.Outcome, Body: res.Answer, Replayed: res.Replayed}
	var shown struct {
		Subject  string `json:"sub"`
		Username string `json:"username"`
	}
	if len(res.Answer) > 0 && json.Unmarshal(res.Answer, &shown) == nil {
		if ev.sub == "" {
			ev.sub = shown.Subject
		}
		if resp.Status == http.StatusCreated && shown.Username != "" {
			resp.Location = pathAdminUsers + "/" + url.PathEscape(shown.Username)
			ev.username = shown.Username
		}
	}
	ev.replayed = res.Replayed
	a.auditUser(ctx, ev, resp.Status, nil)
	return resp
}

// encodeAdminJSON is the JSON of an answer, with a final newline.
func encodeAdminJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("oauth: encode admin answer: %w", err)
	}
	return append(b, '\n'), nil
}

// ---- operations, as HTTP answers ----

// CreateUser creates a user from a CreateUserRequest JSON body: 201 with
// the user and its new sub (never the password or its hash).
func (a *Admin) CreateUser(ctx context.Context, caller AdminCaller, idempotencyKey string, body []byte) AdminResponse {
	ev := userAudit{who: caller.String(), what: ActionUserCreate, idempotencyKey: idempotencyKey != ""}
	var req CreateUserRequest
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	name, err := identity.PrepareUsername(req.Username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	req.Username = name // "Alice" and "alice" are one request
	return a.runUserWrite(ctx, caller, idempotencyKey, userWrite{
		action: ActionUserCreate, endpoint: "POST " + pathAdminUsers, status: http.StatusCreated,
		request: req, confidential: true,
		do: func(ctx context.Context) (any, string, error) {
			u, err := a.people.Add(ctx, identity.NewUser{Username: req.Username, Password: req.Password,
				Email: req.Email, EmailVerified: req.EmailVerified, Name: req.Name})
			return u, u.Subject, err
		},
	})
}

// UpdateUser replaces the profile of the user and, if the body names
// another username, renames the user, in one transaction: 200 with the user.
func (a *Admin) UpdateUser(ctx context.Context, caller AdminCaller, username, idempotencyKey string, body []byte) AdminResponse {
	ev := userAudit{who: caller.String(), what: ActionUserUpdate, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	var req UpdateUserRequest
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	if req.Username != "" {
		if req.Username, err = identity.PrepareUsername(req.Username); err != nil {
			return a.userRefuse(ctx, ev, err)
		}
		if req.Username == name {
			req.Username = "" // the same name: no rename, the same request
		}
	}
	return a.runUserWrite(ctx, caller, idempotencyKey, userWrite{
		action: ActionUserUpdate, endpoint: "PUT " + pathAdminUsers + "/*", username: name, status: http.StatusOK,
		request: req,
		do: func(ctx context.Context) (any, string, error) {
			current := name
			if req.Username != "" {
				u, err := a.people.Rename(ctx, name, req.Username)
				if err != nil {
					return nil, "", err
				}
				current = u.Username
			}
			u, err := a.people.SetProfile(ctx, current, req.Email, req.EmailVerified, req.Name)
			return u, u.Subject, err
		},
	})
}

// SetUserPassword replaces the user's password from a {"password": …} body
// and, in the same transaction, ends their sessions and revokes their
// codes and tokens: 200 with the user.
func (a *Admin) SetUserPassword(ctx context.Context, caller AdminCaller, username, idempotencyKey string, body []byte) AdminResponse {
	ev := userAudit{who: caller.String(), what: ActionUserSetPassword, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	var req passwordRequest
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	return a.runUserWrite(ctx, caller, idempotencyKey, userWrite{
		action: ActionUserSetPassword, endpoint: "POST " + pathAdminUsers + "/*/password", username: name, status: http.StatusOK,
		request: req, confidential: true,
		do: func(ctx context.Context) (any, string, error) {
			return a.reread(a.people.SetPassword(ctx, name, req.Password))(ctx)
		},
	})
}

// reread returns, for the result of an operation that changed the user,
// a function reading the user again in the same transaction (its
// updated_at and state as stored).
func (a *Admin) reread(u identity.User, err error) func(context.Context) (any, string, error) {
	return func(ctx context.Context) (any, string, error) {
		if err != nil {
			return nil, "", err
		}
		fresh, err := a.people.GetBySubject(ctx, u.Subject)
		return fresh, u.Subject, err
	}
}

// DisableUser stops the user's sign-ins and, in the same transaction, ends
// their sessions and revokes their codes and tokens: 200 with the user.
func (a *Admin) DisableUser(ctx context.Context, caller AdminCaller, username, idempotencyKey string) AdminResponse {
	return a.simpleUserWrite(ctx, caller, username, idempotencyKey, ActionUserDisable, "POST "+pathAdminUsers+"/*/disable", http.StatusOK,
		func(ctx context.Context, name string) (any, string, error) {
			return a.reread(a.people.Disable(ctx, name))(ctx)
		})
}

// EnableUser lets a disabled user sign in again: 200 with the user.
func (a *Admin) EnableUser(ctx context.Context, caller AdminCaller, username, idempotencyKey string) AdminResponse {
	return a.simpleUserWrite(ctx, caller, username, idempotencyKey, ActionUserEnable, "POST "+pathAdminUsers+"/*/enable", http.StatusOK,
		func(ctx context.Context, name string) (any, string, error) {
			u, err := a.people.Enable(ctx, name)
			return u, u.Subject, err
		})
}

// DeleteUser deletes the user, their sessions and consents, and revokes
// their codes and tokens, in one transaction: 204.
func (a *Admin) DeleteUser(ctx context.Context, caller AdminCaller, username, idempotencyKey string) AdminResponse {
	return a.simpleUserWrite(ctx, caller, username, idempotencyKey, ActionUserDelete, "DELETE "+pathAdminUsers+"/*", http.StatusNoContent,
		func(ctx context.Context, name string) (any, string, error) {
			u, err := a.people.Delete(ctx, name)
			return nil, u.Subject, err
		})
}

// SignOutUser ends every session of the user: 200 with their sub and how
// many sessions ended. Tokens already issued stay valid.
func (a *Admin) SignOutUser(ctx context.Context, caller AdminCaller, username, idempotencyKey string) AdminResponse {
	return a.simpleUserWrite(ctx, caller, username, idempotencyKey, ActionUserSignOut, "POST "+pathAdminUsers+"/*/sign-out", http.StatusOK,
		func(ctx context.Context, name string) (any, string, error) {
			u, err := a.people.Get(ctx, name)
			if err != nil {
				return nil, "", err
			}
			n, err := a.people.SignOut(ctx, name)
			return signOutResult{Subject: u.Subject, SessionsEnded: n}, u.Subject, err
		})
}

// RevokeUserConsent withdraws the user's consent for clientID and revokes
// the codes and tokens issued to the user for that client: 204, or 404 if
// there was no consent (the tokens are revoked all the same, as
// identity.Service.RevokeConsent does; no key is kept).
func (a *Admin) RevokeUserConsent(ctx context.Context, caller AdminCaller, username, clientID, idempotencyKey string) AdminResponse {
	ev := userAudit{who: caller.String(), what: ActionUserRevokeConsent, clientID: clientID, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	if clientID == "" {
		ev.username = name
		return a.userRefuse(ctx, ev, invalidRequest("A client_id is required."))
	}
	noConsent := false
	resp := a.runUserWrite(ctx, caller, idempotencyKey, userWrite{
		action: ActionUserRevokeConsent, endpoint: "DELETE " + pathAdminUsers + "/*/consents/*",
		username: name, clientID: clientID, status: http.StatusNoContent,
		do: func(ctx context.Context) (any, string, error) {
			err := a.people.RevokeConsent(ctx, name, clientID)
			noConsent = errors.Is(err, identity.ErrConsentNotFound)
			return nil, "", err
		},
	})
	if noConsent {
		// The 404 rolled back its write, key and all; revoke the tokens
		// outside it, as the service promises.
		if err := a.people.RevokeConsent(ctx, name, clientID); err != nil && !errors.Is(err, identity.ErrConsentNotFound) {
			return a.errorResponse(ctx, err, "")
		}
	}
	return resp
}

// simpleUserWrite runs a write without a body on the user of the path.
func (a *Admin) simpleUserWrite(ctx context.Context, caller AdminCaller, username, idempotencyKey, action, endpoint string, status int,
	do func(ctx context.Context, name string) (any, string, error)) AdminResponse {
	ev := userAudit{who: caller.String(), what: action, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	return a.runUserWrite(ctx, caller, idempotencyKey, userWrite{
		action: action, endpoint: endpoint, username: name, status: status,
		do: func(ctx context.Context) (any, string, error) { return do(ctx, name) },
	})
}

// GetUser answers 200 with the user, or 404.
func (a *Admin) GetUser(ctx context.Context, caller AdminCaller, username string) AdminResponse {
	return a.userRead(ctx, caller, ActionUserGet, username, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Get(ctx, name)
		return u, u.Subject, err
	})
}

// UserSessions answers 200 with {"sessions": […]}, the user's valid
// browser sessions, newest first (never a session's cookie reference).
func (a *Admin) UserSessions(ctx context.Context, caller AdminCaller, username string) AdminResponse {
	return a.userRead(ctx, caller, ActionUserSessions, username, func(ctx context.Context, name string) (any, string, error) {
		ss, err := a.people.Sessions(ctx, name)
		return map[string]any{"sessions": ss}, "", err
	})
}

// UserConsents answers 200 with {"consents": […]}, the user's remembered
// consents by client.
func (a *Admin) UserConsents(ctx context.Context, caller AdminCaller, username string) AdminResponse {
	return a.userRead(ctx, caller, ActionUserConsents, username, func(ctx context.Context, name string) (any, string, error) {
		cs, err := a.people.Consents(ctx, name)
		return map[string]any{"consents": cs}, "", err
	})
}

// userRead runs a read of the user of the path, audits it and answers it.
func (a *Admin) userRead(ctx context.Context, caller AdminCaller, action, username string,
	read func(ctx context.Context, name string) (any, string, error)) AdminResponse {
	ev := userAudit{who: caller.String(), what: action}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	v, sub, err := read(ctx, name)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.sub = sub
	a.auditUser(ctx, ev, http.StatusOK, nil)
	return jsonResponse(http.StatusOK, v, "")
}

// ListUsers answers 200 with a UserList page: limit 1–200 (0 is 50) users
// after cursor ("" for the first page), ordered by username.
func (a *Admin) ListUsers(ctx context.Context, caller AdminCaller, limit int, cursor string) AdminResponse {
	ev := userAudit{who: caller.String(), what: ActionUserList}
	if limit == 0 {
		limit = defaultUserListLimit
	}
	if limit < 1 || limit > maxUserListLimit {
		return a.userRefuse(ctx, ev, invalidRequest(fmt.Sprintf("limit must be between 1 and %d.", maxUserListLimit)))
	}
	after, ok := decodeUserCursor(cursor)
	if !ok {
		return a.userRefuse(ctx, ev, invalidRequest("The cursor is not valid; use next_cursor from the previous page."))
	}
	users, err := a.people.List(ctx, after, limit)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	list := UserList{Users: users}
	if len(users) == limit {
		// A full page: is there another? (identity caps a page at 200, so
		// no limit+1 read.)
		last := users[len(users)-1].Username
		more, err := a.people.List(ctx, last, 1)
		if err != nil {
			return a.userRefuse(ctx, ev, err)
		}
		if len(more) > 0 {
			list.NextCursor = encodeUserCursor(last)
		}
	}
	a.auditUser(ctx, ev, http.StatusOK, nil)
	return jsonResponse(http.StatusOK, list, "")
}

// encodeUserCursor returns the opaque cursor of the page after username.
func encodeUserCursor(after string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{1}, after...))
}

// decodeUserCursor reverses encodeUserCursor; "" is the first page.
func decodeUserCursor(cursor string) (string, bool) {
	if cursor == "" {
		return "", true
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) < 2 || b[0] != 1 || len(b) > 1+identity.MaxUsernameLen {
		return "", false
	}
	return string(b[1:]), true
}

// decodeUserJSON decodes body, which must be one JSON object with only
// known members, into v; anything else is 400 invalid_request.
func decodeUserJSON(body []byte, v any) error {
	if problem := clientadmin.DecodeObject(body, v, "user"); problem != "" {
		return invalidRequest(problem)
	}
	return nil
}

// decodeNoParameters checks the optional body of a write without
// parameters: nothing, or an empty JSON object.
func decodeNoParameters(body []byte) error {
	if body == nil {
		return nil
	}
	var none struct{}
	return decodeUserJSON(body, &none)
}

// ---- HTTP ----

// userHandler returns the router of /admin/users…. It matches the encoded
// path, so a username holding "/" (PRECIS allows it) is addressed as %2F,
// and decodes {username} and {client_id} itself.
func (a *Admin) userHandler() http.Handler {
	r := mux.NewRouter()
	r.UseEncodedPath()
	r.NotFoundHandler = a.authenticated(func(w http.ResponseWriter, _ *http.Request, _ AdminCaller) {
		writeAdminResponse(w, jsonResponse(http.StatusNotFound, &clientadmin.Error{Code: clientadmin.ErrNotFound.Code, Description: "No such endpoint."}, ""))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the resource has.
		w.Header().Set("Allow", allowedMethods(r, req))
		writeAdminResponse(w, jsonResponse(http.StatusMethodNotAllowed, &clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code,
			Description: "The HTTP method " + req.Method + " is not allowed on this endpoint."}, ""))
	})
	const user = pathAdminUsers + "/{username}"
	r.Handle(pathAdminUsers, a.authenticated(a.handleUserCreate)).Methods(http.MethodPost)
	r.Handle(pathAdminUsers, a.authenticated(a.handleUserList)).Methods(http.MethodGet)
	r.Handle(user, a.authenticated(a.handleUserGet)).Methods(http.MethodGet)
	r.Handle(user, a.authenticated(a.handleUserUpdate)).Methods(http.MethodPut)
	r.Handle(user, a.authenticated(a.handleUserDelete)).Methods(http.MethodDelete)
	r.Handle(user+"/password", a.authenticated(a.handleUserPassword)).Methods(http.MethodPost)
	r.Handle(user+"/disable", a.authenticated(a.noParameters(ActionUserDisable, a.DisableUser))).Methods(http.MethodPost)
	r.Handle(user+"/enable", a.authenticated(a.noParameters(ActionUserEnable, a.EnableUser))).Methods(http.MethodPost)
	r.Handle(user+"/sign-out", a.authenticated(a.noParameters(ActionUserSignOut, a.SignOutUser))).Methods(http.MethodPost)
	r.Handle(user+"/sessions", a.authenticated(a.handleUserSessions)).Methods(http.MethodGet)
	r.Handle(user+"/consents", a.authenticated(a.handleUserConsents)).Methods(http.MethodGet)
	r.Handle(user+"/consents/{client_id}", a.authenticated(a.handleUserRevokeConsent)).Methods(http.MethodDelete)
	return r
}

// pathVar returns the percent-decoded path variable name, or answers 400.
func (a *Admin) pathVar(w http.ResponseWriter, r *http.Request, caller AdminCaller, action, name string) (string, bool) {
	v, err := url.PathUnescape(mux.Vars(r)[name])
	if err != nil {
		writeAdminResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action},
			invalidRequest("The path is not validly percent-encoded.")))
		return "", false
	}
	return v, true
}

// readUserWrite reads the Idempotency-Key and the body of a user write, or
// audits and answers the refusal.
func (a *Admin) readUserWrite(w http.ResponseWriter, r *http.Request, caller AdminCaller, action string, required bool) (key string, body []byte, ok bool) {
	key, err := idempotencyKeyHeader(r)
	if err == nil {
		body, err = readAdminBody(w, r, required)
	}
	if err != nil {
		writeAdminResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action, idempotencyKey: key != ""}, err))
		return "", nil, false
	}
	return key, body, true
}

func (a *Admin) handleUserCreate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserCreate, true); ok {
		writeAdminResponse(w, a.CreateUser(r.Context(), caller, key, body))
	}
}

func (a *Admin) handleUserUpdate(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	name, ok := a.pathVar(w, r, caller, ActionUserUpdate, "username")
	if !ok {
		return
	}
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserUpdate, true); ok {
		writeAdminResponse(w, a.UpdateUser(r.Context(), caller, name, key, body))
	}
}

func (a *Admin) handleUserPassword(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	name, ok := a.pathVar(w, r, caller, ActionUserSetPassword, "username")
	if !ok {
		return
	}
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserSetPassword, true); ok {
		writeAdminResponse(w, a.SetUserPassword(r.Context(), caller, name, key, body))
	}
}

// noParameters is the handler of a write without parameters on the user
// of the path: the body is nothing or {}.
func (a *Admin) noParameters(action string, op func(ctx context.Context, caller AdminCaller, username, idempotencyKey string) AdminResponse) adminHandler {
	return func(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
		name, ok := a.pathVar(w, r, caller, action, "username")
		if !ok {
			return
		}
		key, body, ok := a.readUserWrite(w, r, caller, action, false)
		if !ok {
			return
		}
		if err := decodeNoParameters(body); err != nil {
			writeAdminResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action, idempotencyKey: key != ""}, err))
			return
		}
		writeAdminResponse(w, op(r.Context(), caller, name, key))
	}
}

func (a *Admin) handleUserDelete(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	a.noParameters(ActionUserDelete, a.DeleteUser)(w, r, caller)
}

func (a *Admin) handleUserRevokeConsent(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	clientID, ok := a.pathVar(w, r, caller, ActionUserRevokeConsent, "client_id")
	if !ok {
		return
	}
	a.noParameters(ActionUserRevokeConsent, func(ctx context.Context, caller AdminCaller, username, key string) AdminResponse {
		return a.RevokeUserConsent(ctx, caller, username, clientID, key)
	})(w, r, caller)
}

func (a *Admin) handleUserGet(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	if name, ok := a.pathVar(w, r, caller, ActionUserGet, "username"); ok {
		writeAdminResponse(w, a.GetUser(r.Context(), caller, name))
	}
}

func (a *Admin) handleUserSessions(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	if name, ok := a.pathVar(w, r, caller, ActionUserSessions, "username"); ok {
		writeAdminResponse(w, a.UserSessions(r.Context(), caller, name))
	}
}

func (a *Admin) handleUserConsents(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	if name, ok := a.pathVar(w, r, caller, ActionUserConsents, "username"); ok {
		writeAdminResponse(w, a.UserConsents(r.Context(), caller, name))
	}
}

func (a *Admin) handleUserList(w http.ResponseWriter, r *http.Request, caller AdminCaller) {
	fail := func(desc string) {
		writeAdminResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: ActionUserList}, invalidRequest(desc)))
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
			fail(fmt.Sprintf("limit must be between 1 and %d.", maxUserListLimit))
			return
		}
		limit = n
	}
	writeAdminResponse(w, a.ListUsers(r.Context(), caller, limit, q.Get("cursor")))
}
