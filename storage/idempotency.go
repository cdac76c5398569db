package storage

import (
	"context"
	"errors"
	"time"
)

// Idempotency sentinels (docs/architecture.md, "Admin writes"). fosite has no such
// concepts, so these are authd's own.
var (
	// ErrIdempotencyInFlight is returned by ClaimIdempotencyKey when another
	// transaction holds the same key and has not finished yet. The caller
	// answers 409 and the client retries later.
	ErrIdempotencyInFlight = errors.New("storage: idempotency key in flight")
	// ErrIdempotencyKeyReused is returned by ClaimIdempotencyKey when the key
	// was already used, within its scope, for a request with another
	// request hash. The caller answers 422.
	ErrIdempotencyKeyReused = errors.New("storage: idempotency key reused with a different request")
)

// IdempotencyKey identifies one Idempotency-Key within its scope. Nothing in
// it is usable on its own: the credential and the key are keyed hashes, never
// the raw values (docs/architecture.md, principle 4).
type IdempotencyKey struct {
	// Credential is a keyed hash of the admin credential that sent the
	// request. Keys of different credentials never collide.
	Credential []byte
	// Endpoint names the operation, e.g. "POST /admin/clients" or
	// "PUT /admin/clients/abc". Keys of different endpoints never collide.
	Endpoint string
	// KeyHash is a keyed hash of the raw Idempotency-Key header value.
	KeyHash []byte
}

// IdempotencyClaim is what ClaimIdempotencyKey records for a new key.
type IdempotencyClaim struct {
	IdempotencyKey
	// RequestHash fingerprints the request (a hash of its canonical JSON
	// body): a retry must present the same one.
	RequestHash []byte
	// CreatedAt is the request's arrival; an existing record whose
	// ExpiresAt is not after CreatedAt is treated as absent.
	CreatedAt time.Time
	// ExpiresAt is when the record may be forgotten (default policy: 24h
	// after CreatedAt).
	ExpiresAt time.Time
}

// IdempotencyRecord is a stored Idempotency-Key and, once completed, the
// response to replay.
type IdempotencyRecord struct {
	IdempotencyKey
	// RequestHash is the claim's request fingerprint.
	RequestHash []byte
	// Status is the HTTP status of the stored response; 0 while in flight.
	Status int
	// Response is the stored response body, sealed by the caller (the store
	// never sees it in the clear); nil while in flight.
	Response []byte
	// CreatedAt and ExpiresAt are UTC, microsecond precision.
	CreatedAt time.Time
	ExpiresAt time.Time
}

// IdempotencyStore records Idempotency-Keys of admin writes so that a retried
// request gets the stored response instead of repeating the effect
// (docs/architecture.md, "Admin writes"; draft-ietf-httpapi-idempotency-key-header).
//
// The protocol, all in ONE transaction from BeginTX:
//
//	ClaimIdempotencyKey → (claimed) do the work → CompleteIdempotencyKey → Commit
//
// A rollback at any point removes the claim, so a failed request leaves no
// key behind and can be retried with the same key.
type IdempotencyStore interface {
	// ClaimIdempotencyKey claims c's key for the transaction carried by ctx;
	// it returns an error if ctx carries none. It is a conditional write: of
	// any number of concurrent claims of one key, exactly one gets
	// claimed == true and holds the key until its transaction ends.
	//
	//   - New key (or the stored record expired at c.CreatedAt): the key is
	//     recorded as in flight; returns (nil, true, nil).
	//   - Completed record with the same RequestHash: returns (record,
	//     false, nil); the caller replays record.Status and record.Response
	//     and writes nothing.
	//   - Completed record with another RequestHash: ErrIdempotencyKeyReused.
	//   - Held by a transaction that has not finished (or a record left
	//     uncompleted): ErrIdempotencyInFlight, without waiting.
	//
	// Safe to repeat; it never blocks on another holder of the key.
	ClaimIdempotencyKey(ctx context.Context, c IdempotencyClaim) (stored *IdempotencyRecord, claimed bool, err error)
	// CompleteIdempotencyKey stores the response of a key this transaction
	// claimed. status must be non-zero. It returns ErrNotFound if the key is
	// not claimed and in flight (never claimed, or already completed).
	CompleteIdempotencyKey(ctx context.Context, k IdempotencyKey, status int, response []byte) error
}
