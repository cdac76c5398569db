package adminapi

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/authd/authd/clientadmin"
)

// The client endpoints: HTTP mapped onto clientadmin.Service, which holds
// the operations, the metadata rules and the audit events, and its typed
// errors onto RFC 7591 §3.2.2 answers.

// ClientList is the body of GET /admin/clients.
type ClientList = clientadmin.ClientList

// CreateClient registers a client from RFC 7591 metadata JSON: 201 with the
// client information (the only time a secret is shown).
func (a *API) CreateClient(ctx context.Context, caller Caller, idempotencyKey string, body []byte) Response {
	meta, err := clientadmin.DecodeMetadata(body)
	if err != nil {
		return a.refuse(ctx, caller, clientadmin.ActionCreate, "", idempotencyKey != "", err)
	}
	res, err := a.svc.Create(ctx, caller, idempotencyKey, meta)
	return a.result(ctx, http.StatusCreated, res, err, "")
}

// UpdateClient replaces client id's metadata (RFC 7592 §2.2): 200.
func (a *API) UpdateClient(ctx context.Context, caller Caller, id, idempotencyKey string, body []byte) Response {
	req, err := clientadmin.DecodeUpdate(body)
	if err != nil {
		return a.refuse(ctx, caller, clientadmin.ActionUpdate, id, idempotencyKey != "", err)
	}
	res, err := a.svc.Update(ctx, caller, id, idempotencyKey, req)
	return a.result(ctx, http.StatusOK, res, err, id)
}

// RotateClientSecret issues a new secret for client id: 200.
func (a *API) RotateClientSecret(ctx context.Context, caller Caller, id, idempotencyKey string) Response {
	res, err := a.svc.RotateSecret(ctx, caller, id, idempotencyKey)
	return a.result(ctx, http.StatusOK, res, err, id)
}

// GetClient answers 200 with client id's information, or 404.
func (a *API) GetClient(ctx context.Context, caller Caller, id string) Response {
	info, err := a.svc.Get(ctx, caller, id)
	if err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return jsonResponse(http.StatusOK, info, id)
}

// ListClients answers 200 with a ClientList page.
func (a *API) ListClients(ctx context.Context, caller Caller, limit int, cursor string) Response {
	list, err := a.svc.List(ctx, caller, limit, cursor)
	if err != nil {
		return a.errorResponse(ctx, err, "")
	}
	return jsonResponse(http.StatusOK, list, "")
}

// DeleteClient answers 204, or 404.
func (a *API) DeleteClient(ctx context.Context, caller Caller, id string) Response {
	if err := a.svc.Delete(ctx, caller, id); err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return Response{Status: http.StatusNoContent, ClientID: id}
}

// result turns a write's result into its answer: status, and the stored
// JSON byte for byte.
func (a *API) result(ctx context.Context, status int, res *clientadmin.Result, err error, id string) Response {
	if err != nil {
		return a.errorResponse(ctx, err, id)
	}
	return Response{Status: status, Body: res.JSON, Replayed: res.Replayed, ClientID: res.Client.ClientID}
}

// readWrite reads the Idempotency-Key and the body of a client write, or
// audits and answers the refusal.
func (a *API) readWrite(w http.ResponseWriter, r *http.Request, caller Caller, action, id string, required bool) (key string, body []byte, ok bool) {
	key, err := idempotencyKeyHeader(r)
	if err == nil {
		body, err = readBody(w, r, required)
	}
	if err != nil {
		writeResponse(w, a.refuse(r.Context(), caller, action, id, key != "", err))
		return "", nil, false
	}
	return key, body, true
}

func (a *API) handleCreate(w http.ResponseWriter, r *http.Request, caller Caller) {
	if key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionCreate, "", true); ok {
		writeResponse(w, a.CreateClient(r.Context(), caller, key, body))
	}
}

func (a *API) handleUpdate(w http.ResponseWriter, r *http.Request, caller Caller) {
	id := mux.Vars(r)["id"]
	if key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionUpdate, id, true); ok {
		writeResponse(w, a.UpdateClient(r.Context(), caller, id, key, body))
	}
}

func (a *API) handleRotate(w http.ResponseWriter, r *http.Request, caller Caller) {
	id := mux.Vars(r)["id"]
	key, body, ok := a.readWrite(w, r, caller, clientadmin.ActionRotateSecret, id, false)
	if !ok {
		return
	}
	// The request has no parameters; an empty object is accepted.
	if err := clientadmin.DecodeEmpty(body); err != nil {
		writeResponse(w, a.refuse(r.Context(), caller, clientadmin.ActionRotateSecret, id, key != "", err))
		return
	}
	writeResponse(w, a.RotateClientSecret(r.Context(), caller, id, key))
}

func (a *API) handleGet(w http.ResponseWriter, r *http.Request, caller Caller) {
	writeResponse(w, a.GetClient(r.Context(), caller, mux.Vars(r)["id"]))
}

func (a *API) handleDelete(w http.ResponseWriter, r *http.Request, caller Caller) {
	writeResponse(w, a.DeleteClient(r.Context(), caller, mux.Vars(r)["id"]))
}

func (a *API) handleList(w http.ResponseWriter, r *http.Request, caller Caller) {
	limit, cursor, problem := listPage(r, clientadmin.MaxListLimit)
	if problem != "" {
		writeResponse(w, a.refuse(r.Context(), caller, clientadmin.ActionList, "", false,
			&clientadmin.Error{Code: clientadmin.ErrInvalidRequest.Code, Description: problem}))
		return
	}
	writeResponse(w, a.ListClients(r.Context(), caller, limit, cursor))
}
