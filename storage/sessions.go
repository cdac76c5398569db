package storage

import (
	"context"
	"time"
)

// Session is a browser sign-in session, kept server-side so that it can be
// ended: the cookie holds only a random reference whose hash is ID.
type Session struct {
	// ID is the SHA-256 (hex) of the cookie's reference; the raw reference
	// is never stored.
	ID string
	// Subject is the signed-in user's subject.
	Subject string
	// AuthTime is when the user authenticated (OpenID Connect auth_time).
	AuthTime time.Time
	// AMR lists the authentication methods used (RFC 8176), e.g. "pwd".
	AMR []string
	// IdleExpiresAt moves forward on use (TouchSession); ExpiresAt is the
	// absolute end. The session is valid while now is before both.
	IdleExpiresAt time.Time
	ExpiresAt     time.Time
	// CreatedAt and LastSeenAt are UTC, microsecond precision.
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// TouchGranularity is the smallest step by which TouchSession moves an
// idle expiry: 1% of the idle lifetime (72 s of the default 2 h).
func TouchGranularity(idle time.Duration) time.Duration { return idle / 100 }

// SessionStore keeps browser sessions.
type SessionStore interface {
	// CreateSession inserts sess. It returns ErrAlreadyExists if the ID is
	// taken and ErrNotFound if no user has sess.Subject or that user is
	// disabled. It serializes with a concurrent disable: either the new
	// session is ended by it or none is created.
	CreateSession(ctx context.Context, sess *Session) error
	// GetSession returns the session with this ID if it is valid at now
	// and its user is not disabled, without changing it (a plain read: it
	// never waits for a concurrent write). Otherwise it returns ErrNotFound.
	GetSession(ctx context.Context, id string, now time.Time) (*Session, error)
	// GetSessionUser is GetSession with the session's user, read together
	// (one query where the backend has them): what a request with a
	// session cookie needs. ErrNotFound as GetSession.
	GetSessionUser(ctx context.Context, id string, now time.Time) (*Session, *User, error)
	// GetSessionUserConsent is GetSessionUser with the user's remembered
	// consent for clientID, nil when there is none, and the user's second
	// factors (UserFactors), read together (one query where the backend
	// has them): what an authorization request with a session cookie
	// decides on. ErrNotFound as GetSession.
	GetSessionUserConsent(ctx context.Context, id, clientID string, now time.Time) (*Session, *User, *Consent, UserFactors, error)
	// TouchSession returns the session with this ID if it is valid at now
	// (before both expiries) and its user is not disabled, after moving its
	// idle expiry to min(now+idle, ExpiresAt) and LastSeenAt to now, in one
	// conditional write. The idle expiry moves forward only by
	// TouchGranularity(idle) or more (a session used every few seconds does
	// not rewrite its indexed expiry each time: PostgreSQL updates the row
	// in place, a HOT update, with no index entries), so it may end up to
	// that much earlier than now+idle; it is never left later than
	// now+idle (a lowered idle lifetime applies at the next use).
	// Otherwise it returns ErrNotFound. In PostgreSQL it
	// waits for a concurrent transaction that ends the session (sign-out,
	// RevokeSubject) and then reports ErrNotFound: run in the transaction
	// that stores a code, it makes the code commit only with a live session.
	//
	// A client other than "" is recorded on the session in the same write
	// (a no-op when it is there): it is being issued a code with openid, so
	// will hold ID tokens with the session's sid. The session's end then
	// either waits for the code's transaction and queues the client's
	// back-channel logout, or ended the session first and the code fails.
	// In a deferred transaction it is queued.
	TouchSession(ctx context.Context, id, client string, now time.Time, idle time.Duration) (*Session, error)
	// Every method below that ends sessions (DeleteSession, EndSessions,
	// and UserStore.RevokeSubject) writes, in the same statement or
	// transaction, one LogoutDelivery per (ended session, noted client
	// with a BackchannelLogoutURI), all with one new EventID
	// (OpenID Connect Back-Channel Logout 1.0; LogoutStore).

	// DeleteSession ends one session (sign-out of one browser). Ending a
	// missing session succeeds.
	DeleteSession(ctx context.Context, id string) error
	// ListSessions returns the valid sessions of subject at now, newest
	// first.
	ListSessions(ctx context.Context, subject string, now time.Time) ([]*Session, error)
	// EndSessions ends every session of subject ("sign out everywhere"),
	// and its auth sessions in progress (AuthSessionStore), and returns
	// how many sessions there were. Tokens are not revoked.
	EndSessions(ctx context.Context, subject string) (int, error)
	// TrimSessions ends the sessions of subject beyond its keep newest
	// (by CreatedAt, then ID), as EndSessions ends them (back-channel
	// logouts queued), and returns how many it ended. Concurrent calls
	// leave at most keep.
	TrimSessions(ctx context.Context, subject string, keep int) (int, error)
}
