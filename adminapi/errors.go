package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/authd/authd/clientadmin"
)

// httpError is an error of the HTTP layer itself (401, 413, 415) or a
// service error mapped onto its answer, with the RFC 7591 §3.2.2 body it
// answers.
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

// successStatus is the status of a successful client operation.
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
// is not the services' (a storage failure), 500 server_error, logged here
// once (never with secrets, which no error carries).
func (a *API) errorResponse(ctx context.Context, err error, id string) Response {
	status := statusOf(err)
	var e *clientadmin.Error
	if status == http.StatusInternalServerError || !errors.As(err, &e) {
		a.log.LogAttrs(ctx, slog.LevelError, "admin request failed", slog.Any("error", err))
		e = &clientadmin.Error{Code: "server_error", Description: "The request could not be completed."}
		status = http.StatusInternalServerError
	}
	body, _ := json.Marshal(e)
	return Response{Status: status, Body: append(body, '\n'), ClientID: id}
}

// jsonResponse encodes v as the body of a response with status.
func jsonResponse(status int, v any, id string) Response {
	body, _ := json.Marshal(v) // every answer here encodes
	return Response{Status: status, Body: append(body, '\n'), ClientID: id}
}

// refuse audits a client request refused before the service ran, and
// answers it.
func (a *API) refuse(ctx context.Context, caller Caller, action, id string, idempotencyKey bool, err error) Response {
	a.svc.Audit(ctx, clientadmin.AuditEvent{Who: caller.String(), What: action, ClientID: id, IdempotencyKey: idempotencyKey, Err: err})
	return a.errorResponse(ctx, err, id)
}

// audit writes the audit event of a client request to the log: who (the
// caller's credential fingerprint), what, the client_id, the HTTP status
// and the outcome; never a secret, a token or an Idempotency-Key.
func (a *API) audit(ctx context.Context, e clientadmin.AuditEvent) {
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
