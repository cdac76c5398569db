package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// User is a resource owner who signs in on the login page.
type User struct {
	// Subject is the stable, opaque, random identifier of the user: the
	// "sub" of every token and introspection answer. It never changes and
	// is never reused; CreateUser sets it (NewSubject) when empty.
	Subject string
	// Username is the login name, unique, stored already prepared with
	// PRECIS UsernameCaseMapped (RFC 8265 §3.3) by the identity package;
	// the store compares it byte for byte. It can change (RenameUser).
	Username string
	// PasswordHash is a hash (package password: an argon2id PHC string,
	// or a bcrypt hash from before) of the password prepared with PRECIS
	// OpaqueString (RFC 8265 §4.2).
	PasswordHash []byte
	// Email, EmailVerified and Name are profile fields for claims.
	Email         string
	EmailVerified bool
	Name          string
	// Disabled users cannot sign in.
	Disabled bool
	// CreatedAt and UpdatedAt are UTC, microsecond precision.
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewSubject returns a fresh random subject identifier: 128 random bits,
// hex-encoded (the form migration 005 gives existing users).
func NewSubject() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	return hex.EncodeToString(b[:])
}

// UserStore manages resource owners. Users are addressed by Subject except
// for the login lookup GetUser.
//
// The writes that must end a person's access (SetUserPassword,
// SetUserDisabled(true), DeleteUser) do only their own row; the caller runs
// them in one transaction (BeginTX) with RevokeSubject, which is the one
// method that ends sessions and revokes codes and tokens of a subject.
type UserStore interface {
	// CreateUser inserts u, or returns ErrAlreadyExists if the username or
	// subject is taken. It sets u.Subject (NewSubject) when empty and
	// u.CreatedAt/UpdatedAt when zero.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns the user with this (prepared) username, or
	// ErrNotFound. The comparison is exact.
	GetUser(ctx context.Context, username string) (*User, error)
	// GetUserBySubject returns the user with this subject, or ErrNotFound.
	GetUserBySubject(ctx context.Context, subject string) (*User, error)
	// ListUsers returns up to limit users with Username > after, ordered by
	// Username (byte order).
	ListUsers(ctx context.Context, after string, limit int) ([]*User, error)
	// UpdateUserProfile replaces Email, EmailVerified and Name of the user
	// with u.Subject, or returns ErrNotFound.
	UpdateUserProfile(ctx context.Context, u *User) error
	// RenameUser changes the username of subject. It returns ErrNotFound
	// for an unknown subject and ErrAlreadyExists if the name is taken.
	// The subject, and so every grant, is unchanged.
	RenameUser(ctx context.Context, subject, username string) error
	// SetUserPassword replaces the password hash, or returns ErrNotFound.
	SetUserPassword(ctx context.Context, subject string, hash []byte) error
	// UpgradePasswordHash replaces the password hash with newHash only if
	// it is still exactly oldHash (a rehash of the same password after a
	// sign-in: a password set meanwhile is never overwritten). It reports
	// whether it replaced it; an unknown subject is (false, nil). It
	// leaves UpdatedAt alone: the password has not changed.
	UpgradePasswordHash(ctx context.Context, subject string, oldHash, newHash []byte) (bool, error)
	// SetUserDisabled sets or clears Disabled, or returns ErrNotFound.
	SetUserDisabled(ctx context.Context, subject string, disabled bool) error
	// DeleteUser deletes the user, its sessions and its consents, or
	// returns ErrNotFound. Its codes and tokens stay (inactive, once the
	// caller has run RevokeSubject) until they expire.
	DeleteUser(ctx context.Context, subject string) error
	// RevokeSubject ends every session of subject, ends its auth sessions
	// in progress (a native sign-in whose first factor the change voids,
	// draft-ietf-oauth-first-party-apps-04 §9) and deactivates every
	// authorization code, access token and refresh token issued to it,
	// in one transaction (its own, or the caller's). A refresh racing with
	// it cannot leave a live token pair: like RevokeRefreshToken it takes
	// the grant lock of each grant, and tokens minted for those grants
	// afterwards are born inactive. Revoking a subject with nothing to
	// revoke succeeds. It is safe to repeat.
	RevokeSubject(ctx context.Context, subject string) error
}
