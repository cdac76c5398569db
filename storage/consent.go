package storage

import (
	"context"
	"time"
)

// Consent is a remembered consent: user Subject let ClientID have Scopes.
type Consent struct {
	Subject  string
	ClientID string
	// Scopes is the set granted so far, sorted, never nil.
	Scopes []string
	// GrantedAt is when it was first given, UpdatedAt when last widened.
	GrantedAt time.Time
	UpdatedAt time.Time
}

// ConsentStore keeps remembered consents.
type ConsentStore interface {
	// GetConsent returns the consent of subject for clientID, or
	// ErrNotFound.
	GetConsent(ctx context.Context, subject, clientID string) (*Consent, error)
	// GrantConsent adds scopes to the consent of subject for clientID,
	// creating it if needed (the stored set is the union). It returns
	// ErrNotFound if the user or client does not exist.
	GrantConsent(ctx context.Context, subject, clientID string, scopes []string) error
	// ListConsents returns the consents of subject, ordered by client ID.
	ListConsents(ctx context.Context, subject string) ([]*Consent, error)
	// RevokeConsent withdraws the consent of subject for clientID and
	// deactivates every code, access token and refresh token issued to
	// subject for that client, in one transaction (with the same grant
	// locking as RevokeSubject). In the same transaction it queues a
	// back-channel logout of the client for each session of subject it
	// was noted in (NoteSessionClient) and forgets it there: the app is
	// signed out, the sessions stay. It returns ErrNotFound if there was
	// no such consent; the tokens are revoked either way.
	RevokeConsent(ctx context.Context, subject, clientID string) error
}
