package storage

import (
	"context"
	"errors"
	"time"
)

// Passkey is a WebAuthn credential registered to a user (package passkey).
type Passkey struct {
	// ID is the credential ID the authenticator chose (unique across
	// users).
	ID      []byte
	Subject string
	// PublicKey is the credential public key in COSE form.
	PublicKey []byte
	// SignCount is the last signature counter seen (0 for authenticators
	// that keep none, such as synced passkeys).
	SignCount uint32
	// AAGUID identifies the authenticator model (16 bytes, zero when the
	// attestation is "none" on some platforms).
	AAGUID     []byte
	Transports []string
	// BackupEligible and BackupState are the BE and BS flags (WebAuthn L3
	// §6.1): whether the credential may be synced, and whether it is.
	BackupEligible bool
	BackupState    bool
	// Name is the user's label for it.
	Name string
	// CreatedAt, LastUsedAt (zero if never) and DisabledAt (zero unless a
	// sign count went backwards) are UTC, microsecond precision.
	CreatedAt  time.Time
	LastUsedAt time.Time
	DisabledAt time.Time
}

// Ceremony is the server-side state of one WebAuthn ceremony between its
// options and the browser's answer.
type Ceremony struct {
	// Key is the SHA-256 of the challenge.
	Key []byte
	// Kind is "register" or "login".
	Kind string
	// Subject is the user enrolling ("" for a sign-in).
	Subject string
	// Binding is the SHA-256 of what ties the ceremony to one browser.
	Binding []byte
	// Data is the ceremony's options as package passkey keeps them.
	Data      []byte
	ExpiresAt time.Time
}

// ErrLastMethod is returned when a write would leave a user with no way to
// sign in (no password and no usable passkey).
var ErrLastMethod = errors.New("storage: the user's last way to sign in")

// PasskeyUse is the outcome of UsePasskey.
type PasskeyUse int

const (
	// PasskeyUsed: the sign count moved forward (or both are zero); the
	// use is recorded.
	PasskeyUsed PasskeyUse = iota
	// PasskeyCloned: the sign count did not move forward; the credential
	// is now disabled.
	PasskeyCloned
)

// PasskeyStore keeps passkeys, their ceremonies and enrolment links.
type PasskeyStore interface {
	// PutCeremony stores c (a new random key: ErrAlreadyExists if taken).
	PutCeremony(ctx context.Context, c *Ceremony) error
	// TakeCeremony deletes and returns the ceremony with this key if it
	// has not expired at now, else ErrNotFound. Of concurrent takes of one
	// key, one gets it.
	TakeCeremony(ctx context.Context, key []byte, now time.Time) (*Ceremony, error)
	// TakeCeremonyPasskey is TakeCeremony and GetPasskeyUser(id) together
	// (one round trip where the backend has them), for a sign-in's answer:
	// ErrNotFound if there is no ceremony (the passkey is then not
	// returned); the passkey and its user are nil if there is none.
	TakeCeremonyPasskey(ctx context.Context, key []byte, now time.Time, id []byte) (*Ceremony, *Passkey, *User, error)
	// DeleteExpiredCeremonies deletes up to limit ceremonies expired at
	// now and returns how many.
	DeleteExpiredCeremonies(ctx context.Context, now time.Time, limit int) (int, error)

	// CreatePasskey inserts p. ErrAlreadyExists if the credential ID is
	// registered (to anyone); ErrNotFound if no user has p.Subject.
	CreatePasskey(ctx context.Context, p *Passkey) error
	// GetPasskeyUser returns the passkey with this credential ID and its
	// user, read together, or ErrNotFound.
	GetPasskeyUser(ctx context.Context, id []byte) (*Passkey, *User, error)
	// ListPasskeys returns the subject's passkeys, oldest first.
	ListPasskeys(ctx context.Context, subject string) ([]*Passkey, error)
	// RenamePasskey sets the name of the subject's passkey, or ErrNotFound.
	RenamePasskey(ctx context.Context, subject string, id []byte, name string) error
	// UsePasskey records a sign-in with the passkey id at now, in one
	// conditional write (WebAuthn L3 §7.2 step 22): if count is greater
	// than the stored count, or both are zero, it stores count,
	// backupState and now and answers PasskeyUsed; otherwise it disables
	// the passkey and answers PasskeyCloned. A passkey that is missing or
	// already disabled is ErrNotFound.
	UsePasskey(ctx context.Context, id []byte, count uint32, backupState bool, now time.Time) (PasskeyUse, error)
	// DeletePasskey deletes the subject's passkey: ErrNotFound if it has
	// none with this ID, ErrLastMethod if the user would be left with no
	// password and no enabled passkey (checked under the user's row lock,
	// so two concurrent removals cannot both pass).
	DeletePasskey(ctx context.Context, subject string, id []byte) error
	// RemoveUserPassword clears the subject's password: ErrNotFound for
	// no such user, ErrLastMethod if the user has no enabled passkey
	// (under the same lock as DeletePasskey).
	RemoveUserPassword(ctx context.Context, subject string) error

	// PutPasskeyLink stores an enrolment link (the SHA-256 of its token)
	// for subject until expires; ErrNotFound if no user has subject.
	PutPasskeyLink(ctx context.Context, tokenHash []byte, subject string, expires time.Time) error
	// GetPasskeyLink returns the subject of the link if it is unused and
	// unexpired at now, else ErrNotFound.
	GetPasskeyLink(ctx context.Context, tokenHash []byte, now time.Time) (string, error)
	// TakePasskeyLink deletes the link and returns its subject, if it is
	// unexpired at now, else ErrNotFound (single use).
	TakePasskeyLink(ctx context.Context, tokenHash []byte, now time.Time) (string, error)
}
