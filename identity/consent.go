package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/authd/authd/storage"
)

// Consent is a remembered consent.
type Consent struct {
	ClientID  string    `json:"client_id"`
	Scopes    []string  `json:"scopes"`
	GrantedAt time.Time `json:"granted_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ConsentCovers reports whether the remembered consent of subject for
// clientID covers every scope in scopes: then the consent page is skipped.
// A wider request (any scope not yet granted) is not covered.
func (s *Service) ConsentCovers(ctx context.Context, subject, clientID string, scopes []string) (bool, error) {
	c, err := s.store.GetConsent(ctx, subject, clientID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("identity: get consent: %w", err)
	}
	v := viewConsent(c)
	return v.Covers(scopes), nil
}

// viewConsent is the identity view of a stored consent.
func viewConsent(c *storage.Consent) Consent {
	return Consent{ClientID: c.ClientID, Scopes: c.Scopes, GrantedAt: c.GrantedAt, UpdatedAt: c.UpdatedAt}
}

// Covers reports whether the consent covers every scope in scopes (as
// ConsentCovers); a nil consent covers nothing.
func (c *Consent) Covers(scopes []string) bool {
	if c == nil {
		return false
	}
	for _, sc := range scopes {
		if !slices.Contains(c.Scopes, sc) {
			return false
		}
	}
	return true
}

// GrantConsent remembers that subject let clientID have scopes (added to
// what was granted before).
func (s *Service) GrantConsent(ctx context.Context, subject, clientID string, scopes []string) error {
	if err := s.store.GrantConsent(ctx, subject, clientID, scopes); err != nil {
		return fmt.Errorf("identity: grant consent: %w", err)
	}
	return nil
}

// Consents lists the user's remembered consents by client.
func (s *Service) Consents(ctx context.Context, username string) ([]Consent, error) {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return nil, err
	}
	cs, err := s.store.ListConsents(ctx, u.Subject)
	if err != nil {
		return nil, fmt.Errorf("identity: list consents: %w", err)
	}
	out := make([]Consent, 0, len(cs))
	for _, c := range cs {
		out = append(out, viewConsent(c))
	}
	return out, nil
}

// RevokeConsent withdraws the user's consent for clientID and revokes the
// codes and tokens issued to the user for that client, in one transaction
// (storage.ConsentStore.RevokeConsent). Errors: ErrUserNotFound,
// ErrConsentNotFound (the tokens are revoked all the same).
func (s *Service) RevokeConsent(ctx context.Context, username, clientID string) error {
	u, err := s.lookup(ctx, username)
	if err != nil {
		return err
	}
	return s.WithdrawConsent(ctx, u.Subject, clientID)
}

// WithdrawConsent is RevokeConsent by subject (the signed-in user's own
// withdrawal).
func (s *Service) WithdrawConsent(ctx context.Context, subject, clientID string) error {
	err := s.store.RevokeConsent(ctx, subject, clientID)
	if errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("%w: client %q", ErrConsentNotFound, clientID)
	}
	if err != nil {
		return fmt.Errorf("identity: revoke consent: %w", err)
	}
	return nil
}
