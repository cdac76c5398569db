package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.LogoutStore = (*Store)(nil)

// endSessionsSQL ends the sessions matching cond (over sessions' columns,
// with the statement's parameters) and queues their back-channel logouts in
// one statement: the DELETE waits for a transaction that holds a session's
// row lock (a code's issue: TouchSession, NoteSessionClient) and returns
// the row as that transaction left it, so a client noted by a code that
// committed first is in rp_clients. One event ID for the whole statement
// (a CTE with a volatile function is evaluated once). It answers the number
// of sessions ended.
func endSessionsSQL(cond string) string {
	return `WITH ended AS (DELETE FROM sessions WHERE ` + cond + ` RETURNING id, subject, rp_clients),
		ev AS (SELECT gen_random_uuid() AS id),
		queued AS (INSERT INTO logout_deliveries (event_id, client_id, subject, sid)
			SELECT ev.id, c.id, e.subject, e.id
			FROM ended e CROSS JOIN ev CROSS JOIN LATERAL unnest(e.rp_clients) AS rc (client_id)
			JOIN clients c ON c.id = rc.client_id AND c.backchannel_logout_uri <> ''
			ON CONFLICT DO NOTHING RETURNING 1)
		SELECT count(*) FROM ended`
}

// signOutClientSQL queues a back-channel logout of client $2 for every
// session of subject $1 it was noted in, and forgets it there, without
// ending the sessions: the consent was withdrawn ("signs the app out",
// the account page). Like endSessionsSQL, the UPDATE waits for a code's
// transaction holding a session's lock and sees its note.
const signOutClientSQL = `WITH noted AS (UPDATE sessions SET rp_clients = array_remove(rp_clients, $2)
			WHERE subject = $1 AND $2 = ANY (rp_clients) RETURNING id, subject),
		ev AS (SELECT gen_random_uuid() AS id)
	INSERT INTO logout_deliveries (event_id, client_id, subject, sid)
	SELECT ev.id, c.id, n.subject, n.id
	FROM noted n CROSS JOIN ev JOIN clients c ON c.id = $2 AND c.backchannel_logout_uri <> ''
	ON CONFLICT DO NOTHING`

// NoteSessionClient adds clientID to the session's rp_clients with a
// conditional UPDATE (a no-op when there), without touching the session;
// queued in a deferred transaction. authd notes a client with
// TouchSession; this is the tests' way (storagetest.BackendMethods).
func (s *Store) NoteSessionClient(ctx context.Context, sessionID, clientID string) error {
	const sql = `UPDATE sessions SET rp_clients = rp_clients || $2::text
		WHERE id = $1 AND NOT ($2 = ANY (rp_clients))`
	if s.enqueue(ctx, "note session client", sql, sessionID, clientID) {
		return nil
	}
	_, err := s.q(ctx).Exec(ctx, sql, sessionID, clientID)
	return translate("note session client", err)
}

const logoutColumns = `d.id, d.event_id::text, d.client_id, c.backchannel_logout_uri, c.id_token_signed_response_alg,
	d.subject, d.sid, d.jti::text, d.status, d.run_at, d.locked_by, d.lease_until, d.attempts, d.last_error,
	d.created_at, d.finished_at`

func scanLogout(row pgx.Row) (*storage.LogoutDelivery, error) {
	var (
		d                      storage.LogoutDelivery
		status                 string
		lockedBy, lastError    *string
		leaseUntil, finishedAt *time.Time
	)
	if err := row.Scan(&d.ID, &d.EventID, &d.ClientID, &d.URI, &d.Alg, &d.Subject, &d.SID, &d.JTI, &status,
		&d.RunAt, &lockedBy, &leaseUntil, &d.Attempts, &lastError, &d.CreatedAt, &finishedAt); err != nil {
		return nil, err
	}
	d.Status = storage.LogoutStatus(status)
	d.RunAt, d.CreatedAt = storage.NormalizeTime(d.RunAt), storage.NormalizeTime(d.CreatedAt)
	if lockedBy != nil {
		d.LockedBy = *lockedBy
	}
	if lastError != nil {
		d.LastError = *lastError
	}
	if leaseUntil != nil {
		d.LeaseUntil = storage.NormalizeTime(*leaseUntil)
	}
	if finishedAt != nil {
		d.FinishedAt = storage.NormalizeTime(*finishedAt)
	}
	return &d, nil
}

func collectLogouts(rows pgx.Rows, err error, op string) ([]*storage.LogoutDelivery, error) {
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	out := []*storage.LogoutDelivery{}
	for rows.Next() {
		d, err := scanLogout(rows)
		if err != nil {
			return nil, translate(op, err)
		}
		out = append(out, d)
	}
	return out, translate(op, rows.Err())
}

// ClaimLogoutDeliveries claims a chunk with UPDATE … WHERE id = ANY (ARRAY
// (SELECT … FOR UPDATE SKIP LOCKED LIMIT n)) (see storage.LogoutStore), as
// ClaimJob claims one job.
func (s *Store) ClaimLogoutDeliveries(ctx context.Context, worker string, limit int, d time.Duration, skip []string) ([]*storage.LogoutDelivery, error) {
	if skip == nil {
		skip = []string{}
	}
	rows, err := s.q(ctx).Query(ctx, `UPDATE logout_deliveries d SET
			locked_by = $1, attempts = d.attempts + 1,
			lease_until = statement_timestamp() + $3 * interval '1 microsecond',
			last_error = CASE WHEN d.lease_until IS NOT NULL
				THEN format('attempt %s: lease of %s expired', d.attempts, d.locked_by)
				ELSE d.last_error END
		FROM clients c
		WHERE c.id = d.client_id AND d.id = ANY (ARRAY (
			SELECT id FROM logout_deliveries
			WHERE status = 'pending' AND run_at <= statement_timestamp()
				AND (lease_until IS NULL OR lease_until <= statement_timestamp())
				AND NOT (client_id = ANY ($4::text[]))
			ORDER BY run_at, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED))
		RETURNING `+logoutColumns, worker, limit, micros(d), skip)
	return collectLogouts(rows, err, "claim logout deliveries")
}

// logoutLeaseHeld is the condition under which the lease ($1 ID, $2
// worker, $3 attempt) is valid.
const logoutLeaseHeld = `id = $1 AND locked_by = $2 AND attempts = $3 AND status = 'pending'
	AND lease_until > statement_timestamp()`

// ExtendLogoutLeases renews every valid lease of ls in one UPDATE.
func (s *Store) ExtendLogoutLeases(ctx context.Context, ls []storage.LogoutLease, d time.Duration) ([]int64, error) {
	if len(ls) == 0 {
		return nil, nil
	}
	ids, workers, attempts := make([]int64, len(ls)), make([]string, len(ls)), make([]int32, len(ls))
	for i, l := range ls {
		ids[i], workers[i], attempts[i] = l.ID, l.Worker, int32(l.Attempt)
	}
	rows, err := s.q(ctx).Query(ctx, `UPDATE logout_deliveries d
		SET lease_until = statement_timestamp() + $4 * interval '1 microsecond'
		FROM unnest($1::bigint[], $2::text[], $3::int[]) AS l (id, worker, attempt)
		WHERE d.id = l.id AND d.locked_by = l.worker AND d.attempts = l.attempt AND d.status = 'pending'
			AND d.lease_until > statement_timestamp()
		RETURNING d.id`, ids, workers, attempts, micros(d))
	if err != nil {
		return nil, translate("extend logout leases", err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, translate("extend logout leases", err)
	}
	held := make(map[int64]bool, len(kept))
	for _, id := range kept {
		held[id] = true
	}
	var lost []int64
	for _, id := range ids {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// FinishLogoutDelivery records an attempt's outcome if the lease is valid.
func (s *Store) FinishLogoutDelivery(ctx context.Context, l storage.LogoutLease, status storage.LogoutStatus, errMsg string, retryIn time.Duration) error {
	tag, err := s.q(ctx).Exec(ctx, `UPDATE logout_deliveries SET status = $4, lease_until = NULL,
			last_error = CASE WHEN $5 = '' THEN last_error ELSE $5 END,
			run_at = CASE WHEN $4 = 'pending' THEN statement_timestamp() + $6 * interval '1 microsecond' ELSE run_at END,
			finished_at = CASE WHEN $4 = 'pending' THEN NULL ELSE statement_timestamp() END
		WHERE `+logoutLeaseHeld, l.ID, l.Worker, l.Attempt, string(status), errMsg, micros(retryIn))
	if err != nil {
		return translate(fmt.Sprintf("finish logout delivery %d", l.ID), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: finish logout delivery %d: %w", l.ID, storage.ErrLeaseLost)
	}
	return nil
}

// ListLogoutDeliveries returns the deliveries matching f, newest first.
func (s *Store) ListLogoutDeliveries(ctx context.Context, f storage.LogoutFilter) ([]*storage.LogoutDelivery, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.q(ctx).Query(ctx, `SELECT `+logoutColumns+` FROM logout_deliveries d
		JOIN clients c ON c.id = d.client_id
		WHERE ($1 = '' OR d.status = $1) ORDER BY d.id DESC LIMIT $2`, string(f.Status), limit)
	return collectLogouts(rows, err, "list logout deliveries")
}

// CountPendingLogoutDeliveries counts pending deliveries.
func (s *Store) CountPendingLogoutDeliveries(ctx context.Context) (int, error) {
	var n int
	err := s.q(ctx).QueryRow(ctx, `SELECT count(*) FROM logout_deliveries WHERE status = 'pending'`).Scan(&n)
	return n, translate("count pending logout deliveries", err)
}
