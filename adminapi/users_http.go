package adminapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/identity"
)

// userRoutes returns the router of /admin/users…. It matches the encoded
// path, so a username holding "/" (PRECIS allows it) is addressed as %2F,
// and decodes {username} and {client_id} itself.
func (a *API) userRoutes() http.Handler {
	r := mux.NewRouter()
	r.UseEncodedPath()
	r.NotFoundHandler = a.authenticated(func(w http.ResponseWriter, _ *http.Request, _ Caller) {
		writeResponse(w, jsonResponse(http.StatusNotFound, &clientadmin.Error{Code: clientadmin.ErrNotFound.Code, Description: "No such endpoint."}, ""))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the resource has.
		w.Header().Set("Allow", allowedMethods(r, req))
		writeResponse(w, jsonResponse(http.StatusMethodNotAllowed, &clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code,
			Description: "The HTTP method " + req.Method + " is not allowed on this endpoint."}, ""))
	})
	const user = pathUsers + "/{username}"
	r.Handle(pathUsers, a.authenticated(a.handleUserCreate)).Methods(http.MethodPost)
	r.Handle(pathUsers, a.authenticated(a.handleUserList)).Methods(http.MethodGet)
	r.Handle(user, a.authenticated(a.handleUserGet)).Methods(http.MethodGet)
	r.Handle(user, a.authenticated(a.handleUserUpdate)).Methods(http.MethodPut)
	r.Handle(user, a.authenticated(a.handleUserDelete)).Methods(http.MethodDelete)
	r.Handle(user+"/password", a.authenticated(a.handleUserPassword)).Methods(http.MethodPost)
	r.Handle(user+"/disable", a.authenticated(a.noParameters(ActionUserDisable, a.DisableUser))).Methods(http.MethodPost)
	r.Handle(user+"/enable", a.authenticated(a.noParameters(ActionUserEnable, a.EnableUser))).Methods(http.MethodPost)
	r.Handle(user+"/sign-out", a.authenticated(a.noParameters(ActionUserSignOut, a.SignOutUser))).Methods(http.MethodPost)
	r.Handle(user+"/reset-mfa", a.authenticated(a.noParameters(ActionUserResetMFA, a.ResetUserMFA))).Methods(http.MethodPost)
	r.Handle(user+"/sessions", a.authenticated(a.handleUserSessions)).Methods(http.MethodGet)
	r.Handle(user+"/consents", a.authenticated(a.handleUserConsents)).Methods(http.MethodGet)
	r.Handle(user+"/consents/{client_id}", a.authenticated(a.handleUserRevokeConsent)).Methods(http.MethodDelete)
	r.Handle(user+"/passkeys", a.authenticated(a.handleUserPasskeys)).Methods(http.MethodGet)              // passkeys.go
	r.Handle(user+"/passkeys/{id}", a.authenticated(a.handleUserRemovePasskey)).Methods(http.MethodDelete) // passkeys.go
	return r
}

// pathVar returns the percent-decoded path variable name, or answers 400.
func (a *API) pathVar(w http.ResponseWriter, r *http.Request, caller Caller, action, name string) (string, bool) {
	v, err := url.PathUnescape(mux.Vars(r)[name])
	if err != nil {
		writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action},
			invalidRequest("The path is not validly percent-encoded.")))
		return "", false
	}
	return v, true
}

// readUserWrite reads the Idempotency-Key and the body of a user write, or
// audits and answers the refusal.
func (a *API) readUserWrite(w http.ResponseWriter, r *http.Request, caller Caller, action string, required bool) (key string, body []byte, ok bool) {
	key, err := idempotencyKeyHeader(r)
	if err == nil {
		body, err = readBody(w, r, required)
	}
	if err != nil {
		writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action, idempotencyKey: key != ""}, err))
		return "", nil, false
	}
	return key, body, true
}

func (a *API) handleUserCreate(w http.ResponseWriter, r *http.Request, caller Caller) {
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserCreate, true); ok {
		writeResponse(w, a.CreateUser(r.Context(), caller, key, body))
	}
}

func (a *API) handleUserUpdate(w http.ResponseWriter, r *http.Request, caller Caller) {
	name, ok := a.pathVar(w, r, caller, ActionUserUpdate, "username")
	if !ok {
		return
	}
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserUpdate, true); ok {
		writeResponse(w, a.UpdateUser(r.Context(), caller, name, key, body))
	}
}

func (a *API) handleUserPassword(w http.ResponseWriter, r *http.Request, caller Caller) {
	name, ok := a.pathVar(w, r, caller, ActionUserSetPassword, "username")
	if !ok {
		return
	}
	if key, body, ok := a.readUserWrite(w, r, caller, ActionUserSetPassword, true); ok {
		writeResponse(w, a.SetUserPassword(r.Context(), caller, name, key, body))
	}
}

// noParameters is the handler of a write without parameters on the user
// of the path: the body is nothing or {}.
func (a *API) noParameters(action string, op func(ctx context.Context, caller Caller, username, idempotencyKey string) Response) handler {
	return func(w http.ResponseWriter, r *http.Request, caller Caller) {
		name, ok := a.pathVar(w, r, caller, action, "username")
		if !ok {
			return
		}
		key, body, ok := a.readUserWrite(w, r, caller, action, false)
		if !ok {
			return
		}
		if err := decodeNoParameters(body); err != nil {
			writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: action, idempotencyKey: key != ""}, err))
			return
		}
		writeResponse(w, op(r.Context(), caller, name, key))
	}
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

func (a *API) handleUserDelete(w http.ResponseWriter, r *http.Request, caller Caller) {
	a.noParameters(ActionUserDelete, a.DeleteUser)(w, r, caller)
}

func (a *API) handleUserRevokeConsent(w http.ResponseWriter, r *http.Request, caller Caller) {
	clientID, ok := a.pathVar(w, r, caller, ActionUserRevokeConsent, "client_id")
	if !ok {
		return
	}
	a.noParameters(ActionUserRevokeConsent, func(ctx context.Context, caller Caller, username, key string) Response {
		return a.RevokeUserConsent(ctx, caller, username, clientID, key)
	})(w, r, caller)
}

func (a *API) handleUserGet(w http.ResponseWriter, r *http.Request, caller Caller) {
	if name, ok := a.pathVar(w, r, caller, ActionUserGet, "username"); ok {
		writeResponse(w, a.GetUser(r.Context(), caller, name))
	}
}

func (a *API) handleUserSessions(w http.ResponseWriter, r *http.Request, caller Caller) {
	name, ok := a.pathVar(w, r, caller, ActionUserSessions, "username")
	if !ok {
		return
	}
	limit, cursor, problem := listPage(r, identity.MaxPageLimit)
	if problem != "" {
		writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: ActionUserSessions}, invalidRequest(problem)))
		return
	}
	writeResponse(w, a.UserSessions(r.Context(), caller, name, limit, cursor))
}

func (a *API) handleUserConsents(w http.ResponseWriter, r *http.Request, caller Caller) {
	if name, ok := a.pathVar(w, r, caller, ActionUserConsents, "username"); ok {
		writeResponse(w, a.UserConsents(r.Context(), caller, name))
	}
}

func (a *API) handleUserList(w http.ResponseWriter, r *http.Request, caller Caller) {
	limit, cursor, problem := listPage(r, identity.MaxPageLimit)
	if problem != "" {
		writeResponse(w, a.userRefuse(r.Context(), userAudit{who: caller.String(), what: ActionUserList}, invalidRequest(problem)))
		return
	}
	writeResponse(w, a.ListUsers(r.Context(), caller, limit, cursor))
}
