// Package oauth is authd's OAuth 2.0 authorization server: it composes fosite
// (authorization code + PKCE, refresh, introspection, revocation) over the
// slice of storage it calls (Store), puts the exchange replay cache in front of the token
// endpoint, and serves the HTTP endpoints and the login/consent pages. It
// holds no admin code: the admin API (package adminapi) is built in
// cmd/authd and mounted under /admin/ through the neutral AdminAPI
// interface (mount.go), behind this server's middleware. Keys derived from
// the system secret come from package secrets. /metrics, /healthz and /readyz are not served
// here but on the operations listener (package ops).
//
// It is also the OpenID Provider (OpenID Connect Core, Discovery and
// RP-Initiated Logout 1.0): discovery (discovery.go), the JWKS (jwks.go),
// ID tokens (idtoken.go), UserInfo (userinfo.go), the authentication
// request parameters (prompt.go) and the end_session_endpoint
// (endsession.go). ID tokens are signed by authd's own signer (package
// signing, go-jose) inside grantExchanger's transaction rather than by
// fosite's handler/openid: that handler signs in PopulateTokenEndpointResponse
// from an OpenIDConnectRequestStorage session of its own, which would be a
// second store read and write inside the one exchange transaction and a
// signer that loads keys there; here the keys are loaded before the
// transaction (signing.Manager.Prepare), signing does no I/O, and the ID
// token is sealed into the replay record with the rest of the response.
//
// The authorization endpoint (authorize.go) decides every request's next
// step in one function (decide, next.go); the ways to sign in are
// signin.Method values it is handed (Deps.Methods) and never names
// (signin.go; docs/architecture.md, "The sign-in flow").
//
// It is the only package that knows both fosite and the replay cache.
// Everything it needs is passed to New explicitly (Config, Deps): it holds no
// package-level state, and New builds no service and does no I/O (cmd/authd
// builds the store's decorators, the identity service, the signing keys and
// the DPoP verifiers, and hands them in). It must never log a code, token, code_verifier, client
// secret or password, and never answer a client's input with a 500.
package oauth
