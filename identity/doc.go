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

// The admin HTTP adapter (/admin/users…, oauth/admin_users.go) is a thin
// layer on top: every operation takes the caller's context and runs in the
// transaction it carries (nested operations become savepoints), so the
// admin API's Idempotency-Key engine (claim the key, do the work, store the
// response, all in one transaction: clientadmin.Service.Write) wraps an
// operation unchanged. The adapter maps the typed errors onto statuses:
// ErrInvalidUsername, ErrInvalidPassword, ErrInvalidProfile → 400;
// ErrUserNotFound, ErrConsentNotFound → 404; ErrUserExists → 409. The
// result types (User, Session, Consent) carry their JSON names and never a
// password hash or session reference.
