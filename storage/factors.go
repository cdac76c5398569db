package storage

import (
	"context"
	"time"
)

// TOTP is a user's authenticator-app factor (RFC 6238).
type TOTP struct {
	Subject string
	// Secret is the shared secret as package totp sealed it; storage
	// never sees it in the clear.
	Secret []byte
	// LastStep is the last accepted time step (RFC 6238 §5.2: a code is
	// accepted once); 0 before the first.
	LastStep int64
	// Confirmed: the user typed a valid code at set-up. An unconfirmed
	// factor is a set-up in progress and never accepted at sign-in.
	Confirmed bool
	CreatedAt time.Time
}

// UserFactors are the second factors a user has and whether an operator
// requires one: what the sign-in decision asks of every session below two
// factors, read with the session (SessionStore.GetSessionUserConsent).
type UserFactors struct {
	// TOTP: a confirmed TOTP (FactorStore.GetTOTP's Confirmed).
	TOTP bool
	// Passkey: a passkey that is not disabled (PasskeyStore.ListPasskeys,
	// DisabledAt zero).
	Passkey bool
	// MFARequired: FactorStore.MFARequired.
	MFARequired bool
}

// FactorStore keeps second factors: TOTP secrets, recovery codes, the
// operator's requirement of a second factor per user, and the session's
// raise to the factors it proved. Every single-use decision is one
// conditional write (docs/architecture.md principle 1).
type FactorStore interface {
	// PutPendingTOTP stores a set-up in progress for subject, replacing
	// an earlier unconfirmed one. ErrAlreadyExists if subject has a
	// confirmed TOTP; ErrNotFound if there is no such user.
	PutPendingTOTP(ctx context.Context, subject string, sealed []byte, now time.Time) error
	// GetTOTP returns subject's TOTP, confirmed or not, or ErrNotFound.
	GetTOTP(ctx context.Context, subject string) (*TOTP, error)
	// ConfirmTOTP confirms the unconfirmed TOTP of subject with its first
	// accepted step and replaces the recovery codes with codeHashes, in
	// one transaction. ErrNotFound if there is no unconfirmed TOTP (none,
	// or a concurrent confirmation won).
	ConfirmTOTP(ctx context.Context, subject string, step int64, codeHashes [][]byte, now time.Time) error
	// UseTOTPStep moves the confirmed TOTP's last step to step if step is
	// later, in one conditional write. ErrInactiveToken if it is not (the
	// code of that step, or a later one, was already accepted: of N
	// concurrent calls with one step, exactly one succeeds); ErrNotFound
	// if subject has no confirmed TOTP.
	UseTOTPStep(ctx context.Context, subject string, step int64) error
	// UseRecoveryCode marks subject's unused recovery code with this hash
	// used and returns how many unused ones remain, in one conditional
	// write. ErrNotFound if there is no such unused code.
	UseRecoveryCode(ctx context.Context, subject string, codeHash []byte, now time.Time) (remaining int, err error)
	// ReplaceRecoveryCodes replaces subject's recovery codes with
	// codeHashes. ErrNotFound if subject has no confirmed TOTP.
	ReplaceRecoveryCodes(ctx context.Context, subject string, codeHashes [][]byte, now time.Time) error
	// RecoveryCodesLeft returns how many unused recovery codes subject
	// has.
	RecoveryCodesLeft(ctx context.Context, subject string) (int, error)
	// DeleteFactors deletes subject's TOTP and recovery codes and reports
	// whether there was a TOTP.
	DeleteFactors(ctx context.Context, subject string) (bool, error)
	// SetMFARequired records whether an operator requires subject to have
	// a second factor. ErrNotFound if there is no such user.
	SetMFARequired(ctx context.Context, subject string, required bool, now time.Time) error
	// MFARequired reports whether an operator requires it.
	MFARequired(ctx context.Context, subject string) (bool, error)
	// FactorState reports, in one read, whether subject has a confirmed
	// TOTP and whether an operator requires a second factor: what every
	// authorization request of a one-factor session asks.
	FactorState(ctx context.Context, subject string) (hasTOTP, required bool, err error)
	// RaiseSession adds amr values to the session with this ID if it is
	// valid at now, and sets its auth_time to authTime (a factor proven
	// now is an authentication, OpenID Connect Core §2 auth_time), in one
	// conditional write; it returns the session. ErrNotFound if it is not
	// valid. Values it already has are not added twice.
	RaiseSession(ctx context.Context, id string, amr []string, authTime, now time.Time) (*Session, error)
}
