package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

const sessionColumns = `id, subject, auth_time, amr, idle_expires_at, expires_at, created_at, last_seen_at`

func scanSession(row pgx.Row) (*storage.Session, error) {
	var x storage.Session
	if err := row.Scan(&x.ID, &x.Subject, &x.AuthTime, &x.AMR, &x.IdleExpiresAt, &x.ExpiresAt,
		&x.CreatedAt, &x.LastSeenAt); err != nil {
		return nil, err
	}
	for _, t := range []*time.Time{&x.AuthTime, &x.IdleExpiresAt, &x.ExpiresAt, &x.CreatedAt, &x.LastSeenAt} {
		*t = storage.NormalizeTime(*t)
	}
	if x.AMR == nil {
		x.AMR = []string{}
	}
	return &x, nil
}

// CreateSession inserts sess; storage.ErrNotFound if its user is missing
// or disabled.
func (s *Store) CreateSession(ctx context.Context, sess *storage.Session) error {
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = time.Now()
	}
	if sess.LastSeenAt.IsZero() {
		sess.LastSeenAt = sess.CreatedAt
	}
	// INSERT … SELECT from the user row FOR SHARE: a concurrent disable
	// (which updates that row, then ends the sessions) either waits for
	// this insert and then ends the new session too, or commits first and
	// this inserts nothing.
	tag, err := s.q(ctx).Exec(ctx, `INSERT INTO sessions (`+sessionColumns+`)
		SELECT $1, u.subject, $3, $4, $5, $6, $7, $8 FROM users u
		WHERE u.subject = $2 AND NOT u.disabled FOR SHARE`, sess.ID, sess.Subject, sess.AuthTime, nonNil(sess.AMR),
		sess.IdleExpiresAt, sess.ExpiresAt, sess.CreatedAt, sess.LastSeenAt)
	if err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: create session: no such user, or disabled: %w", storage.ErrNotFound)
	}
	return translate("create session", err)
}

// GetSession returns a valid session without changing it, or
// storage.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string, now time.Time) (*storage.Session, error) {
	sess, err := scanSession(s.q(ctx).QueryRow(ctx, `SELECT s.id, s.subject, s.auth_time, s.amr,
		s.idle_expires_at, s.expires_at, s.created_at, s.last_seen_at
		FROM sessions s JOIN users u ON u.subject = s.subject
		WHERE s.id = $1 AND NOT u.disabled AND s.idle_expires_at > $2 AND s.expires_at > $2`, id, now))
	if err != nil {
		return nil, translate("get session", err)
	}
	return sess, nil
}

// sessionUserSQL reads a valid session ($1, at $2) and its user; scan it
// into sessionUserDest.
const sessionUserSQL = `SELECT s.id, s.subject, s.auth_time, s.amr,
		s.idle_expires_at, s.expires_at, s.created_at, s.last_seen_at,
		u.username, u.password_hash, u.email, u.email_verified, u.name, u.disabled, u.created_at, u.updated_at`

const sessionUserWhere = `
		WHERE s.id = $1 AND NOT u.disabled AND s.idle_expires_at > $2 AND s.expires_at > $2`

func sessionUserDest(x *storage.Session, u *storage.User) []any {
	return []any{&x.ID, &x.Subject, &x.AuthTime, &x.AMR, &x.IdleExpiresAt, &x.ExpiresAt, &x.CreatedAt, &x.LastSeenAt,
		&u.Username, &u.PasswordHash, &u.Email, &u.EmailVerified, &u.Name, &u.Disabled, &u.CreatedAt, &u.UpdatedAt}
}

// GetSessionUser returns a valid session and its user in one query, or
// storage.ErrNotFound.
func (s *Store) GetSessionUser(ctx context.Context, id string, now time.Time) (*storage.Session, *storage.User, error) {
	var x storage.Session
	var u storage.User
	err := s.q(ctx).QueryRow(ctx, sessionUserSQL+`
		FROM sessions s JOIN users u ON u.subject = s.subject`+sessionUserWhere, id, now).Scan(sessionUserDest(&x, &u)...)
	if err != nil {
		return nil, nil, translate("get session and user", err)
	}
	normalizeSessionUser(&x, &u)
	return &x, &u, nil
}

// GetSessionUserConsent returns a valid session, its user, the user's
// consent for clientID (nil if none) and second factors in one query, or
// storage.ErrNotFound. The factors are columns of the users row, kept by
// triggers (migration 016): probing the three factor tables here was most
// of PostgreSQL's work per signed-in authorization.
func (s *Store) GetSessionUserConsent(ctx context.Context, id, clientID string, now time.Time) (*storage.Session, *storage.User, *storage.Consent, storage.UserFactors, error) {
	var (
		x                  storage.Session
		u                  storage.User
		f                  storage.UserFactors
		scopes             []string
		granted, updatedAt *time.Time
	)
	err := s.q(ctx).QueryRow(ctx, sessionUserSQL+`, c.scopes, c.granted_at, c.updated_at,
		u.totp_confirmed, u.passkeys_active > 0, u.mfa_required
		FROM sessions s JOIN users u ON u.subject = s.subject
		LEFT JOIN consents c ON c.subject = s.subject AND c.client_id = $3`+sessionUserWhere, id, now, clientID).
		Scan(append(sessionUserDest(&x, &u), &scopes, &granted, &updatedAt, &f.TOTP, &f.Passkey, &f.MFARequired)...)
	if err != nil {
		return nil, nil, nil, storage.UserFactors{}, translate("get session, user and consent", err)
	}
	normalizeSessionUser(&x, &u)
	if granted == nil || updatedAt == nil {
		return &x, &u, nil, f, nil
	}
	c := &storage.Consent{Subject: x.Subject, ClientID: clientID, Scopes: scopes, GrantedAt: *granted, UpdatedAt: *updatedAt}
	normalizeConsent(c)
	return &x, &u, c, f, nil
}

// normalizeSessionUser puts the times of a session and its user read
// together in storage's form, and fills what the row leaves empty.
func normalizeSessionUser(x *storage.Session, u *storage.User) {
	for _, t := range []*time.Time{&x.AuthTime, &x.IdleExpiresAt, &x.ExpiresAt, &x.CreatedAt, &x.LastSeenAt, &u.CreatedAt, &u.UpdatedAt} {
		*t = storage.NormalizeTime(*t)
	}
	if x.AMR == nil {
		x.AMR = []string{}
	}
	u.Subject = x.Subject
}

// noteClient is TouchSession's record of its client ($5; "" records
// nothing) in the session's rp_clients, once.
const noteClient = `,
		rp_clients = CASE WHEN $5 = '' OR $5 = ANY (s.rp_clients) THEN s.rp_clients ELSE s.rp_clients || $5::text END`

// touchedIdle is TouchSession's new idle expiry ($3 = now+idle, $4 = the
// granularity in microseconds): unchanged unless it moves forward by the
// granularity or more, or back (a shorter idle lifetime since, or another
// replica's clock ahead: never kept beyond now+idle), so that most touches
// leave every indexed column (sessions_expires_at_idx is on the idle
// expiry) as it is and PostgreSQL updates the row in place (HOT) without
// new index entries.
const touchedIdle = `CASE WHEN least($3::timestamptz, s.expires_at) >= s.idle_expires_at + $4::bigint * interval '1 microsecond'
		  OR least($3::timestamptz, s.expires_at) < s.idle_expires_at
		THEN least($3::timestamptz, s.expires_at) ELSE s.idle_expires_at END`

// TouchSession extends and returns a valid session, or storage.ErrNotFound.
//
// In a deferred transaction (BeginDeferredTX) the update is queued and
// TouchSession returns (nil, nil); a session that is not valid then fails
// the commit with storage.ErrNotFound.
func (s *Store) TouchSession(ctx context.Context, id, client string, now time.Time, idle time.Duration) (*storage.Session, error) {
	sql := `UPDATE sessions s
		SET idle_expires_at = ` + touchedIdle + `, last_seen_at = $2` + noteClient + `
		FROM users u
		WHERE s.id = $1 AND u.subject = s.subject AND NOT u.disabled
		  AND s.idle_expires_at > $2 AND s.expires_at > $2`
	args := []any{id, now, now.Add(idle), storage.TouchGranularity(idle).Microseconds(), client}
	if s.enqueueChecked(ctx, queuedOp{op: "touch session", errNone: storage.ErrNotFound}, sql, args...) {
		return nil, nil
	}
	sess, err := scanSession(s.q(ctx).QueryRow(ctx, sql+`
		RETURNING s.id, s.subject, s.auth_time, s.amr, s.idle_expires_at, s.expires_at, s.created_at, s.last_seen_at`, args...))
	if err != nil {
		return nil, translate("touch session", err)
	}
	return sess, nil
}

// DeleteSession ends one session and queues its back-channel logouts
// (endSessionsSQL); a missing one is not an error.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	_, err := s.q(ctx).Exec(ctx, endSessionsSQL(`id = $1`), id)
	return translate("delete session", err)
}

// ListSessions returns the subject's valid sessions, newest first.
func (s *Store) ListSessions(ctx context.Context, subject string, now time.Time) ([]*storage.Session, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE subject = $1 AND idle_expires_at > $2 AND expires_at > $2
		ORDER BY created_at DESC, id`, subject, now)
	if err != nil {
		return nil, translate("list sessions", err)
	}
	defer rows.Close()
	var out []*storage.Session
	for rows.Next() {
		x, err := scanSession(rows)
		if err != nil {
			return nil, translate("list sessions", err)
		}
		out = append(out, x)
	}
	return out, translate("list sessions", rows.Err())
}

// EndSessions deletes every session of subject and queues their
// back-channel logouts (endSessionsSQL), and ends its auth sessions, in
// one transaction.
func (s *Store) EndSessions(ctx context.Context, subject string) (int, error) {
	var n int
	err := s.inTx(ctx, "end sessions", func(q querier) error {
		if err := q.QueryRow(ctx, endSessionsSQL(`subject = $1`), subject).Scan(&n); err != nil {
			return err
		}
		return endAuthSessions(ctx, q, subject)
	})
	return n, err
}

// TrimSessions ends the subject's sessions beyond its keep newest
// (endSessionsSQL: their back-channel logouts are queued). The rows are
// locked in one order (newest first, FOR UPDATE in the subquery), so
// concurrent trims of one user queue instead of deadlocking: the DELETE
// alone locked them in its scan's order, and two sign-ins of one user
// trimming at once waited for PostgreSQL's deadlock detection (1 s) and
// one failed.
func (s *Store) TrimSessions(ctx context.Context, subject string, keep int) (int, error) {
	var n int
	err := s.q(ctx).QueryRow(ctx, endSessionsSQL(`id IN (SELECT id FROM sessions WHERE subject = $1
		ORDER BY created_at DESC, id OFFSET $2 FOR UPDATE)`), subject, keep).Scan(&n)
	if err != nil {
		return 0, translate("trim sessions", err)
	}
	return n, nil
}

// DeleteExpiredSessions deletes up to limit sessions invalid at now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM sessions WHERE id IN (
		SELECT id FROM sessions WHERE least(idle_expires_at, expires_at) <= $1
		LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, translate("delete expired sessions", err)
	}
	return int(tag.RowsAffected()), nil
}
