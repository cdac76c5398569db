package storage

import (
	"context"
	"time"
)

// LogoutStatus is the state of a logout delivery.
type LogoutStatus string

// Logout delivery states: pending → delivered, or pending → failed (given
// up). A delivered or failed row is never claimed again.
const (
	LogoutPending   LogoutStatus = "pending"
	LogoutDelivered LogoutStatus = "delivered"
	LogoutFailed    LogoutStatus = "failed"
)

// LogoutDelivery is one OpenID Connect Back-Channel Logout 1.0 delivery:
// one logout token for one client, about one ended session. The store
// writes it in the transaction that ends the session (SessionStore), for
// every client that was issued a code with openid for that session
// (NoteSessionClient) and has a BackchannelLogoutURI.
type LogoutDelivery struct {
	// ID is assigned by the store, increasing.
	ID int64
	// EventID names the session end that caused the delivery: every
	// delivery written by one DeleteSession, EndSessions or RevokeSubject
	// call shares it.
	EventID string
	// ClientID is the receiving client; URI its backchannel_logout_uri
	// and Alg its ID token alg ('' for RS256), as read at the claim.
	ClientID string
	URI      string
	Alg      string
	// Subject and SID are the logout token's sub and sid (the ended
	// session's ID, as in the ID tokens the client received).
	Subject string
	SID     string
	// JTI is the logout token's jti, the same on every attempt (§2.4: the
	// receiver recognises a repeat by it).
	JTI    string
	Status LogoutStatus
	// RunAt is when the next attempt is due.
	RunAt time.Time
	// LockedBy is the worker that claimed the row last.
	LockedBy string
	// LeaseUntil is when the current claim expires; zero if none.
	LeaseUntil time.Time
	// Attempts counts claims, including the current one.
	Attempts  int
	LastError string
	// CreatedAt is when the session ended; FinishedAt when the row was
	// delivered or given up (zero while pending).
	CreatedAt  time.Time
	FinishedAt time.Time
}

// Lease identifies the delivery's claim; Attempt fences it as a job's
// Lease does.
func (d *LogoutDelivery) Lease() LogoutLease {
	return LogoutLease{ID: d.ID, Worker: d.LockedBy, Attempt: d.Attempts}
}

// LogoutLease is one claim of a logout delivery.
type LogoutLease struct {
	ID      int64
	Worker  string
	Attempt int
}

// LogoutFilter selects deliveries for ListLogoutDeliveries; zero fields
// match everything.
type LogoutFilter struct {
	Status LogoutStatus
	// Limit caps the result; <= 0 means 100.
	Limit int
}

// LogoutStore is the outbox of back-channel logout deliveries
// (docs/architecture.md, "Back-channel logout"). Like JobStore, every state
// change is a conditional write: a delivery is held by at most one valid
// lease, and a worker that lost its lease changes nothing.
type LogoutStore interface {
	// ClaimLogoutDeliveries claims up to limit due pending deliveries
	// (RunAt passed, no valid lease), oldest RunAt first, skipping rows
	// another claim holds and clients in skip: it sets their lease to d
	// from now, locked by worker, and counts an attempt. An empty result
	// is not an error.
	ClaimLogoutDeliveries(ctx context.Context, worker string, limit int, d time.Duration, skip []string) ([]*LogoutDelivery, error)
	// ExtendLogoutLeases moves the expiry of every lease in ls that is
	// still valid to d from now and returns the IDs whose lease was lost.
	ExtendLogoutLeases(ctx context.Context, ls []LogoutLease, d time.Duration) (lost []int64, err error)
	// FinishLogoutDelivery records an attempt's outcome if l is valid:
	// LogoutDelivered or LogoutFailed (final), or LogoutPending (retry:
	// due again after retryIn), with errMsg as its last error. It returns
	// ErrLeaseLost, changing nothing, if l is not valid.
	FinishLogoutDelivery(ctx context.Context, l LogoutLease, status LogoutStatus, errMsg string, retryIn time.Duration) error
	// ListLogoutDeliveries returns the deliveries matching f, newest
	// first.
	ListLogoutDeliveries(ctx context.Context, f LogoutFilter) ([]*LogoutDelivery, error)
	// CountPendingLogoutDeliveries counts pending deliveries.
	CountPendingLogoutDeliveries(ctx context.Context) (int, error)
}
