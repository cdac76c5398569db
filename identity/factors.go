package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/authd/authd/idempotency"
)

// The operator's second-factor operations (issue 27): require a second
// factor of a user, reset a user's factors. The factors themselves (TOTP,
// recovery codes) are package totp's; a reset deletes their rows and ends
// the user's sessions through SignOut, the path every "end this user's
// sessions" takes, so a session proven with a factor that no longer exists
// does not live on.

// factorStore is what the operations need beyond Store.
type factorStore interface {
	DeleteFactors(ctx context.Context, subject string) (bool, error)
	SetMFARequired(ctx context.Context, subject string, required bool, now time.Time) error
}

// FactorsReset is the answer of ResetMFA.
type FactorsReset struct {
	Subject        string `json:"sub"`
	FactorsRemoved bool   `json:"factors_removed"`
	SessionsEnded  int    `json:"sessions_ended"`
}

// ResetMFA deletes the user's second factors and ends every session of
// theirs, in the caller's transaction when ctx carries one. Errors:
// ErrInvalidUsername, ErrUserNotFound.
func (s *Service) ResetMFA(ctx context.Context, username string) (FactorsReset, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return FactorsReset{}, err
	}
	had, err := s.store.DeleteFactors(ctx, u.Subject)
	if err != nil {
		return FactorsReset{}, fmt.Errorf("identity: reset factors: %w", err)
	}
	n, err := s.SignOut(ctx, u.Username)
	if err != nil {
		return FactorsReset{}, err
	}
	s.opts.Logger.Info("audit", "event", "mfa.reset", "reason", "operator", "sub", u.Subject, "had_factor", had, "sessions_ended", n)
	return FactorsReset{Subject: u.Subject, FactorsRemoved: had, SessionsEnded: n}, nil
}

// RequireMFA records whether the user must have a second factor: a user
// required and without one is taken through its set-up at the next
// sign-in. Errors: ErrInvalidUsername, ErrUserNotFound.
func (s *Service) RequireMFA(ctx context.Context, username string, required bool) (User, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return User{}, err
	}
	if err := s.store.SetMFARequired(ctx, u.Subject, required, s.opts.Now()); err != nil {
		return User{}, fmt.Errorf("identity: require mfa: %w", err)
	}
	s.opts.Logger.Info("audit", "event", "mfa.require", "sub", u.Subject, "required", required)
	return view(u), nil
}

// scopeResetMFA is the Idempotency-Key scope of ResetMFA.
const scopeResetMFA = "POST /admin/users/*/reset-mfa"

// ResetMFA is Service.ResetMFA under an Idempotency-Key: OutcomeOK with
// FactorsReset (sub, factors_removed, sessions_ended).
func (a *Admin) ResetMFA(ctx context.Context, caller idempotency.Caller, key, username string) (Result, error) {
	return a.onUser(ctx, caller, key, username, scopeResetMFA, idempotency.OutcomeOK, func(ctx context.Context, name string) (any, string, error) {
		r, err := a.people.ResetMFA(ctx, name)
		return r, r.Subject, err
	})
}
