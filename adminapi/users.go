package adminapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/idempotency"
	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

// The user endpoints: HTTP mapped onto identity.Admin (the operations,
// PRECIS, the revocations, the Idempotency-Key engine) and
// identity.Service (the reads), and their typed errors onto status codes.

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

// UserList is the body of GET /admin/users.
type UserList = identity.UserPage

// userAudit is the audit event of one user operation: who (the caller's
// credential fingerprint), what, the user's (prepared) username and sub
// when known, the client of a consent; never a password, a token or an
// Idempotency-Key.
type userAudit struct {
	who, what, username, sub, clientID string
	idempotencyKey, replayed           bool
}

// auditUser writes ev, with the answer's status and error, to the log as
// an "admin audit" event (the client events' shape).
func (a *API) auditUser(ctx context.Context, ev userAudit, status int, err error) {
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
	case errors.Is(err, identity.ErrInvalidClientID):
		return invalidRequest("A client_id is required.")
	case errors.Is(err, identity.ErrInvalidLimit):
		return invalidRequest(fmt.Sprintf("limit must be between 1 and %d.", identity.MaxPageLimit))
	case errors.Is(err, identity.ErrInvalidCursor):
		return invalidRequest("The cursor is not valid; use next_cursor from the previous page.")
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
func (a *API) userRefuse(ctx context.Context, ev userAudit, err error) Response {
	err = userFailure(err)
	resp := a.errorResponse(ctx, err, "")
	a.auditUser(ctx, ev, resp.Status, err)
	return resp
}

// invalidRequest is a 400 invalid_request with description.
func invalidRequest(description string) error {
	return newHTTPError(http.StatusBadRequest, clientadmin.ErrInvalidRequest.Code, description)
}

// userAnswer audits and answers the result of a user write.
func (a *API) userAnswer(ctx context.Context, ev userAudit, res identity.Result, err error) Response {
	ev.sub = res.Subject
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	resp := Response{Status: outcomeStatus(res.Outcome), Body: res.JSON, Replayed: res.Replayed}
	if resp.Status == http.StatusCreated && res.User.Username != "" {
		resp.Location = pathUsers + "/" + url.PathEscape(res.User.Username)
		ev.username = res.User.Username
	}
	ev.replayed = res.Replayed
	a.auditUser(ctx, ev, resp.Status, nil)
	return resp
}

// outcomeStatus is the HTTP status of a write's outcome.
func outcomeStatus(outcome int) int {
	switch outcome {
	case idempotency.OutcomeCreated:
		return http.StatusCreated
	case idempotency.OutcomeDone:
		return http.StatusNoContent
	}
	return http.StatusOK
}

// ---- operations, as HTTP answers ----

// CreateUser creates a user from a JSON body of identity.NewUser: 201 with
// the user and its new sub (never the password or its hash).
func (a *API) CreateUser(ctx context.Context, caller Caller, idempotencyKey string, body []byte) Response {
	ev := userAudit{who: caller.String(), what: ActionUserCreate, idempotencyKey: idempotencyKey != ""}
	var req identity.NewUser
	noPassword, body := passwordIsNull(body) // "password": null, a passkey-only user (passkeys.go)
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	req.NoPassword = req.NoPassword || noPassword
	res, err := a.users.Create(ctx, caller, idempotencyKey, req)
	return a.userAnswer(ctx, ev, res, err)
}

// UpdateUser replaces the profile of the user and, if the body (an
// identity.UserChange) names another username, renames the user, in one
// transaction: 200 with the user.
func (a *API) UpdateUser(ctx context.Context, caller Caller, username, idempotencyKey string, body []byte) Response {
	ev := userAudit{who: caller.String(), what: ActionUserUpdate, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	var req identity.UserChange
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	res, err := a.users.Update(ctx, caller, idempotencyKey, name, req)
	return a.userAnswer(ctx, ev, res, err)
}

// SetUserPassword replaces the user's password from a {"password": …} body
// and, in the same transaction, ends their sessions and revokes their
// codes and tokens: 200 with the user.
func (a *API) SetUserPassword(ctx context.Context, caller Caller, username, idempotencyKey string, body []byte) Response {
	ev := userAudit{who: caller.String(), what: ActionUserSetPassword, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	if null, _ := passwordIsNull(body); null {
		return a.RemoveUserPassword(ctx, caller, name, idempotencyKey) // passkeys.go
	}
	var req struct {
		Password string `json:"password"`
	}
	if err := decodeUserJSON(body, &req); err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	res, err := a.users.SetPassword(ctx, caller, idempotencyKey, name, req.Password)
	return a.userAnswer(ctx, ev, res, err)
}

// DisableUser stops the user from signing in and, in the same transaction,
// ends their sessions and revokes their codes and tokens: 200 with the
// user.
func (a *API) DisableUser(ctx context.Context, caller Caller, username, idempotencyKey string) Response {
	return a.userWrite(ctx, caller, username, idempotencyKey, ActionUserDisable, a.users.Disable)
}

// EnableUser lets a disabled user sign in again: 200 with the user.
func (a *API) EnableUser(ctx context.Context, caller Caller, username, idempotencyKey string) Response {
	return a.userWrite(ctx, caller, username, idempotencyKey, ActionUserEnable, a.users.Enable)
}

// DeleteUser deletes the user, their sessions and consents, and revokes
// their codes and tokens, in one transaction: 204.
func (a *API) DeleteUser(ctx context.Context, caller Caller, username, idempotencyKey string) Response {
	return a.userWrite(ctx, caller, username, idempotencyKey, ActionUserDelete, a.users.Delete)
}

// SignOutUser ends every session of the user: 200 with their sub and how
// many sessions ended. Tokens already issued stay valid.
func (a *API) SignOutUser(ctx context.Context, caller Caller, username, idempotencyKey string) Response {
	return a.userWrite(ctx, caller, username, idempotencyKey, ActionUserSignOut, a.users.SignOut)
}

// RevokeUserConsent withdraws the user's consent for clientID and revokes
// the codes and tokens issued to the user for that client: 204, or 404 if
// there was no consent (the tokens are revoked all the same, as
// identity.Admin.RevokeConsent does; no key is kept).
func (a *API) RevokeUserConsent(ctx context.Context, caller Caller, username, clientID, idempotencyKey string) Response {
	ev := userAudit{who: caller.String(), what: ActionUserRevokeConsent, clientID: clientID, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	res, err := a.users.RevokeConsent(ctx, caller, idempotencyKey, name, clientID)
	return a.userAnswer(ctx, ev, res, err)
}

// userWrite runs a write without a body on the user of the path.
func (a *API) userWrite(ctx context.Context, caller Caller, username, idempotencyKey, action string,
	op func(ctx context.Context, caller idempotency.Caller, key, username string) (identity.Result, error)) Response {
	ev := userAudit{who: caller.String(), what: action, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	res, err := op(ctx, caller, idempotencyKey, name)
	return a.userAnswer(ctx, ev, res, err)
}

// GetUser answers 200 with the user, or 404.
func (a *API) GetUser(ctx context.Context, caller Caller, username string) Response {
	return a.userRead(ctx, caller, ActionUserGet, username, func(ctx context.Context, name string) (any, string, error) {
		u, err := a.people.Get(ctx, name)
		return u, u.Subject, err
	})
}

// UserSessions answers 200 with {"sessions": […], "next_cursor": …}, a
// page (limit 1–200, 0 is 50) of the user's valid browser sessions after
// cursor, newest first (never a session's cookie reference).
func (a *API) UserSessions(ctx context.Context, caller Caller, username string, limit int, cursor string) Response {
	return a.userRead(ctx, caller, ActionUserSessions, username, func(ctx context.Context, name string) (any, string, error) {
		page, err := a.people.SessionsPage(ctx, name, limit, cursor)
		return page, "", err
	})
}

// UserConsents answers 200 with {"consents": […]}, the user's remembered
// consents by client.
func (a *API) UserConsents(ctx context.Context, caller Caller, username string) Response {
	return a.userRead(ctx, caller, ActionUserConsents, username, func(ctx context.Context, name string) (any, string, error) {
		cs, err := a.people.Consents(ctx, name)
		return map[string]any{"consents": cs}, "", err
	})
}

// userRead runs a read of the user of the path, audits it and answers it.
func (a *API) userRead(ctx context.Context, caller Caller, action, username string,
	read func(ctx context.Context, name string) (any, string, error)) Response {
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
func (a *API) ListUsers(ctx context.Context, caller Caller, limit int, cursor string) Response {
	ev := userAudit{who: caller.String(), what: ActionUserList}
	page, err := a.users.Page(ctx, limit, cursor)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	a.auditUser(ctx, ev, http.StatusOK, nil)
	return jsonResponse(http.StatusOK, page, "")
}

// decodeUserJSON decodes body, which must be one JSON object with only
// known members, into v; anything else is 400 invalid_request.
func decodeUserJSON(body []byte, v any) error {
	if problem := clientadmin.DecodeObject(body, v, "user"); problem != "" {
		return invalidRequest(problem)
	}
	return nil
}
