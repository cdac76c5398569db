package storage

import (
	"context"
	"time"
)

// MailStatus is the state of an outbox row.
type MailStatus string

// Outbox states. A row moves pending → sent, or pending → given_up once its
// give-up time has passed; neither of the two later states changes again.
const (
	MailPending MailStatus = "pending"
	MailSent    MailStatus = "sent"
	MailGivenUp MailStatus = "given_up"
)

// Mail is one message in the outbox (package mail): one recipient, written
// in the transaction that decided to send it, delivered by a leased job.
type Mail struct {
	// ID is assigned by the store.
	ID int64
	// MessageID is the message's RFC 5322 Message-ID without the angle
	// brackets, chosen at enqueue and reused on every attempt, so a
	// receiver can recognise a retry after an ambiguous failure.
	MessageID string
	// Recipient is the one address the message goes to.
	Recipient string
	// Template names the message's text (package mail).
	Template string
	// Sealed is the template's data, sealed under the system secret; nil
	// once the message was sent or given up (erased).
	Sealed []byte
	Status MailStatus
	// Attempts counts the send attempts recorded; LastError is the last
	// failed one's error.
	Attempts  int
	LastError string
	// GiveUpAt is when retrying stops.
	GiveUpAt time.Time
	// CreatedAt, and FinishedAt (sent or given up; zero while pending).
	CreatedAt  time.Time
	FinishedAt time.Time
}

// MailStore keeps the mail outbox. Called with a context carrying a
// transaction (BeginTX), the methods run in it: InsertMail runs in the
// transaction of the state change that needs the message.
type MailStore interface {
	// InsertMail stores m (pending) and sets m.ID and m.CreatedAt.
	InsertMail(ctx context.Context, m *Mail) error
	// GetMail returns the row, or ErrNotFound.
	GetMail(ctx context.Context, id int64) (*Mail, error)
	// RecordMailAttempt counts a failed attempt of a pending row and keeps
	// its error. A row that is no longer pending is left alone.
	RecordMailAttempt(ctx context.Context, id int64, errMsg string) error
	// FinishMail moves a pending row to status (MailSent or MailGivenUp),
	// erases Sealed, and reports whether it did: false if the row was not
	// pending (a conditional write, so a second finisher changes nothing).
	FinishMail(ctx context.Context, id int64, status MailStatus, errMsg string) (bool, error)
}
