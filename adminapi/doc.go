// Package adminapi is authd's admin HTTP API: a thin adapter over the
// services it depends on, and nothing else: the client administration
// service (package clientadmin), the identity service's operator
// operations (identity.Admin), the Idempotency-Key engine both write
// through (package idempotency), and the store they share, which is the
// store every revocation goes through (package revocation). It never
// imports the protocol package (oauth), which serves it under /admin/
// through its own middleware (request IDs, the access log, the request
// metrics; oauth.AdminAPI) without knowing what it is. cmd/authd builds it.
//
//	POST   /admin/clients              register (RFC 7591 §3.1) → 201, RFC 7591 §3.2.1
//	GET    /admin/clients?limit&cursor list, ordered by client_id
//	GET    /admin/clients/{id}         read (RFC 7592 §2.1, without secret)
//	PUT    /admin/clients/{id}         full replace (RFC 7592 §2.2)
//	DELETE /admin/clients/{id}         delete, with every code and token → 204
//	POST   /admin/clients/{id}/secret  rotate the client_secret (shown once)
//
//	POST   /admin/users                          create → 201, the user with its sub
//	GET    /admin/users?limit&cursor             list, ordered by username
//	GET    /admin/users/{username}               read
//	PUT    /admin/users/{username}               profile (full replace) and, with "username", rename
//	POST   /admin/users/{username}/password      new password; ends sessions, revokes tokens
//	POST   /admin/users/{username}/disable       no more sign-ins; ends sessions, revokes tokens
//	POST   /admin/users/{username}/enable        sign-ins again
//	DELETE /admin/users/{username}               delete; ends sessions, revokes tokens → 204
//	GET    /admin/users/{username}/sessions      the valid browser sessions (paged: limit, cursor)
//	POST   /admin/users/{username}/sign-out      end every session (tokens stay)
//	GET    /admin/users/{username}/consents      the remembered consents
//	DELETE /admin/users/{username}/consents/{client_id}
//	                                             withdraw; revokes that client's tokens → 204
//
// Every request carries "Authorization: Bearer <admin token>" (RFC 6750
// §2.1). Every write honours Idempotency-Key
// (draft-ietf-httpapi-idempotency-key-header; docs/architecture.md, "Admin
// writes"). Errors are RFC 7591 §3.2.2 JSON objects, {"error": …,
// "error_description": …}; the user endpoints use the same shape:
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
// The {username} of a path is percent-decoded and compared after PRECIS
// UsernameCaseMapped (RFC 8265 §3.3) by the identity service, so
// /admin/users/Alice is alice. A password is never logged, never in an
// answer and, in the Idempotency-Key table, only inside a request
// fingerprint keyed with the raw key (idempotency.Write.Confidential).
// Each request is one audit event ("admin audit"): who (the credential's
// fingerprint), what, the client or user, the status; never a secret, a
// token or an Idempotency-Key.
package adminapi
