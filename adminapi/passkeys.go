package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/passkey"
)

// The passkey endpoints (issue 24): GET /admin/users/{username}/passkeys
// and DELETE /admin/users/{username}/passkeys/{id} (204, Idempotency-Key),
// and "password": null on POST /admin/users and POST …/password, over
// passkey.Admin. Without passkeys (Config.Passkeys nil) they answer 404
// and "password": null is refused.

// The audit names of the passkey operations.
const (
	ActionUserPasskeys       = "user.passkeys"
	ActionUserRemovePasskey  = "user.remove_passkey"
	ActionUserRemovePassword = "user.remove_password"
)

// passkeyFailure maps passkey's errors onto answers; the rest as users'.
func passkeyFailure(err error) error {
	switch {
	case errors.Is(err, passkey.ErrNotFound):
		return newHTTPError(http.StatusNotFound, "not_found", "The user has no passkey with this id (base64url, as listed).")
	case errors.Is(err, passkey.ErrLastMethod):
		return newHTTPError(http.StatusConflict, "last_sign_in_method",
			"This is the user's last way to sign in (no password and no other usable passkey); add one before removing it.")
	case errors.Is(err, passkey.ErrUnknown):
		return newHTTPError(http.StatusNotFound, "not_found", "No user has this username.")
	}
	return err
}

func (a *API) passkeysOff(w http.ResponseWriter, r *http.Request, caller Caller, action string) bool {
	if a.passkeys != nil {
		return false
	}
	writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action},
		newHTTPError(http.StatusNotFound, "not_found", "Passkeys are not enabled on this server.")))
	return true
}

func (a *API) handleUserPasskeys(w http.ResponseWriter, r *http.Request, caller Caller) {
	name, ok := a.pathVar(w, r, caller, ActionUserPasskeys, "username")
	if !ok || a.passkeysOff(w, r, caller, ActionUserPasskeys) {
		return
	}
	writeResponse(w, a.userRead(r.Context(), caller, ActionUserPasskeys, name, func(ctx context.Context, name string) (any, string, error) {
		ps, sub, err := a.passkeys.List(ctx, name)
		return map[string]any{"passkeys": ps}, sub, err
	}))
}

func (a *API) handleUserRemovePasskey(w http.ResponseWriter, r *http.Request, caller Caller) {
	id, ok := a.pathVar(w, r, caller, ActionUserRemovePasskey, "id")
	if !ok || a.passkeysOff(w, r, caller, ActionUserRemovePasskey) {
		return
	}
	a.noParameters(ActionUserRemovePasskey, func(ctx context.Context, caller Caller, username, key string) Response {
		return a.RemoveUserPasskey(ctx, caller, username, id, key)
	})(w, r, caller)
}

// RemoveUserPasskey deletes the user's passkey id: 204; 404 for no such
// passkey; 409 last_sign_in_method when it is the user's last way in.
func (a *API) RemoveUserPasskey(ctx context.Context, caller Caller, username, id, idempotencyKey string) Response {
	ev := userAudit{who: caller.String(), what: ActionUserRemovePasskey, idempotencyKey: idempotencyKey != ""}
	name, err := identity.PrepareUsername(username)
	if err != nil {
		return a.userRefuse(ctx, ev, err)
	}
	ev.username = name
	res, err := a.passkeys.Remove(ctx, caller, idempotencyKey, name, id)
	return a.passkeyAnswer(ctx, ev, res, err)
}

// RemoveUserPassword removes the user's password ({"password": null}),
// if they keep a usable passkey, and ends their sessions and revokes their
// tokens: 200 with the user; 409 last_sign_in_method otherwise.
func (a *API) RemoveUserPassword(ctx context.Context, caller Caller, name, idempotencyKey string) Response {
	ev := userAudit{who: caller.String(), what: ActionUserRemovePassword, username: name, idempotencyKey: idempotencyKey != ""}
	if a.passkeys == nil {
		return a.userRefuse(ctx, ev, invalidRequest(`"password": null removes the password of a user with a passkey; passkeys are not enabled on this server.`))
	}
	res, err := a.passkeys.RemovePassword(ctx, caller, idempotencyKey, name)
	return a.passkeyAnswer(ctx, ev, res, err)
}

func (a *API) passkeyAnswer(ctx context.Context, ev userAudit, res passkey.Result, err error) Response {
	ev.sub = res.Subject
	if err != nil {
		return a.userRefuse(ctx, ev, passkeyFailure(err))
	}
	resp := Response{Status: outcomeStatus(res.Outcome), Body: res.JSON, Replayed: res.Replayed}
	ev.replayed = res.Replayed
	a.auditUser(ctx, ev, resp.Status, nil)
	return resp
}

// passwordIsNull reports whether body's "password" member is JSON null,
// and returns body without it (so the rest decodes as before).
func passwordIsNull(body []byte) (bool, []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false, body
	}
	if p, ok := m["password"]; !ok || string(p) != "null" {
		return false, body
	}
	delete(m, "password")
	out, err := json.Marshal(m)
	if err != nil {
		return false, body
	}
	return true, out
}
