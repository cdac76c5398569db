package storage

import (
	"context"
	"time"
)

// AuthSession is one native sign-in in progress at the Authorization
// Challenge Endpoint (draft-ietf-oauth-first-party-apps-04 §5.2.2, the
// auth_session; package authsession): who it is for and what the user has
// proven so far. Nothing in it is usable on its own: ID is the SHA-256 of
// the handle the app holds.
type AuthSession struct {
	ID       string
	ClientID string
	// JKT is the thumbprint of the DPoP key of the first request ("" when
	// it had no proof): every later request must prove the same key.
	JKT string
	// CodeChallenge is the PKCE S256 challenge the code will carry.
	CodeChallenge string
	// Params is the authorization request's other parameters, URL-encoded.
	Params string
	// Subject, AMR and AuthTime: the user once known, the RFC 8176 values
	// proven so far, when the first proof was made.
	Subject  string
	AMR      []string
	AuthTime time.Time
	// Version moves by one on every step (UpdateAuthSession).
	Version int
	// Done: a code was issued; nothing may continue it.
	Done      bool
	ExpiresAt time.Time
	CreatedAt time.Time
}

// AuthSessionStore keeps auth sessions.
type AuthSessionStore interface {
	// CreateAuthSession inserts a; ErrAlreadyExists if its ID is taken,
	// ErrNotFound if its client does not exist.
	CreateAuthSession(ctx context.Context, a *AuthSession) error
	// GetAuthSession returns the session with this ID if it is open (not
	// Done) and unexpired at now; otherwise ErrNotFound. A plain read.
	GetAuthSession(ctx context.Context, id string, now time.Time) (*AuthSession, error)
	// UpdateAuthSession writes a's Subject, AMR, AuthTime and Done if the
	// stored session is still at a.Version, open and unexpired at now (one
	// conditional write), and moves a.Version by one. Otherwise it
	// returns ErrNotFound: another step advanced it first, it ended, or it
	// expired. In a transaction, a concurrent update of the same session
	// waits for it and then finds the version moved. In a deferred
	// transaction (Batcher) a backend may queue this write and
	// CreateAuthSession: their errors are then the commit's.
	UpdateAuthSession(ctx context.Context, a *AuthSession, now time.Time) error
	// DeleteExpiredAuthSessions deletes up to limit sessions expired at
	// now and returns how many it deleted.
	DeleteExpiredAuthSessions(ctx context.Context, now time.Time, limit int) (int, error)
}
