package storage

import (
	"context"
	"time"
)

// Purposes of an AccountFlow.
const (
	FlowSignup      = "signup"
	FlowRecovery    = "recovery"
	FlowEmailChange = "email_change"
)

// AccountFlow is a pending self-service step (package accounts): a sign-up
// waiting for its address to be verified, a password recovery, an email
// change. It holds hashes of its code and link token, never the values.
type AccountFlow struct {
	ID      string
	Purpose string
	// Email is the address the code was sent to.
	Email string
	// Subject is the user concerned (recovery, email change); empty for a
	// sign-up.
	Subject string
	// PasswordHash is a sign-up's chosen password, hashed.
	PasswordHash []byte
	CodeHash     []byte
	LinkHash     []byte
	// ClientID and ReturnTo name the app and the authorization request the
	// flow started from ("" for none).
	ClientID string
	ReturnTo string
	// Attempts counts the guesses at the code.
	Attempts  int
	ExpiresAt time.Time
	// UsedAt is when the code was used; zero while unused.
	UsedAt    time.Time
	CreatedAt time.Time
}

// AccountFlowStore keeps pending self-service steps. Called with a context
// carrying a transaction (BeginTX), the methods run in it.
type AccountFlowStore interface {
	// CreateAccountFlow inserts f and reports true, or, if a flow with
	// f.ID exists, inserts nothing and reports false (a repeated form).
	// Concurrent calls with one ID: one inserts, the others wait for it
	// and report false.
	CreateAccountFlow(ctx context.Context, f *AccountFlow) (bool, error)
	// GetAccountFlow returns the flow, or ErrNotFound.
	GetAccountFlow(ctx context.Context, id string) (*AccountFlow, error)
	// AttemptAccountFlow counts one guess at an unused flow that has not
	// expired at now and has had fewer than max guesses, and returns it
	// (with the guess counted). Otherwise it returns ErrNotFound and
	// counts nothing. It is one conditional write.
	AttemptAccountFlow(ctx context.Context, id string, now time.Time, max int) (*AccountFlow, error)
	// UseAccountFlow marks an unused flow used and reports whether it did
	// (single use: of concurrent callers, one gets true).
	UseAccountFlow(ctx context.Context, id string, now time.Time) (bool, error)
	// DeleteAccountFlows deletes the flows of subject (the user is being
	// deleted).
	DeleteAccountFlows(ctx context.Context, subject string) error
	// FindUserByEmail returns a user whose username is username or whose
	// email is email (case-insensitive), or ErrNotFound.
	FindUserByEmail(ctx context.Context, username, email string) (*User, error)
	// ClaimUserEmail makes email subject's verified address, unless
	// another user has it as their email (case-insensitive) or has
	// username (the name the address maps to): then ErrAlreadyExists and
	// nothing changes, so "Forgot password?" never names two accounts.
	// ErrNotFound if there is no such user. The check and the write are
	// one conditional write; concurrent claims of one address are
	// serialised (in a transaction: until it ends).
	ClaimUserEmail(ctx context.Context, subject, email, username string) error
}
