package storage

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrLeaseLost reports that the caller no longer holds a job's lease: it
// expired, or another worker has claimed the job since. The caller must stop
// working on the job; nothing it writes under that lease may commit.
var ErrLeaseLost = errors.New("storage: job lease lost")

// DefaultJobMaxAttempts is the number of attempts of a job enqueued with
// NewJob.MaxAttempts <= 0.
const DefaultJobMaxAttempts = 5

// JobStatus is the state of a job row.
type JobStatus string

// Job states. A job moves queued → running → done, or running → queued again
// (retry, or its lease expired and another worker claimed it), or
// running → failed after its last attempt.
const (
	// JobQueued waits for its RunAt.
	JobQueued JobStatus = "queued"
	// JobRunning is claimed by LockedBy until LeaseUntil. Once the lease
	// has expired, any worker may claim it again.
	JobRunning JobStatus = "running"
	// JobDone completed; it is never claimed again.
	JobDone JobStatus = "done"
	// JobFailed used up its attempts; LastError says why. It is never
	// claimed again.
	JobFailed JobStatus = "failed"
)

// NewJob describes a job to enqueue.
type NewJob struct {
	// Kind selects the handler; it must not be empty.
	Kind string
	// Payload is the handler's JSON input; nil stores {}.
	Payload json.RawMessage
	// Delay postpones the first run: RunAt is the store's clock plus Delay.
	// Relative to the store's clock (PostgreSQL's now()), so replicas with
	// skewed clocks agree on when a job is due.
	Delay time.Duration
	// MaxAttempts bounds the claims of the job (each claim is one attempt);
	// <= 0 means DefaultJobMaxAttempts.
	MaxAttempts int
	// UniqueKey, if not empty, makes the job a singleton: at most one queued
	// or running job carries a given key (a unique partial index in
	// PostgreSQL), so N replicas enqueuing it at once create one row.
	UniqueKey string
}

// Job is a stored job. Times are UTC, microsecond precision.
type Job struct {
	// ID is assigned by the store, increasing.
	ID int64
	// Kind selects the handler, as enqueued.
	Kind string
	// Payload is the handler's JSON input, as enqueued ({} if none).
	Payload json.RawMessage
	// MaxAttempts bounds the claims of the job.
	MaxAttempts int
	// UniqueKey is the singleton key, as enqueued; empty if none.
	UniqueKey string
	// Status is the job's state.
	Status JobStatus
	// RunAt is when the job is (or was) due.
	RunAt time.Time
	// LockedBy is the worker that claimed the job last; it stays set after
	// the job finished. Empty if the job was never claimed.
	LockedBy string
	// LeaseUntil is when the current lease expires; zero unless running.
	LeaseUntil time.Time
	// Attempts counts the claims so far, including the current one.
	Attempts int
	// LastError is the error of the last failed attempt, or why the last
	// lease was lost; empty if none.
	LastError string
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
	// FinishedAt is when the job became done or failed; zero before.
	FinishedAt time.Time
}

// Lease identifies one claim of a job. Attempt doubles as a fencing token: a
// worker that claimed the same job twice holds two different leases, and only
// the newer one is valid.
type Lease struct {
	// JobID is the claimed job.
	JobID int64
	// Worker is the claiming worker's ID.
	Worker string
	// Attempt is the job's attempt count at the claim.
	Attempt int
}

// Lease returns the lease of the claim that returned j.
func (j *Job) Lease() Lease { return Lease{JobID: j.ID, Worker: j.LockedBy, Attempt: j.Attempts} }

// JobFilter selects jobs for ListJobs. Zero fields match everything.
type JobFilter struct {
	// Kind, if set, selects jobs of that kind.
	Kind string
	// Status, if set, selects jobs in that state.
	Status JobStatus
	// Limit caps the result; <= 0 means 100.
	Limit int
}

// JobStore is a queue of jobs claimed with leases (docs/architecture.md, "Background
// work: leases"). Every state change is a conditional write decided by the
// database, so any number of workers in any number of processes may share
// it: a job is never held by two valid leases at once.
//
// A lease is valid while its job is running, locked by the lease's worker at
// the lease's attempt, and its lease_until has not passed. Every method that
// takes a Lease returns ErrLeaseLost, and changes nothing, when the lease is
// not valid. Called with a context carrying a transaction (BeginTX), the
// methods run in that transaction, so a caller can make its own writes commit
// only together with a lease check.
type JobStore interface {
	// EnqueueJob inserts a queued job and returns its ID and true. If
	// j.UniqueKey is set and a queued or running job already has that key,
	// it inserts nothing and returns 0, false, nil. It is safe to repeat.
	EnqueueJob(ctx context.Context, j NewJob) (id int64, created bool, err error)
	// ClaimJob claims one due job whose kind is in kinds, oldest RunAt
	// first: a queued job whose RunAt has passed, or a running job whose
	// lease has expired (its worker died or paused). The claim sets the job
	// running, locked by worker, with a lease of d from now, and counts an
	// attempt. Concurrent callers never claim the same job: rows locked by
	// another claim are skipped, not waited for. It returns an error matching
	// ErrNotFound when no job is due.
	ClaimJob(ctx context.Context, worker string, kinds []string, d time.Duration) (*Job, error)
	// ExtendLease moves the lease's expiry to d from now (heartbeat), or
	// returns ErrLeaseLost. In a transaction it also locks the job row until
	// the transaction ends, fencing the transaction's other writes: they
	// commit only if the lease was valid, and no other worker can claim the
	// job meanwhile.
	ExtendLease(ctx context.Context, l Lease, d time.Duration) error
	// CompleteJob marks the job done and, if next is not nil, enqueues next
	// (as EnqueueJob, a no-op if its UniqueKey is taken), atomically.
	// It returns ErrLeaseLost, and does neither, if the lease is not valid.
	CompleteJob(ctx context.Context, l Lease, next *NewJob) error
	// RetryJob records errMsg as the job's last error and queues it again
	// to run after delay. It returns ErrLeaseLost if the lease is not valid.
	RetryJob(ctx context.Context, l Lease, errMsg string, delay time.Duration) error
	// FailJob marks the job failed for good with errMsg as its last error
	// and, if next is not nil, enqueues next, atomically. It returns
	// ErrLeaseLost, and does neither, if the lease is not valid.
	FailJob(ctx context.Context, l Lease, errMsg string, next *NewJob) error
	// ListJobs returns the jobs matching f, newest first.
	ListJobs(ctx context.Context, f JobFilter) ([]*Job, error)
}

// Kinds of rows a Cleaner deletes. Each names the table (or map) it cleans.
// Rows go when they expire, active or revoked alike; a row without an
// expiry is kept. Revoked rows are not deleted earlier, on purpose:
//   - a redeemed code must stay until it expires, so that a second
//     redemption still revokes the tokens issued from it (RFC 6749 §4.1.2);
//   - a rotated or revoked refresh token must stay until it expires, so that
//     its reuse still revokes the token family;
//   - a revoked access token is useless but harmless, and goes at most one
//     access token lifetime later. Finding it earlier would cost, per run, a
//     scan of the whole table (no index covers "revoked"; 0.9 s for 1M rows)
//     or an index on it, which would make every revocation and refresh
//     rotation a non-HOT update.
const (
	// CleanupAuthorizeCodes deletes codes that expired.
	CleanupAuthorizeCodes = "authorize_codes"
	// CleanupAccessTokens deletes access tokens that expired.
	CleanupAccessTokens = "access_tokens"
	// CleanupRefreshTokens deletes refresh tokens that expired.
	CleanupRefreshTokens = "refresh_tokens"
	// CleanupPKCESessions deletes PKCE sessions whose code expired.
	CleanupPKCESessions = "pkce_sessions"
	// CleanupPushedRequests deletes pushed authorization requests (RFC
	// 9126) that expired, used or not.
	CleanupPushedRequests = "pushed_requests"
	// CleanupClientAssertionJWTs deletes used client assertion JTIs that
	// expired (RFC 7523 §3).
	CleanupClientAssertionJWTs = "client_assertion_jwts"
	// CleanupIdempotencyKeys deletes admin idempotency keys that expired.
	CleanupIdempotencyKeys = "idempotency_keys"
	// CleanupSessions deletes browser sessions past their idle or absolute
	// expiry.
	CleanupSessions = "sessions"
	// CleanupJobs deletes done and failed jobs that finished before the
	// cutoff (the caller passes now minus its retention).
	CleanupJobs = "jobs"
	// CleanupReplayRecords deletes durable replay records whose window
	// closed (docs/architecture.md, "The exchange").
	CleanupReplayRecords = "replay_records"
	// CleanupFederationExchanges deletes the marks of provider ID tokens
	// exchanged natively once the tokens expired (they could not be
	// presented again anyway).
	CleanupFederationExchanges = "federation_exchanges"
	// CleanupFederationLogins deletes browser sign-ins at a provider that
	// were never finished.
	CleanupFederationLogins = "federation_logins"
	// CleanupAccountFlows deletes pending self-service steps (sign-ups,
	// recoveries, email changes) that expired, used or not.
	CleanupAccountFlows = "account_flows"
	// CleanupMailOutbox deletes outbox rows that finished (sent or given
	// up; their data was erased then) before the cutoff.
	CleanupMailOutbox = "mail_outbox"
	// CleanupLogoutDeliveries deletes back-channel logout deliveries that
	// were delivered or given up before the cutoff (the caller passes now
	// minus its retention, as for CleanupJobs).
	CleanupLogoutDeliveries = "logout_deliveries"
	// CleanupPasskeyCeremonies deletes passkey ceremonies never answered
	// (a sign-in page's autofill request, a closed tab) once expired.
	CleanupPasskeyCeremonies = "passkey_ceremonies"
	// CleanupPasskeyLinks deletes enrolment links that expired unused.
	CleanupPasskeyLinks = "passkey_links"
	// CleanupAuthSessions deletes the challenge endpoint's auth sessions
	// once expired (done or not).
	CleanupAuthSessions = "auth_sessions"
)

// Cleaner deletes expired rows in bounded batches, so no call holds locks
// for long.
type Cleaner interface {
	// CleanupKinds returns the Cleanup* kinds this store holds, in a fixed
	// order.
	CleanupKinds(ctx context.Context) ([]string, error)
	// DeleteExpired deletes up to limit rows of kind that are expired as of
	// before (see the Cleanup* constants) and returns how many it deleted;
	// fewer than limit means none is left. It is one statement: rows locked
	// by concurrent transactions are skipped, never waited for. It returns
	// an error matching ErrNotFound for a kind the store does not hold. It
	// is safe to repeat and to call concurrently.
	DeleteExpired(ctx context.Context, kind string, before time.Time, limit int) (int, error)
}
