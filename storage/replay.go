package storage

import (
	"context"
	"time"
)

// ReplayRecord is the durable copy of one exchange's answer
// (docs/architecture.md, "The exchange"): written in the transaction that
// redeems an authorization code or rotates a refresh token, read when a
// retry finds nothing usable in the replay cache.
//
// Nothing in it is usable on its own (principle 4): Key and Fingerprint are
// hashes, and Sealed is encrypted under a key derived from the system secret
// and the code_verifier (or refresh token) the client presented.
type ReplayRecord struct {
	// Key is "c:" + the authorization code's signature or "r:" + the
	// refresh token's signature; unique.
	Key string
	// RequestID is the grant (fosite request ID) the response belongs to;
	// revoking the grant revokes the record.
	RequestID string
	// ClientID is the client the tokens were issued to.
	ClientID string
	// Subject is the resource owner's subject.
	Subject string
	// Fingerprint is exchangecache.Fingerprint of the first request.
	Fingerprint string
	// Sealed is the sealed response (exchangecache.Seal).
	Sealed []byte
	// WindowEnd is when the replay window closes (UTC, microseconds).
	WindowEnd time.Time
	// Revoked reports that the grant was revoked, or the response
	// superseded by a later rotation of the grant's refresh token, since
	// the record was written.
	Revoked bool
}

// ReplayScope selects replay records: the fields set are ANDed; at least
// one must be set.
type ReplayScope struct {
	// RequestID selects the records of one grant.
	RequestID string
	// ClientID selects the records of one client.
	ClientID string
	// Subject selects the records of one resource owner.
	Subject string
}

// ReplayStore keeps the durable replay records; they are written by
// Batcher.CommitWithReplayRecord, in the redeeming transaction.
//
// Revocation contract, honoured by every backend: RevokeAccessToken and
// RevokeRefreshToken of a request ID mark that grant's records Revoked in
// the same transaction, as do RevokeSubject (a user's) and RevokeConsent
// (a user's for one client); DeleteClient and DeleteUser's RevokeSubject
// leave no record usable.
type ReplayStore interface {
	// GetReplayRecord returns the record with key, whatever its window or
	// revocation, or ErrNotFound. The caller owns the result.
	GetReplayRecord(ctx context.Context, key string) (*ReplayRecord, error)
	// DeleteEndedReplayRecord deletes the record with key if its window
	// ended at now (nothing else; no error when there is none), so that
	// a request whose key recurs (a challenge step's input sent again)
	// can record its answer before the janitor has run.
	DeleteEndedReplayRecord(ctx context.Context, key string, now time.Time) error
	// ReplayKeys returns the keys of the records in scope (any order), so
	// that a revocation can drop their cache entries.
	ReplayKeys(ctx context.Context, scope ReplayScope) ([]string, error)
}
