// Package pkce enforces Proof Key for Code Exchange (RFC 7636) for authd.
//
// It has two parts:
//
//   - Pure policy functions: [ValidateVerifier], [ValidateChallenge],
//     [S256Challenge] and [Verify]. They do no I/O and return the sentinel
//     errors declared in this package, so callers decide with errors.Is.
//   - [Handler], the fosite authorize and token endpoint handler that applies
//     that policy to the authorization code grant. It must be registered
//     after fosite's authorize code handler, because it binds the challenge to
//     the code that handler produced.
//
// Policy: PKCE is required for every client and every authorization code
// (RFC 9700 §2.1.1), and only the S256 method is accepted unless
// [Handler.AllowPlain] is set (RFC 7636 §4.2: a client that can use S256 MUST
// use it).
//
// What this package must never do:
//
//   - I/O beyond the three fosite PKCERequestStorage calls made by [Handler];
//   - consume an authorization code, or its PKCE session, on a failed
//     verification: a wrong code_verifier leaves the code redeemable with the
//     right one (fosite v0.49.0's own handler deletes the session first);
//   - log, store, or put into an error message a code_verifier.
package pkce
