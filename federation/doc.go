// Package federation is authd as a relying party of upstream OpenID
// providers (Apple, Google, any OpenID provider; issue 25): the
// operator's provider registrations (Admin, secrets sealed), the live set
// of providers every replica follows within seconds (Registry), the
// verification of a provider's ID token against its cached JWKS with a
// floored refetch on an unknown kid (Verifier), and the link of a
// provider identity, the pair (issuer, sub), to one authd user (Linker).
//
// It knows no HTTP: the browser path (package signin/fed) and the native
// token exchange (package oauth, grant_token_exchange.go) call it. It
// never merges accounts by an unverified email, and never logs or stores
// a secret or a token in clear.
package federation
