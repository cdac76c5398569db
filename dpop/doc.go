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
// Every signature is checked by go-jose, except the one algorithm name
// go-jose v4.1.9 does not know: "Ed25519" (RFC 9864, the fully-specified
// name of EdDSA over Ed25519, which current JavaScript clients send). For
// it, go-jose parses the JWS and its embedded JWK, and the signature over
// the JWS signing input is checked by crypto/ed25519, exactly as go-jose
// does for "EdDSA" (RFC 8037 §3.1).
package dpop
