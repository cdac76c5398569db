package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	fositestorage "github.com/ory/fosite/storage"

	"github.com/authd/authd/secrets"
	"github.com/authd/authd/storage"
)

// JobKind is the kind of the jobs that deliver outbox rows.
const JobKind = "mail"

// DefaultGiveUp is how long a message is retried (AUTHD_MAIL_GIVE_UP).
const DefaultGiveUp = 24 * time.Hour

// maxJobAttempts bounds the job's claims far above what the give-up time
// allows (about 60 attempts in 24 h with Backoff), so time decides.
const maxJobAttempts = 1000

// Store is what the outbox and its deliverer need.
type Store interface {
	storage.MailStore
	storage.JobStore
	fositestorage.Transactional
}

// Message is a message to enqueue.
type Message struct {
	// To is the one recipient's address.
	To string
	// Template names the text (the Template* constants).
	Template string
	// Data fills the template; it is sealed at rest and erased after
	// delivery. See Data's fields.
	Data Data
}

// Data is what a template shows.
type Data struct {
	// App is the name of the app (client) the request came from; empty
	// for requests that came from no app (the account page).
	App string `json:"app,omitempty"`
	// Code is a one-time code, Link a URL carrying a one-time token.
	Code string `json:"code,omitempty"`
	Link string `json:"link,omitempty"`
	// Address is a further address a notice names (the new address of an
	// email change).
	Address string `json:"address,omitempty"`
}

// Outbox writes messages to the outbox.
type Outbox struct {
	store  Store
	secret []byte
	domain string
	giveUp time.Duration
	now    func() time.Time
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	// Secret is the system secret the data is sealed under.
	Secret []byte
	// Domain is the right-hand side of Message-IDs (the domain of
	// AUTHD_MAIL_FROM).
	Domain string
	// GiveUp is how long delivery is retried; default DefaultGiveUp.
	GiveUp time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// NewOutbox returns an Outbox on store.
func NewOutbox(store Store, cfg OutboxConfig) (*Outbox, error) {
	if len(cfg.Secret) < secrets.MinLen {
		return nil, errors.New("mail: the system secret is too short")
	}
	if cfg.Domain == "" {
		return nil, errors.New("mail: the Message-ID domain is required")
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = DefaultGiveUp
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Outbox{store: store, secret: cfg.Secret, domain: cfg.Domain, giveUp: cfg.GiveUp, now: cfg.Now}, nil
}

// sealPresented is the "presented" value of the outbox's seal: the row is
// opened by a worker with nothing but the system secret, and the seal's key
// (the Message-ID) binds each value to its row.
const sealPresented = "mail-outbox"

// Enqueue writes m and the job that delivers it. ctx must carry the
// transaction of the state change that needs the message (BeginTX on the
// same store): they commit together or not at all. It returns the row's ID.
func (o *Outbox) Enqueue(ctx context.Context, m Message) (int64, error) {
	if _, ok := templates[m.Template]; !ok {
		return 0, fmt.Errorf("mail: unknown template %q", m.Template)
	}
	if m.To == "" {
		return 0, errors.New("mail: no recipient")
	}
	plain, err := json.Marshal(m.Data)
	if err != nil {
		return 0, err
	}
	id := newMessageID(o.domain)
	sealed, err := secrets.Seal(o.secret, sealPresented, id, plain)
	if err != nil {
		return 0, err
	}
	row := &storage.Mail{MessageID: id, Recipient: m.To, Template: m.Template, Sealed: sealed,
		GiveUpAt: storage.NormalizeTime(o.now().Add(o.giveUp))}
	if err := o.store.InsertMail(ctx, row); err != nil {
		return 0, fmt.Errorf("mail: enqueue: %w", err)
	}
	payload, _ := json.Marshal(jobPayload{ID: row.ID})
	if _, _, err := o.store.EnqueueJob(ctx, storage.NewJob{Kind: JobKind, Payload: payload,
		UniqueKey: JobKind + ":" + strconv.FormatInt(row.ID, 10), MaxAttempts: maxJobAttempts}); err != nil {
		return 0, fmt.Errorf("mail: enqueue job: %w", err)
	}
	return row.ID, nil
}

// Send enqueues m in a transaction of its own, for a message that follows
// no state change of the caller's.
func (o *Outbox) Send(ctx context.Context, m Message) (id int64, err error) {
	err = storage.InTx(ctx, o.store, func(tx context.Context) (err error) {
		id, err = o.Enqueue(tx, m)
		return err
	})
	return id, err
}

// jobPayload is a mail job's payload: the outbox row it delivers.
type jobPayload struct {
	ID int64 `json:"id"`
}

// newMessageID returns a fresh Message-ID (RFC 5322 §3.6.4, without the
// angle brackets): 128 random bits at the sender's domain.
func newMessageID(domain string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	return "authd." + hex.EncodeToString(b[:]) + "@" + domain
}

// open returns the data sealed in row.
func (o *Outbox) open(row *storage.Mail) (Data, error) {
	var d Data
	plain, err := secrets.Open(o.secret, sealPresented, row.MessageID, row.Sealed)
	if err != nil {
		return d, err
	}
	err = json.Unmarshal(plain, &d)
	return d, err
}
