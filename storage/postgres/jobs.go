package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var (
	_ storage.JobStore = (*Store)(nil)
	_ storage.Cleaner  = (*Store)(nil)
)

// Lease arithmetic uses statement_timestamp(): the database's clock is the
// one every replica agrees on, and unlike now() it does not stand still for
// the length of a transaction.

// jobColumns lists the columns scanJob reads, in order.
const jobColumns = `id, kind, payload, status, run_at, locked_by, lease_until, attempts,
	max_attempts, last_error, unique_key, created_at, finished_at`

// leaseHeld is the condition under which the lease ($1 job ID, $2 worker,
// $3 attempt) is valid.
const leaseHeld = `id = $1 AND locked_by = $2 AND attempts = $3 AND status = 'running'
	AND lease_until > statement_timestamp()`

// micros converts d to microseconds, to be multiplied with
// interval '1 microsecond' in SQL.
func micros(d time.Duration) int64 { return d.Microseconds() }

func scanJob(row pgx.Row) (*storage.Job, error) {
	var (
		j                              storage.Job
		status                         string
		payload                        []byte
		lockedBy, lastError, uniqueKey *string
		leaseUntil, finishedAt         *time.Time
	)
	err := row.Scan(&j.ID, &j.Kind, &payload, &status, &j.RunAt, &lockedBy, &leaseUntil,
		&j.Attempts, &j.MaxAttempts, &lastError, &uniqueKey, &j.CreatedAt, &finishedAt)
	if err != nil {
		return nil, err
	}
	j.Payload = payload
	j.Status = storage.JobStatus(status)
	j.RunAt = storage.NormalizeTime(j.RunAt)
	j.CreatedAt = storage.NormalizeTime(j.CreatedAt)
	if lockedBy != nil {
		j.LockedBy = *lockedBy
	}
	if lastError != nil {
		j.LastError = *lastError
	}
	if uniqueKey != nil {
		j.UniqueKey = *uniqueKey
	}
	if leaseUntil != nil {
		j.LeaseUntil = storage.NormalizeTime(*leaseUntil)
	}
	if finishedAt != nil {
		j.FinishedAt = storage.NormalizeTime(*finishedAt)
	}
	return &j, nil
}

// EnqueueJob inserts a queued job (see storage.JobStore). A job whose
// UniqueKey is held by a queued or running job is not inserted: the unique
// partial index decides, so concurrent calls create one row.
func (s *Store) EnqueueJob(ctx context.Context, j storage.NewJob) (int64, bool, error) {
	if j.Kind == "" {
		return 0, false, errors.New("postgres: enqueue job: empty kind")
	}
	payload := string(j.Payload)
	if len(j.Payload) == 0 {
		payload = "{}"
	}
	maxAttempts := j.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = storage.DefaultJobMaxAttempts
	}
	var uniqueKey any
	if j.UniqueKey != "" {
		uniqueKey = j.UniqueKey
	}
	var id int64
	err := s.q(ctx).QueryRow(ctx, `INSERT INTO jobs (kind, payload, run_at, max_attempts, unique_key)
		VALUES ($1, $2, statement_timestamp() + $3 * interval '1 microsecond', $4, $5)
		ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND status IN ('queued', 'running')
		DO NOTHING
		RETURNING id`, j.Kind, payload, micros(j.Delay), maxAttempts, uniqueKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, translate(fmt.Sprintf("enqueue job %q", j.Kind), err)
	}
	return id, true, nil
}

// ClaimJob claims one due job with
// UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING
// (see storage.JobStore). Taking over a running job whose lease expired
// records that in last_error. An empty kinds matches every kind.
func (s *Store) ClaimJob(ctx context.Context, worker string, kinds []string, d time.Duration) (*storage.Job, error) {
	if kinds == nil {
		kinds = []string{}
	}
	j, err := scanJob(s.q(ctx).QueryRow(ctx, `UPDATE jobs SET
			status = 'running', locked_by = $1, attempts = attempts + 1,
			lease_until = statement_timestamp() + $3 * interval '1 microsecond',
			last_error = CASE WHEN status = 'running'
				THEN format('attempt %s: lease of %s expired', attempts, locked_by)
				ELSE last_error END
		WHERE id = (
			SELECT id FROM jobs
			WHERE status IN ('queued', 'running') AND run_at <= statement_timestamp()
				AND (status = 'queued' OR lease_until <= statement_timestamp())
				AND (cardinality($2::text[]) = 0 OR kind = ANY ($2))
			ORDER BY run_at, id
			LIMIT 1
			FOR UPDATE SKIP LOCKED)
		RETURNING `+jobColumns, worker, kinds, micros(d)))
	if err != nil {
		return nil, translate("claim job", err)
	}
	return j, nil
}

// ExtendLease renews the lease with a conditional UPDATE (see
// storage.JobStore); in a transaction, the row lock it takes fences the
// transaction's other writes.
func (s *Store) ExtendLease(ctx context.Context, l storage.Lease, d time.Duration) error {
	tag, err := s.q(ctx).Exec(ctx, `UPDATE jobs
		SET lease_until = statement_timestamp() + $4 * interval '1 microsecond'
		WHERE `+leaseHeld, l.JobID, l.Worker, l.Attempt, micros(d))
	if err != nil {
		return translate(fmt.Sprintf("extend lease of job %d", l.JobID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: extend lease of job %d: %w", l.JobID, storage.ErrLeaseLost)
	}
	return nil
}

// finish runs the conditional UPDATE set (arguments from $4 on: args) on the
// job of lease l and, if it won and next is not nil, enqueues next, in one
// transaction (a savepoint if ctx carries one).
func (s *Store) finish(ctx context.Context, op string, l storage.Lease, next *storage.NewJob, set string, args ...any) error {
	op = fmt.Sprintf("%s job %d", op, l.JobID)
	return storage.InTx(ctx, s, func(tx context.Context) error {
		tag, err := s.q(tx).Exec(tx, `UPDATE jobs SET `+set+` WHERE `+leaseHeld,
			append([]any{l.JobID, l.Worker, l.Attempt}, args...)...)
		if err != nil {
			return translate(op, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("postgres: %s: %w", op, storage.ErrLeaseLost)
		}
		if next != nil {
			if _, _, err := s.EnqueueJob(tx, *next); err != nil {
				return err
			}
		}
		return nil
	})
}

// CompleteJob marks the job done and enqueues next, atomically, if the lease
// is valid (see storage.JobStore).
func (s *Store) CompleteJob(ctx context.Context, l storage.Lease, next *storage.NewJob) error {
	return s.finish(ctx, "complete", l, next,
		`status = 'done', lease_until = NULL, finished_at = statement_timestamp()`)
}

// RetryJob queues the job again after delay, if the lease is valid (see
// storage.JobStore).
func (s *Store) RetryJob(ctx context.Context, l storage.Lease, errMsg string, delay time.Duration) error {
	return s.finish(ctx, "retry", l, nil, `status = 'queued', lease_until = NULL, last_error = $4,
		run_at = statement_timestamp() + $5 * interval '1 microsecond'`, errMsg, micros(delay))
}

// FailJob marks the job failed and enqueues next, atomically, if the lease
// is valid (see storage.JobStore).
func (s *Store) FailJob(ctx context.Context, l storage.Lease, errMsg string, next *storage.NewJob) error {
	return s.finish(ctx, "fail", l, next, `status = 'failed', lease_until = NULL, last_error = $4,
		finished_at = statement_timestamp()`, errMsg)
}

// ListJobs returns the jobs matching f, newest first.
func (s *Store) ListJobs(ctx context.Context, f storage.JobFilter) ([]*storage.Job, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+jobColumns+` FROM jobs
		WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR status = $2)
		ORDER BY id DESC LIMIT $3`, f.Kind, string(f.Status), limit)
	if err != nil {
		return nil, translate("list jobs", err)
	}
	defer rows.Close()
	out := []*storage.Job{}
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, translate("list jobs", err)
		}
		out = append(out, j)
	}
	return out, translate("list jobs", rows.Err())
}

// cleanupWhere is, per kind, the table and the condition ($1: the cutoff)
// of the rows DeleteExpired deletes (see the storage.Cleanup* constants).
var cleanupWhere = []struct{ kind, where string }{
	{storage.CleanupAuthorizeCodes, `expires_at < $1`},
	{storage.CleanupAccessTokens, `expires_at < $1`},
	{storage.CleanupRefreshTokens, `expires_at < $1`},
	{storage.CleanupPKCESessions, `expires_at < $1`},
	{storage.CleanupPushedRequests, `expires_at < $1`},
	{storage.CleanupClientAssertionJWTs, `expires_at < $1`},
	{storage.CleanupIdempotencyKeys, `expires_at <= $1`},
	{storage.CleanupSessions, `least(idle_expires_at, expires_at) < $1`},
	{storage.CleanupJobs, `status IN ('done', 'failed') AND finished_at < $1`},
	{storage.CleanupReplayRecords, `window_end < $1`},
	{storage.CleanupFederationExchanges, `expires_at < $1`},
	{storage.CleanupFederationLogins, `expires_at < $1`},
	{storage.CleanupAccountFlows, `expires_at < $1`},
	{storage.CleanupMailOutbox, `status <> 'pending' AND finished_at < $1`},
	{storage.CleanupLogoutDeliveries, `status <> 'pending' AND finished_at < $1`},
	{storage.CleanupPasskeyCeremonies, `expires_at < $1`},
	{storage.CleanupPasskeyLinks, `expires_at < $1`},
	{storage.CleanupAuthSessions, `expires_at < $1`},
}

// CleanupKinds returns every storage.Cleanup* kind: the schema holds them
// all.
func (s *Store) CleanupKinds(context.Context) ([]string, error) {
	kinds := make([]string, len(cleanupWhere))
	for i, c := range cleanupWhere {
		kinds[i] = c.kind
	}
	return kinds, nil
}

// DeleteExpired deletes up to limit expired rows of kind in one statement
// (see storage.Cleaner):
//
//	DELETE FROM t WHERE ctid = ANY (ARRAY (SELECT ctid FROM t WHERE cond
//	    LIMIT n FOR UPDATE SKIP LOCKED)) AND cond
//
// The batch is found through the expiry index (every condition is a range
// of it), addressed by ctid (no second index lookup), and rows that a token exchange or revocation holds locked
// are skipped instead of waited for, so the janitor never blocks the hot path
// and cannot take part in a deadlock. cond is checked again on the row
// actually deleted.
func (s *Store) DeleteExpired(ctx context.Context, kind string, before time.Time, limit int) (int, error) {
	for _, c := range cleanupWhere {
		if c.kind != kind {
			continue
		}
		// kind is a fixed table name from cleanupWhere, never input.
		tag, err := s.q(ctx).Exec(ctx, `DELETE FROM `+kind+` WHERE ctid = ANY (ARRAY (
			SELECT ctid FROM `+kind+` WHERE `+c.where+` LIMIT $2 FOR UPDATE SKIP LOCKED)) AND `+c.where,
			before, limit)
		if err != nil {
			return 0, translate("delete expired "+kind, err)
		}
		return int(tag.RowsAffected()), nil
	}
	return 0, fmt.Errorf("postgres: delete expired %q: unknown kind: %w", kind, storage.ErrNotFound)
}
