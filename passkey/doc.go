// Package passkey is authd's WebAuthn relying party: passkeys (discoverable
// credentials with user verification) as a way to sign in, without HTTP.
//
// The ceremonies (W3C WebAuthn Level 3 §7.1 registration, §7.2
// authentication) use github.com/go-webauthn/webauthn for the options and
// the parsing and checks of the browser's answers; this package keeps the
// state and the policy:
//
//   - A ceremony's state lives in storage between its options and its
//     answer, for 60 seconds, and is taken with a single DELETE: a replayed
//     or retried answer finds nothing, so it cannot register a credential
//     twice or sign anyone in twice. It is bound to the browser that asked
//     for it (the SHA-256 of the page's CSRF token, the session or the
//     enrolment link), compared in constant time.
//   - A sign count that does not move forward (§6.1.1, §7.2 step 22)
//     refuses the assertion and disables the credential in the same
//     conditional write (storage.PasskeyStore.UsePasskey); the event is
//     logged as the audit event passkey.clone_suspected.
//   - A removed credential, a disabled or deleted user and an unknown
//     credential get one answer.
//   - Removing a user's last way in (the password or the last enabled
//     passkey) is refused by storage under the user's row lock.
//
// Verification parses a stored public key once: parsed keys are cached by
// credential ID, so a sign-in costs one signature check and no COSE
// decoding, and no lock is held across a database round trip.
package passkey
