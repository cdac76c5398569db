package adminapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
	"github.com/authd/authd/federation"
)

// pathProviders is the upstream providers' collection (issue 25).
const pathProviders = "/admin/providers"

// isProvidersPath reports whether path is the providers collection or below.
func isProvidersPath(path string) bool {
	return path == pathProviders || strings.HasPrefix(path, pathProviders+"/")
}

// providerRoutes is the router of /admin/providers…: package federation's
// operations, with the clients' error answers and Idempotency-Key rules.
func (a *API) providerRoutes() http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(writeNotFound)
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeMethodNotAllowed(w, req, allowedMethods(r, req))
	})
	r.Handle(pathProviders, a.authenticated(a.handleProviderWrite(http.StatusCreated))).Methods(http.MethodPost)
	r.Handle(pathProviders, a.authenticated(a.handleProviderList)).Methods(http.MethodGet)
	r.Handle(pathProviders+"/{id}", a.authenticated(a.handleProviderGet)).Methods(http.MethodGet)
	r.Handle(pathProviders+"/{id}", a.authenticated(a.handleProviderWrite(http.StatusOK))).Methods(http.MethodPut)
	r.Handle(pathProviders+"/{id}", a.authenticated(a.handleProviderDelete)).Methods(http.MethodDelete)
	return r
}

// handleProviderWrite serves POST /admin/providers (201) and PUT
// /admin/providers/{id} (200): the body is the provider's JSON; its
// secrets are sealed, and never in the answer.
func (a *API) handleProviderWrite(status int) handler {
	return func(w http.ResponseWriter, r *http.Request, caller Caller) {
		id := mux.Vars(r)["id"]
		action := federation.ActionCreate
		if id != "" {
			action = federation.ActionUpdate
		}
		key, err := idempotencyKeyHeader(r)
		var body []byte
		if err == nil {
			body, err = readBody(w, r, true)
		}
		var in *federation.Input
		if err == nil {
			in, err = federation.DecodeInput(body)
		}
		if err != nil {
			writeResponse(w, a.refuse(r.Context(), caller, action, id, key != "", err))
			return
		}
		var res *federation.Result
		if id == "" {
			res, err = a.providers.Create(r.Context(), caller, key, in)
		} else {
			res, err = a.providers.Update(r.Context(), caller, id, key, in)
		}
		if err != nil {
			writeResponse(w, a.errorResponse(r.Context(), err, id))
			return
		}
		resp := Response{Status: status, Body: res.JSON, Replayed: res.Replayed}
		if status == http.StatusCreated {
			resp.Location = pathProviders + "/" + url.PathEscape(res.Provider.ID)
		}
		writeResponse(w, resp)
	}
}

func (a *API) handleProviderGet(w http.ResponseWriter, r *http.Request, caller Caller) {
	id := mux.Vars(r)["id"]
	info, err := a.providers.Get(r.Context(), caller, id)
	if err != nil {
		writeResponse(w, a.errorResponse(r.Context(), err, id))
		return
	}
	writeResponse(w, jsonResponse(http.StatusOK, info, ""))
}

func (a *API) handleProviderDelete(w http.ResponseWriter, r *http.Request, caller Caller) {
	id := mux.Vars(r)["id"]
	if err := a.providers.Delete(r.Context(), caller, id); err != nil {
		writeResponse(w, a.errorResponse(r.Context(), err, id))
		return
	}
	writeResponse(w, Response{Status: http.StatusNoContent})
}

func (a *API) handleProviderList(w http.ResponseWriter, r *http.Request, caller Caller) {
	limit, cursor, problem := listPage(r, federation.MaxListLimit)
	if problem != "" {
		writeResponse(w, a.refuse(r.Context(), caller, federation.ActionList, "", false,
			&clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code, Description: problem}))
		return
	}
	list, err := a.providers.List(r.Context(), caller, limit, cursor)
	if err != nil {
		writeResponse(w, a.errorResponse(r.Context(), err, ""))
		return
	}
	writeResponse(w, jsonResponse(http.StatusOK, list, ""))
}

// Providers returns the provider operations (the CLI's code path too).
func (a *API) Providers() *federation.Admin { return a.providers }
