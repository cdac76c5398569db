// Package identity is the people side of authd: users with a stable,
// opaque subject and a changeable username, their browser sessions and
// their remembered consents, as typed operations with typed errors.
//
// It is a service without HTTP: cmd/authd's "users" commands call it, the
// oauth package calls it to sign people in, and an admin HTTP adapter can
// map its operations and errors onto status codes. It never imports
// net/http, never formats for a wire, and never logs secrets.
//
// Usernames are compared after PRECIS UsernameCaseMapped (RFC 8265 §3.3:
// width mapping, case folding, NFC, and refusal of characters outside the
// IdentifierClass such as zero-width joiners), so "Alice" and "alice" are
// one account. Passwords are prepared with OpaqueString (RFC 8265 §4.2)
// and hashed with argon2id (package password, OWASP's parameters); a
// bcrypt hash from before still signs its user in, and is replaced by an
// argon2id hash at that sign-in (a conditional write: a password changed
// meanwhile stays). Hashing waits for one of a bounded number of slots
// (password.Hasher), so a burst of sign-ins queues instead of taking every
// core.
//
// Every operation that must end a person's access (a new password,
// disabling, deleting) runs the user's write and storage's RevokeSubject in
// one transaction: the change and the revocation of every session, code,
// access and refresh token commit together or not at all.
package identity

// The operator's operations on users (Admin: create, update and rename,
// set a password, disable, enable, delete, sign out, withdraw a consent,
// list by page) run each write through the Idempotency-Key engine
// (package idempotency): every operation takes the caller's context and
// runs in the transaction it carries (nested operations become
// savepoints), so the engine's transaction (claim the key, do the work,
// store the answer) wraps an operation unchanged. The admin API (package
// adminapi) is a thin HTTP adapter over Admin that maps the typed errors
// onto statuses. The result types (User, Session, Consent, SignedOut,
// UserPage) carry their JSON names and never a password hash or session
// reference.
