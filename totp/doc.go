// Package totp is the authenticator-app factor's rules and storage: RFC 6238
// time-based one-time passwords (30-second steps, six digits, HMAC-SHA-1,
// one step of clock skew either way) through github.com/pquerna/otp, and
// ten single-use recovery codes.
//
// It knows no HTTP. It never stores a secret in the clear (the TOTP secret
// is sealed with AES-256-GCM under a key derived from the system secret and
// bound to the user's subject; recovery codes are stored as keyed hashes),
// never logs a secret or a code, and decides "was this code already used?"
// with one conditional write (storage.FactorStore.UseTOTPStep,
// UseRecoveryCode), never a read followed by a write.
package totp
