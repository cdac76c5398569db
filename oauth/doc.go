// Package oauth is authd's OAuth 2.0 authorization server: it composes fosite
// (authorization code + PKCE, refresh, introspection, revocation) over a
// storage.Store, puts the exchange replay cache in front of the token
// endpoint, and serves the HTTP endpoints and the login/consent pages. Admin
// (admin.go) is the client administration behind /admin/ and "authd clients",
// with Idempotency-Key handling (idempotency.go).
//
// It is the only package that knows both fosite and the replay cache.
// Everything it needs is passed to New explicitly (Config, Deps): it holds no
// package-level state. It must never log a code, token, code_verifier, client
// secret or password, and never answer a client's input with a 500.
package oauth
