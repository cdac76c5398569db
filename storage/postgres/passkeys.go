package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/authd/authd/storage"
)

var _ storage.PasskeyStore = (*Store)(nil)

const passkeyColumns = `id, subject, public_key, sign_count, aaguid, transports, backup_eligible, backup_state,
	name, created_at, last_used_at, disabled_at`

func scanPasskey(row pgx.Row, extra ...any) (*storage.Passkey, error) {
	var (
		p            storage.Passkey
		count        int64
		used, disabl *time.Time
	)
	dest := append([]any{&p.ID, &p.Subject, &p.PublicKey, &count, &p.AAGUID, &p.Transports, &p.BackupEligible,
		&p.BackupState, &p.Name, &p.CreatedAt, &used, &disabl}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	p.SignCount = uint32(count)
	p.CreatedAt = storage.NormalizeTime(p.CreatedAt)
	if used != nil {
		p.LastUsedAt = storage.NormalizeTime(*used)
	}
	if disabl != nil {
		p.DisabledAt = storage.NormalizeTime(*disabl)
	}
	return &p, nil
}

// PutCeremony stores a ceremony's state.
func (s *Store) PutCeremony(ctx context.Context, c *storage.Ceremony) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO passkey_ceremonies (key, kind, subject, binding, data, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, c.Key, c.Kind, c.Subject, c.Binding, c.Data, c.ExpiresAt)
	return translate("put ceremony", err)
}

// TakeCeremony deletes and returns an unexpired ceremony: the DELETE is the
// single use (of concurrent takes, one deletes the row).
func (s *Store) TakeCeremony(ctx context.Context, key []byte, now time.Time) (*storage.Ceremony, error) {
	c, err := scanCeremony(s.q(ctx).QueryRow(ctx, takeCeremonySQL, key, now))
	if err != nil {
		return nil, translate("take ceremony", err)
	}
	return c, nil
}

// DeleteExpiredCeremonies deletes up to limit expired ceremonies.
func (s *Store) DeleteExpiredCeremonies(ctx context.Context, now time.Time, limit int) (int, error) {
	tag, err := s.q(ctx).Exec(ctx, `DELETE FROM passkey_ceremonies WHERE key IN (
		SELECT key FROM passkey_ceremonies WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, now, limit)
	if err != nil {
		return 0, translate("delete expired ceremonies", err)
	}
	return int(tag.RowsAffected()), nil
}

// CreatePasskey inserts a passkey; the primary key refuses a credential ID
// registered before, the foreign key an unknown subject.
func (s *Store) CreatePasskey(ctx context.Context, p *storage.Passkey) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	p.CreatedAt = storage.NormalizeTime(p.CreatedAt)
	transports := p.Transports
	if transports == nil {
		transports = []string{}
	}
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO passkeys (id, subject, public_key, sign_count, aaguid, transports,
		backup_eligible, backup_state, name, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		p.ID, p.Subject, p.PublicKey, int64(p.SignCount), p.AAGUID, transports, p.BackupEligible, p.BackupState,
		p.Name, p.CreatedAt)
	return translate("create passkey", err)
}

const (
	takeCeremonySQL = `DELETE FROM passkey_ceremonies WHERE key = $1 AND expires_at > $2
		RETURNING key, kind, subject, binding, data, expires_at`
	passkeyUserSQL = `SELECT p.id, p.subject, p.public_key, p.sign_count, p.aaguid,
		p.transports, p.backup_eligible, p.backup_state, p.name, p.created_at, p.last_used_at, p.disabled_at,
		u.username, u.password_hash, u.email, u.email_verified, u.name, u.disabled, u.created_at, u.updated_at
		FROM passkeys p JOIN users u ON u.subject = p.subject WHERE p.id = $1`
)

func scanCeremony(row pgx.Row) (*storage.Ceremony, error) {
	var c storage.Ceremony
	if err := row.Scan(&c.Key, &c.Kind, &c.Subject, &c.Binding, &c.Data, &c.ExpiresAt); err != nil {
		return nil, err
	}
	return &c, nil
}

func scanPasskeyUser(row pgx.Row) (*storage.Passkey, *storage.User, error) {
	var u storage.User
	p, err := scanPasskey(row, &u.Username, &u.PasswordHash, &u.Email, &u.EmailVerified, &u.Name, &u.Disabled, &u.CreatedAt, &u.UpdatedAt)
	if err != nil {
		return nil, nil, err
	}
	u.Subject = p.Subject
	u.CreatedAt, u.UpdatedAt = storage.NormalizeTime(u.CreatedAt), storage.NormalizeTime(u.UpdatedAt)
	return p, &u, nil
}

// GetPasskeyUser reads the passkey and its user in one query.
func (s *Store) GetPasskeyUser(ctx context.Context, id []byte) (*storage.Passkey, *storage.User, error) {
	p, u, err := scanPasskeyUser(s.q(ctx).QueryRow(ctx, passkeyUserSQL, id))
	if err != nil {
		return nil, nil, translate("get passkey", err)
	}
	return p, u, nil
}

// TakeCeremonyPasskey sends the ceremony's DELETE and the passkey's read
// in one batch: one round trip.
func (s *Store) TakeCeremonyPasskey(ctx context.Context, key []byte, now time.Time, id []byte) (*storage.Ceremony, *storage.Passkey, *storage.User, error) {
	b := &pgx.Batch{}
	b.Queue(takeCeremonySQL, key, now)
	b.Queue(passkeyUserSQL, id)
	var br pgx.BatchResults
	if tx := s.txFrom(ctx); tx != nil {
		br = tx.SendBatch(ctx, b)
	} else {
		br = s.pool.SendBatch(ctx, b)
	}
	c, err := scanCeremony(br.QueryRow())
	if err != nil {
		_ = br.Close()
		return nil, nil, nil, translate("take ceremony", err)
	}
	p, u, err := scanPasskeyUser(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		p, u, err = nil, nil, nil
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, nil, translate("get passkey", err)
	}
	return c, p, u, nil
}

// ListPasskeys returns the subject's passkeys, oldest first.
func (s *Store) ListPasskeys(ctx context.Context, subject string) ([]*storage.Passkey, error) {
	rows, err := s.q(ctx).Query(ctx, `SELECT `+passkeyColumns+` FROM passkeys WHERE subject = $1
		ORDER BY created_at, id`, subject)
	if err != nil {
		return nil, translate("list passkeys", err)
	}
	defer rows.Close()
	var out []*storage.Passkey
	for rows.Next() {
		p, err := scanPasskey(rows)
		if err != nil {
			return nil, translate("list passkeys", err)
		}
		out = append(out, p)
	}
	return out, translate("list passkeys", rows.Err())
}

// RenamePasskey sets a passkey's name.
func (s *Store) RenamePasskey(ctx context.Context, subject string, id []byte, name string) error {
	tag, err := s.q(ctx).Exec(ctx, `UPDATE passkeys SET name = $3 WHERE subject = $1 AND id = $2`, subject, id, name)
	if err != nil {
		return translate("rename passkey", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: rename passkey: %w", storage.ErrNotFound)
	}
	return nil
}

// UsePasskey is one conditional UPDATE: the counter comparison and its
// consequence (record the use, or disable the credential) are decided by
// the row as it is when the write takes its lock.
func (s *Store) UsePasskey(ctx context.Context, id []byte, count uint32, backupState bool, now time.Time) (storage.PasskeyUse, error) {
	const forward = `($2::bigint > sign_count OR ($2::bigint = 0 AND sign_count = 0))`
	var ok bool
	err := s.q(ctx).QueryRow(ctx, `UPDATE passkeys SET
		sign_count   = CASE WHEN `+forward+` THEN $2::bigint ELSE sign_count END,
		backup_state = CASE WHEN `+forward+` THEN $3 ELSE backup_state END,
		last_used_at = CASE WHEN `+forward+` THEN $4 ELSE last_used_at END,
		disabled_at  = CASE WHEN `+forward+` THEN NULL ELSE $4 END
		WHERE id = $1 AND disabled_at IS NULL RETURNING disabled_at IS NULL`,
		id, int64(count), backupState, now).Scan(&ok)
	if err != nil {
		return 0, translate("use passkey", err)
	}
	if !ok {
		return storage.PasskeyCloned, nil
	}
	return storage.PasskeyUsed, nil
}

// lockWaysIn takes the user's row lock, the lock every removal of a way in
// holds while it checks that another remains.
func lockWaysIn(ctx context.Context, q querier, subject string) error {
	var one int
	return q.QueryRow(ctx, `SELECT 1 FROM users WHERE subject = $1 FOR UPDATE`, subject).Scan(&one)
}

// DeletePasskey deletes a passkey unless it is the user's last way in.
func (s *Store) DeletePasskey(ctx context.Context, subject string, id []byte) error {
	return s.inTx(ctx, "delete passkey", func(q querier) error {
		if err := lockWaysIn(ctx, q, subject); err != nil {
			return err
		}
		var mine, left bool
		err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM passkeys WHERE subject = $1 AND id = $2),
			EXISTS (SELECT 1 FROM users WHERE subject = $1 AND length(password_hash) > 0)
			OR EXISTS (SELECT 1 FROM passkeys WHERE subject = $1 AND id <> $2 AND disabled_at IS NULL)`,
			subject, id).Scan(&mine, &left)
		switch {
		case err != nil:
			return err
		case !mine:
			return storage.ErrNotFound
		case !left:
			return storage.ErrLastMethod
		}
		_, err = q.Exec(ctx, `DELETE FROM passkeys WHERE subject = $1 AND id = $2`, subject, id)
		return err
	})
}

// RemoveUserPassword clears the password if an enabled passkey remains.
func (s *Store) RemoveUserPassword(ctx context.Context, subject string) error {
	return s.inTx(ctx, "remove user password", func(q querier) error {
		if err := lockWaysIn(ctx, q, subject); err != nil {
			return err
		}
		tag, err := q.Exec(ctx, `UPDATE users SET password_hash = '', updated_at = now() WHERE subject = $1
			AND EXISTS (SELECT 1 FROM passkeys WHERE subject = $1 AND disabled_at IS NULL)`, subject)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return storage.ErrLastMethod
		}
		return nil
	})
}

// PutPasskeyLink stores an enrolment link's hash.
func (s *Store) PutPasskeyLink(ctx context.Context, tokenHash []byte, subject string, expires time.Time) error {
	_, err := s.q(ctx).Exec(ctx, `INSERT INTO passkey_links (token_hash, subject, expires_at) VALUES ($1, $2, $3)`,
		tokenHash, subject, expires)
	return translate("put passkey link", err)
}

// GetPasskeyLink returns an unexpired link's subject.
func (s *Store) GetPasskeyLink(ctx context.Context, tokenHash []byte, now time.Time) (string, error) {
	var sub string
	err := s.q(ctx).QueryRow(ctx, `SELECT subject FROM passkey_links WHERE token_hash = $1 AND expires_at > $2`,
		tokenHash, now).Scan(&sub)
	return sub, translate("get passkey link", err)
}

// TakePasskeyLink deletes an unexpired link and returns its subject.
func (s *Store) TakePasskeyLink(ctx context.Context, tokenHash []byte, now time.Time) (string, error) {
	var sub string
	err := s.q(ctx).QueryRow(ctx, `DELETE FROM passkey_links WHERE token_hash = $1 AND expires_at > $2
		RETURNING subject`, tokenHash, now).Scan(&sub)
	return sub, translate("take passkey link", err)
}
