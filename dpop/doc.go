// Package dpop verifies DPoP proofs (RFC 9449): the proof JWT a client
// sends in the DPoP header to show it holds the private key a token is, or
// will be, bound to. It is used by the token endpoint (a proof binds the
// issued tokens to the key's JWK thumbprint, RFC 7638) and by resource
// servers (a proof with "ath" accompanies a DPoP-bound access token, §7).
//
// It holds no HTTP handler and decides no OAuth protocol: it answers "is
// this proof valid for this request, and for which key". It never logs a
// proof, a token or a key; the caller maps its errors (ErrInvalidProof,
// ErrUseNonce) to the RFC 9449 §12.2 error codes invalid_dpop_proof and
// use_dpop_nonce.
//
// A proof's header (typ, alg, jwk) is parsed and checked by go-jose the
// first time it is seen, with the signature; a client signs every proof
// under the same header, so later proofs whose header is byte-identical to
// one that verified reuse its parsed key and thumbprint (a bounded LRU,
// Options.KeyCacheSize) and their signature is checked by crypto/ecdsa,
// crypto/rsa or crypto/ed25519 over the JWS signing input, as RFC 7518
// §3.3–3.4 and RFC 8037 §3.1 define it. "Ed25519" (RFC 9864, the
// fully-specified name of EdDSA over Ed25519, which current JavaScript
// clients send) is not known to go-jose v4.1.9: for it, go-jose parses the
// JWS and its embedded JWK, and crypto/ed25519 checks the signature
// exactly as for "EdDSA".
package dpop
