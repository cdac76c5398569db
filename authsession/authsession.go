// Package authsession keeps the auth_session of the Authorization
// Challenge Endpoint (draft-ietf-oauth-first-party-apps-04 §5.2.2): the
// handle a first-party app holds between the steps of a native sign-in,
// and what the user has proven so far. It knows no HTTP; package oauth's
// challenge endpoint calls it.
//
// A handle is 32 random bytes, base64url; only its SHA-256 is stored (a
// fast hash suffices for 256 bits of entropy), so a database dump yields no
// usable handle. A session is bound to its client, to the DPoP key of its
// first request (§9; RFC 9449) and to the PKCE code_challenge; it lives
// Options.TTL (AUTHD_AUTH_SESSION_TTL), and every step advances it with one
// conditional write (storage.AuthSessionStore.UpdateAuthSession), so of
// two different steps racing on one session exactly one wins. After the
// step that issues a code it is done: nothing continues it.
package authsession

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/authd/authd/storage"
)

// handleLen is the number of random bytes of a handle (256 bits).
const handleLen = 32

// DefaultTTL is a session's lifetime when Options.TTL is zero.
const DefaultTTL = 5 * time.Minute

// ErrInvalid means the handle names no open session: unknown, expired,
// done, or advanced by another step meanwhile (invalid_session).
var ErrInvalid = errors.New("authsession: no such open session")

// Store is what the service needs of storage.
type Store interface {
	CreateAuthSession(ctx context.Context, a *storage.AuthSession) error
	GetAuthSession(ctx context.Context, id string, now time.Time) (*storage.AuthSession, error)
	UpdateAuthSession(ctx context.Context, a *storage.AuthSession, now time.Time) error
}

// Options configure the service.
type Options struct {
	// TTL is a session's lifetime from its first step (default
	// DefaultTTL).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Service keeps auth sessions.
type Service struct {
	store Store
	ttl   time.Duration
	now   func() time.Time
}

// New returns the service over store.
func New(store Store, o Options) *Service {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: store, ttl: o.TTL, now: o.Now}
}

// TTL is a session's lifetime.
func (s *Service) TTL() time.Duration { return s.ttl }

// ID is the stored identifier of a handle: SHA-256, hex.
func ID(handle string) string {
	sum := sha256.Sum256([]byte(handle))
	return hex.EncodeToString(sum[:])
}

// Start stores a (its ClientID, JKT, CodeChallenge, Params and what is
// proven so far set by the caller) as a new session, in ctx's transaction
// when there is one, and returns its handle.
func (s *Service) Start(ctx context.Context, a *storage.AuthSession) (string, error) {
	var b [handleLen]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	handle := base64.RawURLEncoding.EncodeToString(b[:])
	now := storage.NormalizeTime(s.now())
	a.ID, a.CreatedAt, a.ExpiresAt, a.Version, a.Done = ID(handle), now, now.Add(s.ttl), 0, false
	if err := s.store.CreateAuthSession(ctx, a); err != nil {
		return "", fmt.Errorf("authsession: start: %w", err)
	}
	return handle, nil
}

// Get returns the open session of handle, or ErrInvalid.
func (s *Service) Get(ctx context.Context, handle string) (*storage.AuthSession, error) {
	if len(handle) != base64.RawURLEncoding.EncodedLen(handleLen) {
		return nil, ErrInvalid
	}
	a, err := s.store.GetAuthSession(ctx, ID(handle), s.now())
	if errors.Is(err, storage.ErrNotFound) {
		return nil, ErrInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("authsession: get: %w", err)
	}
	return a, nil
}

// Advance writes a step's outcome (a's Subject, AMR, AuthTime, Done) if a
// is still the session's current version: ErrInvalid when another step
// advanced or ended it meanwhile, or it expired.
func (s *Service) Advance(ctx context.Context, a *storage.AuthSession) error {
	err := s.store.UpdateAuthSession(ctx, a, s.now())
	if errors.Is(err, storage.ErrNotFound) {
		return ErrInvalid
	}
	if err != nil {
		return fmt.Errorf("authsession: advance: %w", err)
	}
	return nil
}
