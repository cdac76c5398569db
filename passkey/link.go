package passkey

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/authd/authd/identity"
	"github.com/authd/authd/storage"
)

// Enrolment links (authd users passkey-link): a user without a password,
// or who lost their passkeys, adds one passkey with a single-use token the
// operator hands them. The link signs no one in.

// NewLink makes a single-use enrolment link token for the user, valid for
// LinkTTL: whoever holds it can add one passkey to the account, nothing
// else. Only its SHA-256 is stored.
func (s *Service) NewLink(ctx context.Context, subject string) (string, time.Time, error) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24).
	token := base64.RawURLEncoding.EncodeToString(b[:])
	expires := storage.NormalizeTime(s.opts.Now().Add(s.opts.LinkTTL))
	err := s.store.PutPasskeyLink(ctx, digest(token), subject, expires)
	if errors.Is(err, storage.ErrNotFound) {
		return "", time.Time{}, ErrUnknown
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("passkey: store link: %w", err)
	}
	return token, expires, nil
}

// LinkUser returns the user an unused, unexpired link enrols (ErrLink
// otherwise), without using it up.
func (s *Service) LinkUser(ctx context.Context, token string) (identity.User, error) {
	sub, err := s.store.GetPasskeyLink(ctx, digest(token), s.opts.Now())
	if errors.Is(err, storage.ErrNotFound) {
		return identity.User{}, ErrLink
	}
	if err != nil {
		return identity.User{}, fmt.Errorf("passkey: get link: %w", err)
	}
	u, err := s.store.GetUserBySubject(ctx, sub)
	if err != nil || u.Disabled {
		return identity.User{}, ErrLink
	}
	return userView(u), nil
}

// BeginLinkEnrol is BeginEnrol for the holder of an enrolment link.
func (s *Service) BeginLinkEnrol(ctx context.Context, token string) ([]byte, error) {
	u, err := s.LinkUser(ctx, token)
	if err != nil {
		return nil, err
	}
	return s.BeginEnrol(ctx, u.Subject, "link:"+token)
}

// FinishLinkEnrol is FinishEnrol for the holder of an enrolment link; the
// link is used up in the transaction that stores the passkey, so it adds
// one passkey at most.
func (s *Service) FinishLinkEnrol(ctx context.Context, token, name string, answer []byte) (Passkey, error) {
	u, err := s.LinkUser(ctx, token)
	if err != nil {
		return Passkey{}, err
	}
	return s.finishEnrol(ctx, u.Subject, "link:"+token, name, answer, func(ctx context.Context) error {
		sub, err := s.store.TakePasskeyLink(ctx, digest(token), s.opts.Now())
		if errors.Is(err, storage.ErrNotFound) || (err == nil && sub != u.Subject) {
			return ErrLink
		}
		return err
	})
}
