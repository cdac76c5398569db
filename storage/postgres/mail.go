package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/authd/authd/storage"
)

var _ storage.MailStore = (*Store)(nil)

// InsertMail stores a pending message (see storage.MailStore).
func (s *Store) InsertMail(ctx context.Context, m *storage.Mail) error {
	if m.MessageID == "" || m.Recipient == "" || m.Template == "" {
		return errors.New("postgres: insert mail: message id, recipient and template are required")
	}
	err := s.q(ctx).QueryRow(ctx, `insert into mail_outbox (message_id, recipient, template, sealed, give_up_at)
		values ($1, $2, $3, $4, $5) returning id, created_at`,
		m.MessageID, m.Recipient, m.Template, m.Sealed, m.GiveUpAt).Scan(&m.ID, &m.CreatedAt)
	if err != nil {
		return translate("insert mail", err)
	}
	m.Status = storage.MailPending
	m.CreatedAt = storage.NormalizeTime(m.CreatedAt)
	return nil
}

// GetMail returns one outbox row.
func (s *Store) GetMail(ctx context.Context, id int64) (*storage.Mail, error) {
	var (
		m        storage.Mail
		status   string
		finished *time.Time
	)
	err := s.q(ctx).QueryRow(ctx, `select id, message_id, recipient, template, sealed, status, attempts,
		last_error, give_up_at, created_at, finished_at from mail_outbox where id = $1`, id).Scan(
		&m.ID, &m.MessageID, &m.Recipient, &m.Template, &m.Sealed, &status, &m.Attempts,
		&m.LastError, &m.GiveUpAt, &m.CreatedAt, &finished)
	if err != nil {
		return nil, translate("get mail", err)
	}
	m.Status = storage.MailStatus(status)
	m.GiveUpAt = storage.NormalizeTime(m.GiveUpAt)
	m.CreatedAt = storage.NormalizeTime(m.CreatedAt)
	if finished != nil {
		m.FinishedAt = storage.NormalizeTime(*finished)
	}
	return &m, nil
}

// RecordMailAttempt counts a failed attempt of a pending row.
func (s *Store) RecordMailAttempt(ctx context.Context, id int64, errMsg string) error {
	_, err := s.q(ctx).Exec(ctx, `update mail_outbox set attempts = attempts + 1, last_error = $2
		where id = $1 and status = 'pending'`, id, errMsg)
	return translate("record mail attempt", err)
}

// FinishMail moves a pending row to sent or given_up and erases its sealed
// data, with one conditional write.
func (s *Store) FinishMail(ctx context.Context, id int64, status storage.MailStatus, errMsg string) (bool, error) {
	if status != storage.MailSent && status != storage.MailGivenUp {
		return false, errors.New("postgres: finish mail: status must be sent or given_up")
	}
	tag, err := s.q(ctx).Exec(ctx, `update mail_outbox set status = $2, sealed = null, finished_at = now(),
		attempts = attempts + 1, last_error = case when $3 = '' then last_error else $3 end
		where id = $1 and status = 'pending'`, id, string(status), errMsg)
	if err != nil {
		return false, translate("finish mail", err)
	}
	return tag.RowsAffected() == 1, nil
}
