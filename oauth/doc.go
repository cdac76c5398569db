// Package oauth is authd's OAuth 2.0 authorization server: it composes fosite
// (authorization code + PKCE, refresh, introspection, revocation) over a
// storage.Store, puts the exchange replay cache in front of the token
// endpoint, and serves the HTTP endpoints and the login/consent pages. Admin
// (admin.go) is the HTTP adapter of the client administration service
// (package clientadmin) behind /admin/clients, and (admin_users.go) of the
// identity service behind /admin/users, both on clientadmin's
// Idempotency-Key engine. Keys derived from the system secret
// come from package secrets. /metrics, /healthz and /readyz are not served
// here but on the operations listener (package ops).
//
// It is the only package that knows both fosite and the replay cache.
// Everything it needs is passed to New explicitly (Config, Deps): it holds no
// package-level state. It must never log a code, token, code_verifier, client
// secret or password, and never answer a client's input with a 500.
package oauth
